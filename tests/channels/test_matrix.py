"""Matrix end to end: the real Matrix adapter (matrix-nio's AsyncClient) syncing with the fake
homeserver over loopback, in a real gateway answering from the scripted model."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from hearth.channels.matrix_reading import Room
from tests.fakes.matrix_server import BOT, TOKEN, FakeMatrix
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.polling import until
from tests.support.telegram import chats, running

OWNER, GUEST, THIRD = "@ann:example.org", "@bob:example.org", "@cy:example.org"
DM, GROUP, SECRET = "!dm:example.org", "!group:example.org", "!secret:example.org"


def matrix_config(fake: FakeMatrix) -> str:
    return (f'[channels.matrix]\nhomeserver = "{fake.url}"\nuser_id = "{BOT}"\n'
            f'access_token = "{TOKEN}"\nowner_ids = ["{OWNER}"]\npoll_timeout_seconds = 1\n')


def _started(factory: Callable[..., Gateway], fake: FakeMatrix) -> Gateway:
    gateway = factory(config=matrix_config(fake))
    running(gateway.client(), "matrix")
    until(lambda: len(fake.syncs) >= 2, what="syncing from the present")
    return gateway


def test_a_direct_room_is_answered_as_html_and_nothing_old_is_read(
        matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    matrix.room(DM, [OWNER])
    matrix.message(DM, OWNER, "an old message, before the bot was set up")
    model_server.push(Reply(text="Hello **Ann**.", delay=0.3))  # a turn long enough to type in
    gateway = _started(gateway_factory, matrix)
    matrix.message(DM, OWNER, "hi bot")
    [answer] = matrix.wait_sent(DM, 1)
    assert answer.body == "Hello **Ann**."
    assert answer.content["formatted_body"] == "<p>Hello <strong>Ann</strong>.</p>"
    assert answer.txn.startswith("hearth-")
    assert DM in matrix.typing
    [chat] = chats(gateway.client())
    said = [m["text"] for m in gateway.client().messages(chat["key"]) if m["kind"] == "user"]
    assert said == ["hi bot"]  # the old message was never read
    assert len(model_server.requests) == 1


def test_what_came_while_down_is_read_once_after_a_restart(
        matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    matrix.room(DM, [OWNER])
    model_server.default = Reply(text="Noted.")
    gateway = _started(gateway_factory, matrix)
    matrix.message(DM, OWNER, "first")
    matrix.wait_sent(DM, 1)
    gateway.kill()
    matrix.message(DM, OWNER, "while you were down")
    gateway.start()
    matrix.wait_sent(DM, 2)
    time.sleep(1.5)
    assert len(matrix.sent_to(DM)) == 2  # once each
    [chat] = chats(gateway.client())
    said = [m["text"] for m in gateway.client().messages(chat["key"]) if m["kind"] == "user"]
    assert said == ["first", "while you were down"]


def test_the_owners_room_is_known_again_after_a_restart_while_it_is_still_theirs(
        matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    """Continue on Matrix needs no new message after a restart (before: 409 until the owner
    wrote again); a room the owner has left is not taken for theirs."""
    matrix.room(DM, [OWNER])
    model_server.default = Reply(text="Noted.")
    gateway = _started(gateway_factory, matrix)
    matrix.message(DM, OWNER, "hello")
    matrix.wait_sent(DM, 1)
    gateway.kill()
    gateway.start()
    api = gateway.client()
    key = api.new_chat()
    until(lambda: api.http.put(f"/api/sessions/{key}/link",
                               json={"channel": "matrix"}).status_code == 200,
          what="the owner's room known again")
    assert api.http.get(f"/api/sessions/{key}").json()["link"]["thread"] == DM
    gateway.kill()
    matrix.room(DM, [GUEST])  # the owner left; someone else is there now
    synced = len(matrix.syncs)
    gateway.start()
    until(lambda: len(matrix.syncs) >= synced + 2, what="syncing again (the room looked at)")
    refused = api.http.put(f"/api/sessions/{api.new_chat()}/link", json={"channel": "matrix"})
    assert refused.status_code == 409, refused.text


def _grow(matrix: FakeMatrix, room: str, how: str, inviter: str) -> None:
    """A third person can read `room` now: they joined, or were invited (not joined yet)."""
    if how == "joins":
        matrix.join(room, THIRD)
    else:
        matrix.invite_member(room, inviter, THIRD)


def _users_said(model_server: ScriptedModelServer) -> list[str]:
    return [str(m["content"]) for r in model_server.requests for m in r.messages
            if m["role"] == "user"]


@pytest.mark.parametrize("how", ["joins", "is invited"])
def test_a_direct_room_a_third_person_can_read_is_a_group_room_at_once(
        how: str, matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    """Synapse sends no summary (members are not lazy-loaded), so the room's members are
    followed from its member events: once a third person joined or is invited, a guest's
    unaddressed message is not answered (before: the room stayed "direct" for good)."""
    matrix.room(DM, [GUEST])
    model_server.default = Reply(text="Noted.")
    _started(gateway_factory, matrix)
    matrix.message(DM, GUEST, "hello")
    matrix.wait_sent(DM, 1)  # a direct room: answered unaddressed
    _grow(matrix, DM, how, GUEST)
    matrix.message(DM, GUEST, "anyone there?")
    matrix.message(DM, GUEST, f"{BOT} are you still here?",
                   **{"m.mentions": {"user_ids": [BOT]}})
    matrix.wait_sent(DM, 2)
    time.sleep(1.5)
    assert len(matrix.sent_to(DM)) == 2
    said = _users_said(model_server)
    assert not any("anyone there" in text for text in said), said
    assert said[-1].endswith("are you still here?")


@pytest.mark.parametrize("how", ["joins", "is invited"])
def test_continue_on_matrix_never_moves_a_chat_into_a_room_anyone_else_can_read(
        how: str, matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    """The owner's direct room is one of the bot and one owner only: a third member (joined
    or invited) makes Continue on Matrix refuse it, and their leaving makes it the owner's
    again (before: the room the owner once wrote in stayed theirs whoever came in)."""
    matrix.room(DM, [OWNER])
    model_server.default = Reply(text="Noted.")
    gateway = _started(gateway_factory, matrix)
    matrix.message(DM, OWNER, "hello")
    matrix.wait_sent(DM, 1)
    _grow(matrix, DM, how, OWNER)
    synced = len(matrix.syncs)
    until(lambda: len(matrix.syncs) >= synced + 2, what="the room's growth synced")
    api = gateway.client()
    key = api.new_chat()
    refused = api.http.put(f"/api/sessions/{key}/link", json={"channel": "matrix"})
    assert refused.status_code == 409, refused.text
    assert api.http.get(f"/api/sessions/{key}").json()["link"] is None
    time.sleep(0.5)
    assert len(matrix.sent_to(DM)) == 1  # nothing moved there
    matrix.leave(DM, THIRD)
    until(lambda: api.http.put(f"/api/sessions/{key}/link",
                               json={"channel": "matrix"}).status_code == 200,
          what="the owner's room theirs alone again")


def _member(user: str, membership: str) -> dict[str, Any]:
    return {"type": "m.room.member", "state_key": user, "content": {"membership": membership}}


def test_a_room_is_shared_with_one_person_only_while_members_and_summary_both_say_so() -> None:
    """With lazy-loaded members a silent member's event may never come: a summary's counts
    still say that someone else can read the room; a leave or a ban takes a reader away."""
    room = Room.of_state([_member(BOT, "join"), _member(OWNER, "join")])
    assert room.shared_with(BOT) == OWNER
    room.count(2, 1)  # someone invited, whose member event was not sent
    assert room.shared_with(BOT) is None
    room.count(None, 0)  # a count left out has not changed
    assert room.shared_with(BOT) == OWNER
    room.take(_member(GUEST, "invite"))
    assert room.shared_with(BOT) is None
    room.take(_member(GUEST, "ban"))
    assert room.shared_with(BOT) == OWNER
    assert Room(readers={BOT, OWNER}, known=False).shared_with(BOT) is None


def test_a_group_room_is_answered_when_addressed_and_edits_redactions_skipped(
        matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    matrix.room(GROUP, [OWNER, GUEST])
    model_server.default = Reply(text="Here.")
    gateway = _started(gateway_factory, matrix)
    matrix.message(GROUP, GUEST, "just chatting")
    edited = matrix.message(GROUP, GUEST, "hearth: first draft")
    matrix.message(GROUP, GUEST, "* hearth: second draft", **{
        "m.relates_to": {"rel_type": "m.replace", "event_id": edited}})
    gone = matrix.message(GROUP, GUEST, "hearth: oops")
    matrix.redaction(GROUP, GUEST, gone)
    matrix.message(GROUP, GUEST, f"{BOT} what is the plan?\nline two",
                   **{"m.mentions": {"user_ids": [BOT]}})
    answers = matrix.wait_sent(GROUP, 2)
    time.sleep(1.5)
    assert len(matrix.sent_to(GROUP)) == 2
    users = [m["content"] for r in model_server.requests for m in r.messages
             if m["role"] == "user"]
    assert users[0].endswith("\nfirst draft")  # the edit was not a new message
    assert users[-1].endswith("\nwhat is the plan?\nline two")  # the name left out
    assert users[-1].startswith("[A message from")  # a guest's words, fenced
    assert not any("oops" in u for u in users) and not any("chatting" in u for u in users)
    matrix.message(GROUP, GUEST, "and a reply", **{
        "m.relates_to": {"m.in_reply_to": {"event_id": answers[0].event_id}}})
    matrix.wait_sent(GROUP, 3)  # a reply to the bot is for it
    assert len(chats(gateway.client())) == 1


def test_an_encrypted_room_is_told_once_it_is_not_read(
        matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    matrix.room("!secret:example.org", [OWNER])
    _started(gateway_factory, matrix)
    matrix.encrypted("!secret:example.org", OWNER)
    matrix.encrypted("!secret:example.org", OWNER)
    until(lambda: matrix.sent_to("!secret:example.org"), what="the room told")
    time.sleep(1.5)
    [told] = matrix.sent_to("!secret:example.org")
    assert "end-to-end encrypted" in told.body and told.content["msgtype"] == "m.notice"
    assert not model_server.requests


def test_an_encrypted_room_gets_no_plaintext_answer_to_a_plaintext_message(
        matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    """A room with encryption on may still carry an unencrypted message (a bridge, an old
    client); it is not taken, and the room hears only the one fixed notice (before: the
    message was answered in plaintext)."""
    matrix.room(SECRET, [OWNER], encrypted=True)
    model_server.default = Reply(text="A plaintext answer.")
    _started(gateway_factory, matrix)
    matrix.message(SECRET, OWNER, "a plaintext message in an encrypted room")
    until(lambda: matrix.sent_to(SECRET), what="the room told")
    time.sleep(1.5)
    [told] = matrix.sent_to(SECRET)
    assert "end-to-end encrypted" in told.body and told.content["msgtype"] == "m.notice"
    assert not any("plaintext answer" in sent.body for sent in matrix.sent)
    assert not model_server.requests


def _desk(api: Any) -> list[dict[str, Any]]:
    return list(api.http.get("/api/desk").json()["deliveries"])


def test_a_room_encrypted_after_the_chat_began_is_sent_no_further_answer(
        matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    """Encryption turned on while /sync is down (the adapter has not seen it): the next answer
    is not sent, and its delivery ends failed on the desk and in the chat, with the reason
    (before: it went out in plaintext)."""
    matrix.room(DM, [OWNER])
    model_server.push(Reply(text="First answer."), Reply(text="The second, private answer."))
    gateway = _started(gateway_factory, matrix)
    matrix.message(DM, OWNER, "hello")
    matrix.wait_sent(DM, 1)
    api = gateway.client()
    [chat] = chats(api)
    synced = len(matrix.syncs)
    matrix.fail("sync", 500, times=10_000)
    until(lambda: len(matrix.syncs) >= synced + 2, what="a sync refused (the poller down)")
    matrix.encrypt(DM, OWNER)
    api.wait(api.send(chat["key"], "a word from the dashboard")["run_id"])
    until(lambda: _desk(api) or len(matrix.sent_to(DM)) > 1, what="the answer's delivery ended")
    assert [sent.body for sent in matrix.sent_to(DM)] == ["First answer."]
    [failed] = _desk(api)
    assert (failed["channel"], failed["state"], failed["thread"]) == ("matrix", "failed", DM)
    assert "end-to-end encrypted" in failed["why"], failed
    notices = [m["text"] for m in api.messages(chat["key"]) if m["kind"] == "notice"]
    assert any("could not be delivered" in n and "encrypted" in n for n in notices), notices


def test_an_approval_is_answered_by_the_owners_reaction_only(
        matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    matrix.room(DM, [OWNER])
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "m.txt", "content": "m"})]),
                      Reply(text="Wrote it."))
    gateway = _started(gateway_factory, matrix)
    matrix.message(DM, OWNER, "write m.txt")
    [question] = matrix.wait_sent(DM, 1)
    assert "write_file" in question.body and "React 👍" in question.body
    matrix.reaction(DM, GUEST, question.event_id, "👍")
    time.sleep(1.5)
    assert not (gateway.home / "workspace" / "m.txt").exists()
    matrix.reaction(DM, OWNER, question.event_id, "👍")
    until(lambda: (gateway.home / "workspace" / "m.txt").exists(), what="the file written")
    until(lambda: any(m.body == "Wrote it." for m in matrix.sent_to(DM)), what="the answer")


def test_a_reaction_or_a_reply_to_what_the_bot_sent_before_a_restart_still_counts(
        matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    """The delivery ledger, not the adapter's memory, says which events are the bot's."""
    matrix.room(DM, [OWNER])
    matrix.room(GROUP, [OWNER, GUEST])
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "r.txt", "content": "r"})]),
                      Reply(text="Group answer."), Reply(text="Wrote it."),
                      Reply(text="Answered your reply."))
    gateway = _started(gateway_factory, matrix)
    matrix.message(DM, OWNER, "write r.txt")
    [question] = matrix.wait_sent(DM, 1)
    matrix.message(GROUP, OWNER, f"{BOT} hello")
    [said] = matrix.wait_sent(GROUP, 1)
    gateway.kill()
    gateway.start()
    matrix.reaction(DM, OWNER, question.event_id, "👍")
    until(lambda: (gateway.home / "workspace" / "r.txt").exists(), what="the file written")
    until(lambda: any(m.body == "Wrote it." for m in matrix.sent_to(DM)), what="the answer")
    matrix.message(GROUP, GUEST, "and what about me?",
                   **{"m.relates_to": {"m.in_reply_to": {"event_id": said.event_id}}})
    assert matrix.wait_sent(GROUP, 2)[1].body == "Answered your reply."


def test_a_rate_limited_send_waits_and_goes_out_once(
        matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    matrix.room(DM, [OWNER])
    model_server.push(Reply(text="After the wait."))
    matrix.fail("send", 429, times=2, retry_after_ms=300)
    _started(gateway_factory, matrix)
    matrix.message(DM, OWNER, "hello")
    [answer] = matrix.wait_sent(DM, 1)
    assert answer.body == "After the wait."


def test_a_flood_across_rooms_is_answered_once_each_in_order(
        matrix: FakeMatrix, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    rooms = [matrix.room(f"!r{n}:example.org", [OWNER]) for n in range(3)]
    model_server.default = Reply(text="ok")
    gateway = _started(gateway_factory, matrix)
    for n in range(4):
        for room in rooms:
            matrix.message(room, OWNER, f"{room} message {n}")
    for room in rooms:
        matrix.wait_sent(room, 4, timeout=60)
    time.sleep(1.5)
    api = gateway.client()
    for chat in chats(api):
        said = api.messages(chat["key"])
        users = [m for m in said if m["kind"] == "user"]
        room = users[0]["source"]["thread"]
        assert [m["text"] for m in users] == [f"{room} message {n}" for n in range(4)]
        answers = [m["run_id"] for m in said if m["kind"] == "assistant"]
        assert answers == [m["run_id"] for m in users]  # each answered once, in order
        assert len(matrix.sent_to(room)) == 4
