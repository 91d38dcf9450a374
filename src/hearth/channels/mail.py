"""The email channel: mail in by SMTP, answers out through the owner's SMTP relay.

In: the gateway listens for SMTP (aiosmtpd's protocol, served on the gateway's own event loop
at `listen_host:listen_port`); the owner's mail server hands it the bot's mail. Only mail to
`address` is taken (any other recipient: 550). A mail is read (`mail_reading`), admitted in
its conversation's chat, and only then answered `250`: a mail server whose delivery broke
before that sends it again, and its Message-ID, the inbound id the engine records with the
admission, has it answered once. A mail that cannot be read is refused (550, saying why), and
so is one with more files than one message may send (552: the sender's server hands it back
whole, with the sentence, instead of Hearth answering a mail it read only part of); one the
gateway cannot take now (it is stopping) is deferred (451), so the sender's server tries
again. Automatic mail (RFC 3834 §2: `Auto-Submitted`, `Precedence: bulk|list|junk`, a mailing
list's headers, the null sender `MAIL FROM:<>`) is taken (250) and never admitted: nothing
asked the agent anything, and answering it is how mail loops start.

A sender in `owner_addresses` is the owner only when the receiving mail server the owner names
(`authserv_id`) vouched for the From address in its own `Authentication-Results`
(`mail_auth`); anyone else, and any mail no such header proves, is a guest, fenced, whose
calls ask the owner. A conversation's root is that of the thread of the nearest mail the
gateway sent that the mail refers to (`Desk.sent_as`: the ledger keeps each sent mail's
Message-ID), else the one the mail's References start with, so a long thread whose References
a mail program trimmed stays one chat.

Out: each message the ledger owes a thread is one mail to the conversation's sender, from
`address`, "Re: " its subject, with `In-Reply-To` and `References` (the root, then the newest)
so mail programs keep the conversation together, a `Date:` and a Message-ID, the message's
id. The subject and References are those of the latest mail the chat took in from the
conversation, kept with its message (`Inbound.kept`) and read back at each send
(`Desk.answering`): the adapter holds nothing, so a restart changes no subject and breaks no
thread. smtplib is blocking: each send runs in a worker thread. A 4xx or a refused connection
is sent again later; a 5xx is final; a connection that broke after the mail was handed over
is unsure.

The owner's own thread (`owner_thread`: "Continue on Email", a guest's approvals) is a new
conversation with the first of `owner_addresses`, its root a Message-ID made here (marked
`OPENED_ID`) that every mail in it refers to; its subject is its chat's title, and the
owner's replies continue it.
"""

from __future__ import annotations

import asyncio
import logging
import smtplib
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formataddr, formatdate, make_msgid
from typing import Any

from hearth import masking
from hearth.channels.base import (
    Answering,
    Desk,
    Health,
    NotSent,
    Outbound,
    Refused,
    SendError,
    Unsure,
)
from hearth.channels.mail_reading import Mail, parse, thread_of
from hearth.config import EmailConfig
from hearth.engine.intake.admission import MAX_FILES
from hearth.engine.intake.channel_inbound import Inbound
from hearth.errors import Refusal

log = logging.getLogger(__name__)

NAME = "email"
SEND_SECONDS = 30.0
OPENED_ID = "hearth-opened"  # in the root Message-ID of a conversation the gateway opened
OPENED_SUBJECT = "Your Hearth chat"  # an opened conversation's, when its chat has no title
REFERENCES_MAX = 20  # ids in a sent mail's References


@dataclass(frozen=True)
class Conversation:
    """What a reply in a thread needs: the subject and the References so far."""

    subject: str
    references: tuple[str, ...]


