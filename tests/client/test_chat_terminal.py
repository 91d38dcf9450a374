"""`hearth chat` at a real terminal: the command runs in a pty (pexpect), typed at and
interrupted (Ctrl-C is the terminal's own interrupt character), against a real gateway whose
model is the scripted fake.

The gateway is shared by the module (served in this process). Its chat chain is the model
`fake` and its background chain another model, `bg`: the after-turn learning a turn starts
asks `bg`, and the replies scripted here are queued for `fake-model` (or `other-model`) alone,
so a learning call never takes a reply meant for a turn.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.terminal import (
    CHAT_MODEL,
    OTHER_MODEL,
    PROMPT,
    QUESTION,
    Terminal,
    api_fixture,  # noqa: F401 - the fixture `api`
    chat_key,
    chat_keys,
    fresh_script,  # noqa: F401 - a fixture, autouse
    gateway_fixture,  # noqa: F401 - the fixture `gateway`
    run_of,
    script,
    server_fixture,  # noqa: F401 - the fixture `server`
    terminal_fixture,  # noqa: F401 - the fixture `terminal`
    turn_calls,
)

# ---------------------------------------------------------------------------------- approvals


def test_an_approval_is_shown_and_allowed_once_then_the_tool_runs(
        server: ScriptedModelServer, gateway: Gateway, api: Api, terminal: Any) -> None:
    content = "first line\nsecond line\n"
    script(server, Reply(tool_calls=[Call("write_file", {"path": "cli/once.txt",
                                                         "content": content})]),
           Reply(text="I wrote the file."))
    written = gateway.home / "workspace" / "cli" / "once.txt"
    term = terminal()
    term.expect(PROMPT)
    term.type("write it")
    term.expect("Approval needed: write_file")
    shown = term.expect(QUESTION)
    assert "cli/once.txt" in shown and "first line" in shown and "second line" in shown
    assert not written.exists()  # the call waits for the answer
    term.type("o")
    term.expect("Allowed once.")
    after = term.expect(PROMPT)
    assert "I wrote the file." in after
    assert written.read_text() == content
    key = chat_key(term.leave())
    run = run_of(api, key, "write it")
    assert run["status"] == "complete"
    assert [c["status"] for c in run["tool_calls"]] == ["finished"]
    assert api.http.get("/api/approvals").json()["approvals"] == []  # answered, not left


def test_a_denied_call_does_not_run_and_the_turn_goes_on(
        server: ScriptedModelServer, gateway: Gateway, api: Api, terminal: Any) -> None:
    script(server, Reply(tool_calls=[Call("shell", {"command": "touch cli-denied.txt"})]),
           Reply(text="Understood, I left it."))
    term = terminal()
    term.expect(PROMPT)
    term.type("make the file")
    shown = term.expect(QUESTION)
    assert "$ touch cli-denied.txt" in shown
    term.type("d")
    term.expect("Denied")
    assert "Understood, I left it." in term.expect(PROMPT)
    key = chat_key(term.leave())
    run = run_of(api, key, "make the file")
    assert [c["status"] for c in run["tool_calls"]] == ["denied"]
    assert not (gateway.home / "workspace" / "cli-denied.txt").exists()


def test_an_unknown_answer_is_asked_again(
        server: ScriptedModelServer, gateway: Gateway, terminal: Any) -> None:
    script(server, Reply(tool_calls=[Call("write_file", {"path": "cli/again.txt",
                                                         "content": "x\n"})]),
           Reply(text="Done."))
    term = terminal()
    term.expect(PROMPT)
    term.type("write")
    term.expect(QUESTION)
    term.type("maybe")
    term.expect("Type o to allow it once")
    term.expect(QUESTION)
    assert not (gateway.home / "workspace" / "cli" / "again.txt").exists()
    term.type("once")
    assert "Done." in term.expect(PROMPT)
    assert (gateway.home / "workspace" / "cli" / "again.txt").read_text() == "x\n"
    term.leave()


def test_always_is_not_offered_where_the_chat_keeps_nothing(
        server: ScriptedModelServer, gateway: Gateway, api: Api, terminal: Any) -> None:
    script(server, Reply(tool_calls=[Call("write_file", {"path": "cli/incognito.txt",
                                                         "content": "x\n"})]),
           Reply(text="Written."))
    key = api.new_chat(memory_mode="incognito", trust="ask")
    term = terminal("--session", key)
    term.expect(f"Chat {key}:")
    term.expect(PROMPT)
    term.type("write")
    term.expect("Allow write_file? [o]nce, [d]eny? ")
    term.type("a")  # not offered: asked again
    term.expect("Type o to allow it once or d to deny it.")
    term.type("o")
    assert "Written." in term.expect(PROMPT)
    assert "[a]lways" not in term.seen
    term.leave()


def test_ctrl_d_at_a_question_leaves_it_waiting_and_session_asks_it_again(
        server: ScriptedModelServer, gateway: Gateway, api: Api, terminal: Any) -> None:
    script(server, Reply(tool_calls=[Call("write_file", {"path": "cli/later.txt",
                                                         "content": "later\n"})]),
           Reply(text="Written at last."))
    term = terminal()
    term.expect(PROMPT)
    term.type("write it later")
    term.expect(QUESTION)
    term.child.sendeof()
    key = chat_key(term.ended())
    assert "The approval still waits" in term.seen
    waiting = api.http.get("/api/approvals").json()["approvals"]
    assert [(a["session"], a["tool"]) for a in waiting] == [(key, "write_file")]
    again = terminal("--session", key)
    again.expect("A turn is running")
    again.expect("Approval needed: write_file on cli/later.txt")
    again.expect(QUESTION)
    again.type("o")
    assert "Written at last." in again.expect(PROMPT)
    assert (gateway.home / "workspace" / "cli" / "later.txt").read_text() == "later\n"
    assert run_of(api, key, "write it later")["status"] == "complete"
    again.leave()


# ---------------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_stops_the_turn_and_a_second_one_at_the_prompt_leaves(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    asked, release = threading.Event(), threading.Event()
    script(server, Reply(text="never shown", hold=release, started=asked))
    try:
        term = terminal()
        term.expect(PROMPT)
        term.type("take your time")
        assert asked.wait(20), "the model was never asked"
        term.interrupt()
        term.expect("Stopping the turn")
        term.expect("[stopped]")
        term.expect(PROMPT)
        term.interrupt()  # nothing typed: leave
        key = chat_key(term.ended())
    finally:
        release.set()
    run = run_of(api, key, "take your time")
    assert run["status"] == "stopped"
    assert "never shown" not in term.seen


def test_ctrl_c_with_a_line_typed_drops_the_line_and_stays(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    before = chat_keys(api)
    term = terminal()
    term.expect(PROMPT)
    term.child.send("half a thought")
    term.expect("half a thought")  # echoed: the prompt has read it
    term.interrupt()
    term.expect(PROMPT)  # still here, the line not sent
    assert term.child.isalive()
    term.leave()
    assert chat_keys(api) == before
    assert turn_calls(server) == []


def test_a_turn_is_followed_across_a_gateway_restart(
        gateway_factory: Any, model_server: ScriptedModelServer, tmp_path: Path) -> None:
    """The gateway goes away while the answer streams (its turn left unfinished in the store);
    its next start resumes the turn, and the terminal waits for it and shows the resumed
    answer, once."""
    model_server.push(Reply(text="part one, part two", chunks=2, stall=10, stall_after=1))
    model_server.default = Reply(text="the resumed answer")
    restarting = gateway_factory()  # its kill leaves the running turn to the next start
    term = Terminal(restarting, tmp_path / "client-home")
    try:
        term.expect(PROMPT)
        term.type("go on")
        term.expect("part one")
        restarting.kill()
        restarting.start()
        after = term.expect(PROMPT)
        key = chat_key(term.leave())
    finally:
        term.close()
    # back before the terminal's next connection or not, the restart is seen and said
    assert "The gateway went away" in after or "The gateway restarted" in after, after
    assert after.count("the resumed answer") == 1, after
    assert "ed answer\r\n" not in after.replace("the resumed answer", ""), after  # no offsets mixed
    assert "interrupted by a restart and resumed" in after
    run = run_of(restarting.client(), key, "go on")
    assert run["status"] == "complete" and run["recovery_attempts"] == 1


# ---------------------------------------------------------------------------------- commands


def test_help_and_an_unknown_command_list_the_commands(terminal: Any) -> None:
    term = terminal()
    term.expect(PROMPT)
    term.type("/help")
    listed = term.expect(PROMPT)
    for command in ("/help", "/new", "/stop", "/history", "/model NAME", "/exit"):
        assert command in listed, listed
    term.type("/frobnicate")
    unknown = term.expect(PROMPT)
    assert "There is no command /frobnicate" in unknown
    assert "/history" in unknown and "/model NAME" in unknown
    term.type("/stop")
    assert "No turn is running" in term.expect(PROMPT)
    term.type("/exit")
    term.ended()


def test_new_starts_a_fresh_chat_made_only_by_its_first_message(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    script(server, Reply(text="first answer"), Reply(text="second answer"))
    term = terminal()
    term.expect(PROMPT)
    term.type("in the first chat")
    assert "first answer" in term.expect(PROMPT)
    made = chat_keys(api)
    term.type("/new")
    term.expect(PROMPT)
    assert chat_keys(api) == made  # /new makes nothing yet
    term.type("in the second chat")
    assert "second answer" in term.expect(PROMPT)
    second = chat_key(term.leave())
    (first,) = {k for k in made if any(m["text"] == "in the first chat"
                                       for m in api.messages(k))}
    assert second != first
    assert [m["text"] for m in api.messages(second) if m["kind"] == "user"] \
        == ["in the second chat"]


def test_model_before_the_chat_exists_makes_it_with_that_model(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    script(server, Reply(text="from the other model"), model=OTHER_MODEL)
    term = terminal()
    term.expect(PROMPT)
    term.type("/model other")
    term.expect(PROMPT)
    term.type("which model?")
    assert "from the other model" in term.expect(PROMPT)
    key = chat_key(term.leave())
    assert api.http.get(f"/api/sessions/{key}").json()["session"]["model"] == "other"
    turns = [r.model for r in turn_calls(server)
             if r.messages and r.messages[-1].get("content") == "which model?"]
    assert turns == [OTHER_MODEL]


def test_model_on_a_kept_chat_changes_the_next_turn(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    script(server, Reply(text="the usual model"))
    script(server, Reply(text="the other model"), model=OTHER_MODEL)
    term = terminal()
    term.expect(PROMPT)
    term.type("before")
    assert "the usual model" in term.expect(PROMPT)
    term.type("/model other")
    said = term.expect(PROMPT)
    assert "From the next turn, this chat answers with other" in said, said
    term.type("after")
    assert "the other model" in term.expect(PROMPT)
    key = chat_key(term.leave())
    assert api.http.get(f"/api/sessions/{key}").json()["session"]["model"] == "other"
    by_text = {r.messages[-1].get("content"): r.model
               for r in turn_calls(server) if r.messages}
    assert by_text["before"] == CHAT_MODEL and by_text["after"] == OTHER_MODEL


def test_an_unknown_model_is_said_and_nothing_is_sent(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    before = chat_keys(api)
    term = terminal()
    term.expect(PROMPT)
    term.type("/model no-such-model")
    term.expect(PROMPT)
    term.type("hello?")
    said = term.expect(PROMPT)
    assert "no-such-model" in said and "The message was not sent." in said, said
    assert "/model NAME" in said
    term.leave()
    assert chat_keys(api) == before
    assert turn_calls(server) == []


def test_history_prints_the_last_messages_again(
        server: ScriptedModelServer, terminal: Any) -> None:
    script(server, Reply(text="an answer to remember"))
    term = terminal()
    term.expect(PROMPT)
    term.type("/history")
    assert "no messages yet" in term.expect(PROMPT)
    term.type("remember this")
    term.expect(PROMPT)
    term.type("/history")
    shown = term.expect("an answer to remember")  # (a past message of yours shows the prompt)
    assert shown.endswith(f"[0] {PROMPT}remember this\r\n[1] "), shown  # numbered
    term.expect(PROMPT)
    term.leave()


# ---------------------------------------------------------------------------------- sessions


def test_session_prints_the_chats_last_messages_before_the_prompt(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    script(server, Reply(tool_calls=[Call("write_file", {"path": "cli/kept.txt",
                                                         "content": "kept\n"})]),
           Reply(text="kept answer"))
    key = api.new_chat(name="kept-chat")  # trusted: its call runs without asking
    run_id = api.send(key, "an earlier question")["run_id"]
    assert api.wait(run_id)["status"] == "complete"
    term = terminal("--session", key)
    before = term.expect(f"Chat {key}:")  # said after the messages, before the prompt
    assert "you> an earlier question" in before
    assert "kept answer" in before
    calls = [line for line in before.splitlines() if "cli/kept.txt" in line]
    assert len(calls) == 1, before  # a tool call is one line
    assert before.index("an earlier question") < before.index("kept answer")
    term.expect(PROMPT)
    term.leave()


def test_a_new_session_name_is_made_by_its_first_message(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    script(server, Reply(text="hello, named chat"))
    term = terminal("--session", "named-later")
    term.expect(PROMPT)
    assert "named-later" not in chat_keys(api)
    term.type("hi")
    assert "hello, named chat" in term.expect(PROMPT)
    assert chat_key(term.leave()) == "named-later"
    assert [m["text"] for m in api.messages("named-later") if m["kind"] == "user"] == ["hi"]


def test_starting_and_leaving_without_a_word_keeps_no_chat(
        server: ScriptedModelServer, api: Api, terminal: Any) -> None:
    before = chat_keys(api)
    term = terminal()
    term.expect(PROMPT)
    term.type("/new")
    term.expect(PROMPT)
    printed = term.leave()
    assert "--session" not in printed  # there is no chat to continue
    assert chat_keys(api) == before
    assert turn_calls(server) == []
