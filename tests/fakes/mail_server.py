"""A real SMTP relay for the email channel's tests: aiosmtpd's own server (its Controller, on
127.0.0.1 in a thread of its own) keeping every mail it is handed, parsed, in `received`;
`fail(code, times)` answers the next mails' DATA with an SMTP error instead (451: try later,
550: refused). `send(port, …)` hands a mail to a gateway's SMTP listener as a mail server
would (smtplib), answering the server's reply."""

from __future__ import annotations

import smtplib
import socket
import threading
import time
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any, Self

from aiosmtpd.controller import Controller


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
         in_reply_to: str | None = None, authenticated: bool = True,
         html: str | None = None) -> EmailMessage:
    made = EmailMessage()
    made["From"], made["To"], made["Subject"] = sender, to, subject
    made["Message-ID"] = message_id
    if in_reply_to:
        made["In-Reply-To"] = made["References"] = in_reply_to
    if authenticated:
        made["Authentication-Results"] = "mx.example.org; dkim=pass header.d=example.org"
    made.set_content(text)
    if html is not None:
        made.add_alternative(html, subtype="html")
    return made


def send(port: int, message: EmailMessage, to: str) -> tuple[int, bytes]:
    """Hand `message` to the SMTP listener on `port`; its answer to the data."""
    with smtplib.SMTP("127.0.0.1", port, timeout=15) as client:
        client.ehlo()
        code, said = client.mail(str(message["From"]))
        code, said = client.rcpt(to)
        if code >= 400:
            return code, said
        return client.data(message.as_bytes())