class EmailChannel:
    name = NAME
    resend_is_safe = False  # a relay that took a mail cannot be asked whether it went on
    opens_conversations = True  # "Continue on Email" starts a conversation of its own
    owner_setting = "owner_addresses"

    def __init__(self, config: EmailConfig) -> None:
        self.config = config
        self.max_chars = config.max_chars
        self.measure: Callable[[str], int] = len
        self.health = Health()
        self._password = config.resolved_password()
        masking.know(self._password)
        self._desk: Desk | None = None
        self._server: asyncio.Server | None = None
        self.port = config.listen_port

    async def start(self, desk: Desk) -> None:
        from aiosmtpd.smtp import SMTP

        self._desk = desk
        loop = asyncio.get_running_loop()
        limit = int(self.config.max_message_mb * 1024 * 1024)
        try:
            self._server = await loop.create_server(
                lambda: SMTP(_Handler(self), data_size_limit=limit, hostname="hearth"),
                self.config.listen_host, self.config.listen_port)
        except OSError as error:
            self.health = Health("error", f"Cannot listen for mail on {self.config.listen_host}:"
                                 f"{self.config.listen_port} ({error.strerror}).")
            return
        self.port = self._server.sockets[0].getsockname()[1]
        self.health = Health("running", f"Taking mail for {self.config.address} on "
                             f"{self.config.listen_host}:{self.port}; answers go out through "
                             f"{self.config.smtp_host}:{self.config.smtp_port}.{_trusting(self.config)}")

    async def stop(self) -> None:
        self._desk = None
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def typing(self, thread: str) -> None:
        return None  # mail has no "typing"

    def owner_thread(self) -> str | None:
        """A new conversation with the owner's (first) address: its root a Message-ID made
        here, which every mail in it refers to, so the owner's replies continue it."""
        if not self.config.owner_addresses:
            return None
        root = make_msgid(OPENED_ID, domain=self.config.address.rpartition("@")[2])
        return thread_of(self.config.owner_addresses[0].strip().lower(), root)

    # -- taking in -----------------------------------------------------------------------

    def accepts(self, address: str) -> bool:
        return address.strip().lower() == self.config.address.lower()

    async def take(self, raw: bytes, mail_from: str | None = None) -> str:
        """The SMTP answer to one mail's data (`mail_from`: its envelope sender, "" for the
        null sender `MAIL FROM:<>`): admitted (or admitted before), or why not."""
        desk = self._desk
        if desk is None:
            return "451 4.3.2 Not taking mail now; try again later"
        try:
            mail = await asyncio.to_thread(parse, raw, self.config.authserv_id)
        except ValueError as error:
            return f"550 5.6.0 This mail cannot be read ({error})"
        unanswered = _unanswered(mail, mail_from)
        if unanswered is not None:
            return unanswered
        try:
            received = await desk.receive(self._inbound(mail, await _root(desk, mail)))
        except Refusal as refusal:
            if refusal.code == "shutting_down":
                return "451 4.3.2 The gateway is stopping; try again later"
            log.warning("email: a mail was not admitted: %s", refusal.sentence)
            return f"550 5.7.1 {refusal.sentence[:200]}"
        if received is not None and received.admitted is None:
            return "250 2.0.0 Taken before"
        return "250 2.0.0 Taken"

    def _inbound(self, mail: Mail, root: str) -> Inbound:
        listed = mail.sender in {a.lower() for a in self.config.owner_addresses}
        owner = listed and mail.authenticated
        if listed and not owner:
            log.warning("email: a mail from an owner's address came without a DKIM or SPF "
                        "pass for its domain from %s; it is taken as a guest's",
                        self.config.authserv_id or "a receiving server (none is named)")
        references = mail.references if root in mail.references else (root, *mail.references)
        return Inbound(channel=NAME, thread=thread_of(mail.sender, root),
                       inbound_id=mail.message_id, sender=mail.sender,
                       sender_name=mail.sender_name, text=mail.text, owner=owner,
                       owner_dm=False, files=mail.files,
                       kept={"subject": mail.subject, "references": list(references)})

    # -- sending -------------------------------------------------------------------------

    async def send(self, out: Outbound) -> str | None:
        recipient, _, root = out.thread.partition(" ")
        if "@" not in recipient:
            raise Refused("this thread names no address to write to")
        desk = self._desk
        where = await desk.answering(NAME, out) if desk is not None else Answering(None, {})
        mail = self._mail(recipient, _conversation(root, where), out)
        await asyncio.to_thread(self._deliver, mail)
        return str(mail["Message-ID"])

    def _mail(self, recipient: str, known: Conversation, out: Outbound) -> EmailMessage:
        mail = EmailMessage()
        domain = self.config.address.rpartition("@")[2]
        mail["From"] = formataddr(("Hearth", self.config.address))
        mail["To"] = recipient
        mail["Subject"] = _subject(known)
        mail["Message-ID"] = make_msgid("hearth", domain=domain)
        mail["Date"] = formatdate(localtime=True)
        if known.references:
            mail["In-Reply-To"] = known.references[-1]
            mail["References"] = " ".join(_trimmed(known.references))
        mail["Auto-Submitted"] = "auto-replied"
        mail.set_content(out.text)
        return mail

    def _deliver(self, mail: EmailMessage) -> None:
        """Hand the mail to the relay (in a worker thread); a failure as what it means."""
        try:
            with smtplib.SMTP(self.config.smtp_host, self.config.smtp_port,
                              timeout=SEND_SECONDS) as relay:
                if self.config.smtp_starttls:
                    relay.starttls(context=ssl.create_default_context())
                if self.config.smtp_user:
                    relay.login(self.config.smtp_user, self._password or "")
                relay.send_message(mail)
        except smtplib.SMTPResponseException as error:
            raise _answered(error.smtp_code, error.smtp_error) from None
        except smtplib.SMTPRecipientsRefused as error:
            [(code, said)] = list(error.recipients.values())[:1] or [(550, b"refused")]
            raise _answered(code, said) from None
        except (ConnectionError, smtplib.SMTPConnectError, TimeoutError, OSError) as error:
            raise _unreached(error) from None


