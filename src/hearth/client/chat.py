"""`hearth chat`: one message (`-m`) or the prompt (`repl.py`), against a running gateway.

It speaks only the public HTTP API (`api.py`), like any other client. Exit codes: 0 when the
prompt was left or the one message was answered, 1 when that turn did not end with an answer,
3 when the gateway could not be reached or refused the chat.
"""

from __future__ import annotations

from hearth.client.api import GatewayApi, GatewayError
from hearth.client.repl import Repl
from hearth.client.terminal import Screen
from hearth.client.turn import Leave, take_turn

EXIT_TURN_FAILED = 1
EXIT_NO_GATEWAY = 3


def run(base_url: str, token: str, session: str | None, message: str | None,
        screen: Screen | None = None) -> int:
    """`hearth chat`'s exit code."""
    screen = screen or Screen()
    api = GatewayApi(base_url, token)
    try:
        if message is not None:
            return one_message(api, screen, session, message)
        return Repl(api, screen, session).run()
    except GatewayError as error:
        screen.note(str(error))
        return EXIT_NO_GATEWAY
    finally:
        api.close()


def one_message(api: GatewayApi, screen: Screen, session: str | None, text: str) -> int:
    """Send `text` (to the chat `session`, made if new; else to a new chat), print the answer."""
    key = str(api.create_chat(session, None)["key"])
    try:
        outcome = take_turn(api, screen, key, text)
    except Leave as leave:
        screen.note(str(leave))
        return EXIT_TURN_FAILED
    return 0 if outcome == "complete" else EXIT_TURN_FAILED
