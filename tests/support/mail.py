"""What the tests of the email channel share (the relay and the receiving server are
tests/fakes/mail_server.py): the addresses, the gateway's `[channels.email]` for a relay, a
gateway started with it, and the `relay` fixture."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.fakes.mail_server import RECEIVER, FakeRelay, free_port
from tests.gateway import Gateway
from tests.support.telegram import running

BOT, OWNER, GUEST = "hearth@example.org", "me@example.org", "bob@example.net"


@pytest.fixture(name="relay")
def relay_fixture() -> Iterator[FakeRelay]:
    """A real SMTP relay of the test's own, keeping what the gateway sends."""
    with FakeRelay() as fake:
        yield fake


def email_config(relay: FakeRelay, port: int, *, authserv_id: str | None = RECEIVER,
                 extra: str = "") -> str:
    """The gateway's `[channels.email]`: listening on `port`, answering through `relay`,
    trusting the Authentication-Results of `authserv_id` (None: of no server)."""
    trusted = f'authserv_id = "{authserv_id}"\n' if authserv_id else ""
    return (f'[channels.email]\naddress = "{BOT}"\nowner_addresses = ["{OWNER}"]\n'
            f"listen_port = {port}\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {relay.port}\n"
            f"smtp_starttls = false\n{trusted}{extra}")


def email_gateway(factory: Callable[..., Gateway], relay: FakeRelay, *,
                  authserv_id: str | None = RECEIVER, extra: str = "") -> tuple[Gateway, int]:
    """A gateway whose email channel is listening (`email_config`); its port."""
    port = free_port()
    gateway = factory(config=email_config(relay, port, authserv_id=authserv_id, extra=extra))
    running(gateway.client(), "email")
    return gateway, port