def _trusting(config: EmailConfig) -> str:
    """What the status says of who proves the owner's mail."""
    if config.authserv_id is None:
        return (" No receiving mail server is named, so every mail is a guest's, yours too: "
                "set authserv_id in [channels.email] to your server's Authentication-Results "
                "id.")
    return f" Your mail is yours when {config.authserv_id} vouches for it."


async def _root(desk: Desk, mail: Mail) -> str:
    """The conversation's root: that of the thread of the nearest mail the gateway sent that
    this one refers to (the ledger knows each by its Message-ID), so a long thread whose
    References a mail program trimmed stays one chat; else the root as the mail says it."""
    for parent in mail.parents:
        sent = await desk.sent_as(NAME, parent)
        if sent is not None and " " in sent.thread:
            return sent.thread.partition(" ")[2]
    return mail.root


def _unanswered(mail: Mail, mail_from: str | None) -> str | None:
    """The SMTP answer to a mail that is taken but never admitted: a machine's (RFC 3834 §2:
    answering it is what starts mail loops) or an empty one; None for any other."""
    null = mail_from is not None and not mail_from.strip("<> ")  # aiosmtpd says "<>"
    why = "the null sender MAIL FROM:<>" if null else mail.automatic
    if why is not None:
        log.info("email: an automatic mail (%s) was taken and not answered", why)
        return f"250 2.0.0 Taken (automatic mail, {why[:60]}: not answered)"
    if not mail.text and not mail.files:
        return "250 2.0.0 Taken (an empty mail: nothing to answer)"
    if len(mail.files) > MAX_FILES:
        return (f"552 5.3.4 This mail carries {len(mail.files)} files; Hearth takes at most "
                f"{MAX_FILES} in one mail: send the rest in another mail")
    return None


def _trimmed(references: tuple[str, ...]) -> tuple[str, ...]:
    """At most 20 References: the root, then the newest (RFC 5322 §3.6.4 keeps the first)."""
    return references if len(references) <= REFERENCES_MAX else (
        references[0], *references[-(REFERENCES_MAX - 1):])


def _conversation(root: str, where: Answering) -> Conversation:
    """The subject and References of the thread's next mail: as the latest mail taken in from
    it had them (kept with its message, so a restart forgets nothing); before any, every mail
    refers to the root, and one the gateway opened is named by its chat's title."""
    kept = where.kept
    references = tuple(r for r in kept.get("references") or () if isinstance(r, str))
    subject = str(kept.get("subject") or "")
    if not subject and f".{OPENED_ID}@" in root:
        subject = where.title or OPENED_SUBJECT
    return Conversation(subject, references or ((root,) if root else ()))


def _subject(known: Conversation) -> str:
    """"Re: " the conversation's subject; as it is in one the gateway opened."""
    subject = known.subject or "your message"
    opened = bool(known.references) and f".{OPENED_ID}@" in known.references[0]
    return subject if opened or subject.lower().startswith("re:") else f"Re: {subject}"


def _answered(code: int, said: bytes | str) -> SendError:
    text = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
    why = f"the mail server answered {code} {masking.mask(text)[:200]}"
    return Refused(why) if code >= 500 else NotSent(why)


def _unreached(error: BaseException) -> SendError:
    why = masking.mask(str(error) or type(error).__name__)[:200]
    if isinstance(error, ConnectionRefusedError | smtplib.SMTPConnectError):
        return NotSent(f"the mail server cannot be reached ({why})")
    if isinstance(error, smtplib.SMTPServerDisconnected):
        return Unsure(f"the mail server went away during the send ({why})")
    return NotSent(f"the mail server cannot be reached ({why})")


class _Handler:
    """aiosmtpd's handler: the recipients this gateway takes, and each mail's data."""

    def __init__(self, channel: EmailChannel) -> None:
        self.channel = channel

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any,  # noqa: N802
                          address: str, rcpt_options: list[str]) -> str:
        if not self.channel.accepts(address):
            return "550 5.1.1 No such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        content = envelope.original_content or envelope.content
        raw = content if isinstance(content, bytes) else str(content).encode()
        return await self.channel.take(raw, envelope.mail_from)
