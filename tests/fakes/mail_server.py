"""A real SMTP relay for the email channel's tests: aiosmtpd's own server (its Controller, on
127.0.0.1 in a thread of its own) keeping every mail it is handed, parsed, in `received`;
`fail(code, times)` answers the next mails' DATA with an SMTP error instead (451: try later,
550: refused). `send(port, …)` hands a mail to a gateway's SMTP listener as the owner's
receiving mail server would (smtplib), answering the listener's reply: like OpenDMARC or
rspamd in front of Postfix, it first removes every `Authentication-Results` that claims its
own authserv-id (`RECEIVER`; RFC 8601 §5: only it may write those), then prepends its own
saying what it found (`checked`), and gives the envelope sender it was handed (`mail_from`;
"" is the null sender `MAIL FROM:<>` of a bounce or an auto-reply)."""

from __future__ import annotations

import copy
import re
import smtplib
import socket
import threading
import time
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any, Self

from aiosmtpd.controller import Controller

RECEIVER = "mx.example.org"  # the authserv-id of the owner's receiving mail server
DKIM_PASS = "dkim=pass header.d=example.org header.s=s1"  # what it finds of the owner's mail
AUTH_RESULTS = "Authentication-Results"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class FakeRelay:
    def __init__(self) -> None:
        self.received: list[EmailMessage] = []
        self._failures: list[int] = []
        self._cond = threading.Condition()
        self._controller: Controller | None = None
        self.port = free_port()

    def __enter__(self) -> Self:
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._controller is not None:
            self._controller.stop()

    def fail(self, code: int, times: int = 1) -> None:
        with self._cond:
            self._failures += [code] * times

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        with self._cond:
            if self._failures:
                code = self._failures.pop(0)
                return f"{code} {'4.3.0 try later' if code < 500 else '5.7.1 refused'}"
            parsed = BytesParser(policy=policy.default).parsebytes(envelope.original_content
                                                                  or envelope.content)
            assert isinstance(parsed, EmailMessage)
            self.received.append(parsed)
            self._cond.notify_all()
        return "250 OK"

    def wait(self, count: int, timeout: float = 15.0) -> list[EmailMessage]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.received) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the relay got {len(self.received)} mail(s), "
                                         f"not {count}")
                self._cond.wait(left)
            return list(self.received)


def mail(sender: str, to: str, text: str, *, subject: str = "Hello", message_id: str,
         in_reply_to: str | None = None, html: str | None = None) -> EmailMessage:
    """A mail as its sender wrote it (what a receiving server says of it is `send`'s)."""
    made = EmailMessage()
    made["From"], made["To"], made["Subject"] = sender, to, subject
    made["Message-ID"] = message_id
    if in_reply_to:
        made["In-Reply-To"] = made["References"] = in_reply_to
    made.set_content(text)
    if html is not None:
        made.add_alternative(html, subtype="html")
    return made


def received(message: EmailMessage, checked: str | None,
             receiver: str = RECEIVER) -> bytes:
    """`message` as the receiving server hands it on: the sender's headers claiming the
    server's authserv-id removed, and its own, saying `checked`, on top."""
    message = copy.deepcopy(message)  # the sender's mail stays as they wrote it
    kept = [str(v) for v in message.get_all(AUTH_RESULTS) or [] if not _claims(v, receiver)]
    del message[AUTH_RESULTS]  # every one; those of other servers put back
    for value in kept:
        message[AUTH_RESULTS] = value
    raw = message.as_bytes(policy=message.policy.clone(linesep="\r\n"))  # SMTP's lines
    if checked is None:
        return raw
    return f"{AUTH_RESULTS}: {receiver};\r\n\t{checked}\r\n".encode() + raw


def _claims(value: object, receiver: str) -> bool:
    """Whether an Authentication-Results value names `receiver` as its authserv-id."""
    head = re.sub(r"\([^()]*\)", " ", str(value)).split(";", 1)[0].split()
    return bool(head) and head[0].strip('"').lower() == receiver.lower()


def send(port: int, message: EmailMessage, to: str, *, checked: str | None = None,
         mail_from: str | None = None, receiver: str = RECEIVER) -> tuple[int, bytes]:
    """Hand `message` to the SMTP listener on `port` as the receiving server `receiver` would,
    with what it `checked` of it (`received`); the listener's answer to the data."""
    raw = received(message, checked, receiver)
    with smtplib.SMTP("127.0.0.1", port, timeout=15) as client:
        client.ehlo()
        sender = message["From"].addresses[0].addr_spec if message["From"] else ""
        code, said = client.mail(sender if mail_from is None else mail_from)
        code, said = client.rcpt(to)
        if code >= 400:
            return code, said
        return client.data(raw)
