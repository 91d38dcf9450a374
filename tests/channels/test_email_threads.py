"""What email owes the protocol around a conversation (issue 38, items 19 and 11): automatic
mail (RFC 3834 §2: `Auto-Submitted`, `Precedence: bulk|list|junk`, a mailing list's headers,
the null sender `MAIL FROM:<>`) is taken and never answered; a long thread whose References a
mail program trimmed stays one chat, found by the Message-IDs the gateway sent; every mail sent
carries `Date:` and a Message-ID; a mail may carry the files one message of the API may."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import parsedate_to_datetime

from hearth.engine.intake.admission import MAX_FILES
from tests.fakes.mail_server import DKIM_PASS, FakeRelay, mail, send
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.mail import (  # noqa: F401 - `relay`
    BOT,
    GUEST,
    OWNER,
    email_gateway,
    relay_fixture,
)
from tests.support.telegram import chats

AUTOMATIC = [("Auto-Submitted", "auto-replied"), ("Auto-Submitted", "auto-generated (cron)"),
             ("Precedence", "bulk"), ("Precedence", "List"), ("Precedence", "junk"),
             ("List-Id", "Gardeners <gardeners.lists.example.net>"),
             ("List-Unsubscribe", "<mailto:leave@lists.example.net>")]


def test_automatic_mail_is_taken_and_never_answered(
        relay: FakeRelay, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    """Before, an out-of-office reply to an answer was answered, and that answer replied to."""
    model_server.default = Reply(text="Answered.")
    gateway, port = email_gateway(gateway_factory, relay)
    for n, (name, value) in enumerate(AUTOMATIC):
        sent = mail(GUEST, BOT, "I am away until Monday.", message_id=f"<auto{n}@example.net>")
        sent[name] = value
        code, said = send(port, sent, BOT)
        assert (code, b"not answered" in said) == (250, True), (name, value, said)
    bounce = mail("mailer-daemon@example.net", BOT, "Undeliverable", message_id="<b@x.net>")
    assert b"not answered" in send(port, bounce, BOT, mail_from="")[1]  # MAIL FROM:<>
    person = mail(GUEST, BOT, "And you?", message_id="<person@example.net>")
    person["Auto-Submitted"] = "no"  # a person wrote it, as RFC 3834 has it said
    assert send(port, person, BOT) == (250, b"2.0.0 Taken")
    [answer] = relay.wait(1)
    time.sleep(1.0)
    assert answer.get_content().strip() == "Answered." and len(relay.received) == 1
    assert len(model_server.requests) == 1 and len(chats(gateway.client())) == 1


def _reply(to: EmailMessage, text: str, message_id: str, references: str) -> EmailMessage:
    said = mail(OWNER, BOT, text, subject="Re: Plans", message_id=message_id,
                in_reply_to=str(to["Message-ID"]))
    said.replace_header("References", references)
    return said


def test_a_thread_whose_references_were_trimmed_stays_one_chat(
        relay: FakeRelay, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    """Before, the first of References was the thread: a mail program that kept only the last
    few ids started a new chat, and the gateway's own answers kept only the last 20."""
    model_server.default = Reply(text="Yes.")
    gateway, port = email_gateway(gateway_factory, relay)
    first = mail(OWNER, BOT, "one", subject="Plans", message_id="<t0@example.org>")
    assert send(port, first, BOT, checked=DKIM_PASS)[0] == 250
    answer = relay.wait(1)[0]
    chain = ["<t0@example.org>", str(answer["Message-ID"])]
    for n in range(1, 12):  # a long thread: the answers' References grow past 20 ids
        said = _reply(answer, f"more {n}", f"<t{n}@example.org>", " ".join(chain))
        assert send(port, said, BOT, checked=DKIM_PASS)[0] == 250
        answer = relay.wait(n + 1)[n]
        chain += [f"<t{n}@example.org>", str(answer["Message-ID"])]
    assert answer["References"].split()[0] == "<t0@example.org>"  # the root kept first
    trimmed = _reply(answer, "trimmed", "<t99@example.org>", str(answer["Message-ID"]))
    assert send(port, trimmed, BOT, checked=DKIM_PASS)[0] == 250
    last = relay.wait(13)[12]
    assert last["In-Reply-To"] == "<t99@example.org>"
    assert last["References"].split()[0] == "<t0@example.org>"
    [chat] = chats(gateway.client())
    users = [m["text"] for m in gateway.client().messages(chat["key"]) if m["kind"] == "user"]
    assert users[-1] == "trimmed" and len(users) == 13


def test_every_mail_sent_carries_a_date_and_a_message_id(
        relay: FakeRelay, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="Hello.")
    gateway, port = email_gateway(gateway_factory, relay)
    assert send(port, mail(GUEST, BOT, "hi", message_id="<d1@example.net>"), BOT)[0] == 250
    api = gateway.client()
    key = api.new_chat()
    assert api.http.put(f"/api/sessions/{key}/link", json={"channel": "email"}).is_success
    for sent in relay.wait(2):  # an answer, and the first mail of a conversation opened here
        dated = parsedate_to_datetime(str(sent["Date"]))
        assert abs((datetime.now(UTC) - dated).total_seconds()) < 120, sent["Date"]
        assert str(sent["Message-ID"]).startswith("<") and "@example.org>" in sent["Message-ID"]


def _with_files(count: int, message_id: str) -> EmailMessage:
    made = mail(OWNER, BOT, "the scans", message_id=message_id)
    for n in range(count):
        made.add_attachment(f"page {n}\n".encode(), maintype="text", subtype="plain",
                            filename=f"page{n}.txt")
    return made


def test_a_mail_with_more_files_than_a_message_may_send_is_refused_whole(
        relay: FakeRelay, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    """Before, any number of files were kept and sent (the API takes 20)."""
    model_server.default = Reply(text="Read them.")
    gateway, port = email_gateway(gateway_factory, relay)
    code, said = send(port, _with_files(MAX_FILES + 1, "<many@example.org>"), BOT,
                      checked=DKIM_PASS)
    assert code == 552 and f"at most {MAX_FILES}".encode() in said, said
    assert chats(gateway.client()) == []  # nothing of it kept: the sender has it back whole
    assert send(port, _with_files(MAX_FILES, "<enough@example.org>"), BOT,
                checked=DKIM_PASS)[0] == 250
    relay.wait(1)
    [chat] = chats(gateway.client())
    kept = gateway.client().http.get(f"/api/sessions/{chat['key']}/attachments").json()
    assert len(kept["attachments"]) == MAX_FILES
