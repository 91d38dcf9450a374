"""`hearth chat`'s branching commands at a real terminal (a pty, pexpect) against a real
gateway: /regenerate follows the new answer and says which variant it is, /variant N shows
another, /edit sends new words for your last message (offered as they were), /rewind N and
/fork N take the numbers /history prints, a fork moves the prompt to the new chat, and the
repeat guard's question is asked y/N before a turn that wrote a file runs again.

The gateway, the scripted model and the terminal are those of tests/support/terminal.py, as in
test_chat_terminal.py (a gateway of this module's own)."""

from __future__ import annotations

import re
from typing import Any

from hearth.client import history
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api
from tests.support.terminal import (
    PROMPT,
    QUESTION,
    api_fixture,  # noqa: F401 - the fixture `api`
    chat_key,
    fresh_script,  # noqa: F401 - a fixture, autouse
    gateway_fixture,  # noqa: F401 - the fixture `gateway`
    script,
    server_fixture,  # noqa: F401 - the fixture `server`
    terminal_fixture,  # noqa: F401 - the fixture `terminal`
    turn_calls,
)

ASK = "Run it again anyway? [y/N] "


def said(client: Api, key: str) -> list[tuple[str, str]]:
    return [(m["kind"], m["text"]) for m in client.messages(key)
            if m["kind"] in ("user", "assistant")]


def test_regenerate_follows_the_new_answer_and_variant_shows_another(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    script(server, Reply(text="Red."))
    term = terminal()
    term.expect(PROMPT)
    term.type("name a colour")
    assert "Red." in term.expect(PROMPT)
    script(server, Reply(text="Blue."))
    term.type("/regenerate")
    assert "Blue." in term.expect("(variant 2 of 2; /variant N shows another)")
    term.expect(PROMPT)
    term.type("/variant 1")
    shown = term.expect("[1] (variant 1 of 2) Red.")
    assert "Blue." not in shown
    term.expect(PROMPT)
    term.type("/variant 3")
    assert "The last answer has 2 variants: /variant 1 to /variant 2." in term.expect(PROMPT)
    term.type("/history")
    listed = term.expect("Red.")
    assert "[0] you> name a colour" in listed and "[1] (variant 1 of 2) " in listed
    term.expect(PROMPT)
    key = chat_key(term.leave())
    assert said(api, key) == [("user", "name a colour"), ("assistant", "Red.")]


def test_edit_offers_your_last_message_and_sends_the_new_words(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    script(server, Reply(text="Hi."), Reply(text="Cats purr."))
    term = terminal()
    term.expect(PROMPT)
    term.type("hello")
    term.expect(PROMPT)
    term.type("tell me about cats")
    term.expect(PROMPT)
    term.type("/edit")
    term.expect("edit> ")
    term.expect("tell me about cats")  # offered as it was, to change
    script(server, Reply(text="Dogs bark."))
    term.child.send("\x15")  # Ctrl-U: the line emptied
    term.type("tell me about dogs")
    assert "Dogs bark." in term.expect("(your message is variant 2 of 2)")
    term.expect(PROMPT)
    term.type("/edit")
    term.expect("edit> ")
    term.child.send("\x15")
    term.type("")
    term.expect("Not edited.")
    term.expect(PROMPT)
    key = chat_key(term.leave())
    assert said(api, key) == [("user", "hello"), ("assistant", "Hi."),
                              ("user", "tell me about dogs"), ("assistant", "Dogs bark.")]


def test_rewind_and_fork_take_the_numbers_history_shows(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    script(server, Reply(text="First."), Reply(text="Second."), Reply(text="Third."))
    term = terminal()
    term.expect(PROMPT)
    for words in ("one", "two", "three"):
        term.type(words)
        term.expect(PROMPT)
    term.type("/history")
    listed = term.expect("Third.")
    assert "[2] you> two" in listed and "[3] Second." in listed
    term.expect(PROMPT)
    asked = len(turn_calls(server))
    term.type("/rewind 3")
    term.expect("Back at message 3")
    term.expect(PROMPT)
    assert len(turn_calls(server)) == asked  # at an answer, nothing runs
    term.type("/fork 1")
    made = re.search(r"into chat (\S+);", term.expect("talks to it now"))
    assert made, term.seen
    fork = made.group(1)
    original = chat_key(term.expect(PROMPT))  # "The chat you left is as it was: …"
    assert original != fork
    script(server, Reply(text="In the fork."))
    term.type("four")
    term.expect(PROMPT)
    assert chat_key(term.leave()) == fork
    assert said(api, fork) == [("user", "one"), ("assistant", "First."),
                               ("user", "four"), ("assistant", "In the fork.")]
    assert said(api, original) == [("user", "one"), ("assistant", "First."),
                                   ("user", "two"), ("assistant", "Second.")]


def test_a_regenerate_that_may_repeat_a_write_is_asked_first(
        server: ScriptedModelServer, gateway: Any, api: Api,
        terminal: Any) -> None:
    script(server, Reply(tool_calls=[Call("write_file", {"path": "cli/again.txt",
                                                         "content": "x"})]),
           Reply(text="Wrote it."))
    term = terminal()
    term.expect(PROMPT)
    term.type("write it")
    term.expect(QUESTION)
    term.type("o")
    assert "Wrote it." in term.expect(PROMPT)
    asked = len(turn_calls(server))
    term.type("/regenerate")
    shown = term.expect(ASK)
    assert "may repeat 1 step" in shown and "write_file cli/again.txt" in shown
    term.type("n")
    term.expect("Nothing was run again.")
    term.expect(PROMPT)
    assert len(turn_calls(server)) == asked
    script(server, Reply(text="Again, without writing."))
    term.type("/regenerate")
    term.expect(ASK)
    term.type("y")
    assert "Again, without writing." in term.expect("(variant 2 of 2")
    term.expect(PROMPT)
    key = chat_key(term.leave())
    assert said(api, key)[-1] == ("assistant", "Again, without writing.")


def test_the_commands_need_a_chat_and_a_number(terminal: Any) -> None:
    term = terminal()
    term.expect(PROMPT)
    term.type("/regenerate")
    assert "This chat has no messages yet." in term.expect(PROMPT)
    term.type("/help")
    listed = term.expect("/exit")
    for command in ("/regenerate", "/variant N", "/edit", "/rewind N", "/fork N"):
        assert command in listed, listed
    term.expect(PROMPT)
    term.leave()


def test_history_numbers_each_message_with_its_visible_index() -> None:
    messages = [
        {"kind": "user", "text": "hi", "visible_index": 0, "variants": {"count": 1, "index": 0}},
        {"kind": "tool_call", "text": "", "content": {"call_id": "c", "name": "list_files",
                                                      "arguments": {}}},
        {"kind": "assistant", "text": "Hello.\nHow are you?", "visible_index": 1,
         "variants": {"count": 3, "index": 1}},
    ]
    assert history.lines(messages) == ["[0] you> hi", "  · list_files()",
                                       "[1] (variant 2 of 3) Hello.\nHow are you?"]
