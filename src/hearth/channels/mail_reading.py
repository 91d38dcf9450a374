"""Reading one email for the email channel: who sent it, which conversation it belongs to, its
words (the plain part, else the HTML read as text; the quoted history of a reply left out) and
its files. Pure functions over the message's bytes: no network, no store.

A conversation is one thread: its key is the sender's address and the conversation's first
Message-ID, so every reply in it continues one chat and a new mail starts another. The mail
says which ids it refers to (`parents`, nearest first); the channel finds the root among them
in the store (any mail the gateway sent in the conversation), and as the mail says it (`root`:
the first of `References`, else `In-Reply-To`, else the message's own) otherwise.

Mail a machine sent (`automatic`, RFC 3834 §2: `Auto-Submitted` other than `no`, `Precedence:
bulk|list|junk`, a mailing list's `List-Id` or `List-Unsubscribe`) is said to be so: the
channel never answers it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import getaddresses

from hearth.channels import mail_auth
from hearth.tools.web_text import html_to_text

MESSAGE_ID = re.compile(r"<[^<>\s]{1,250}>")
QUOTE_INTRO = re.compile(r"^(On .{1,300} wrote:|-{2,} ?Original Message ?-{2,})\s*$", re.I)
THREAD_MAX = 200
PARENTS_MAX = 30  # the ids a mail refers to that are looked up (a References may hold hundreds)
LIST_HEADERS = ("List-Id", "List-Unsubscribe")


@dataclass(frozen=True)
class Mail:
    """One email as the channel reads it."""

    message_id: str
    sender: str  # the From address, lower-cased
    sender_name: str
    subject: str
    root: str  # the conversation's first Message-ID, as the mail says it
    references: tuple[str, ...]  # its References, then its own Message-ID (for a reply's)
    text: str
    files: tuple[tuple[str, bytes], ...]
    authenticated: bool  # the receiving server the owner names proved the From address
    replying_to: tuple[str, ...] = ()  # its In-Reply-To
    automatic: str | None = None  # why a machine sent it (the header that says so)

    @property
    def parents(self) -> tuple[str, ...]:
        """The ids it refers to, nearest first: In-Reply-To, then References from the end."""
        seen = dict.fromkeys((*self.replying_to, *reversed(self.references[:-1])))
        return tuple(seen)[:PARENTS_MAX]


def thread_of(sender: str, root: str) -> str:
    return f"{sender} {root}"[:THREAD_MAX]


def parse(raw: bytes, authserv_id: str | None = None) -> Mail:
    """The email in `raw` (ValueError: no From address or no Message-ID to know it by); its
    From address proven by the Authentication-Results of the server `authserv_id` only."""
    message = BytesParser(policy=policy.default).parsebytes(raw)
    [(name, sender)] = getaddresses([str(message.get("From", ""))])[:1] or [("", "")]
    if "@" not in sender:
        raise ValueError("the mail has no From address")
    own = _ids(message.get("Message-ID"))
    if not own:
        raise ValueError("the mail has no Message-ID")
    replying_to = _ids(message.get("In-Reply-To"))
    references = _ids(message.get("References")) or replying_to
    text, files = _body(message)
    return Mail(message_id=own[0], sender=sender.lower(), sender_name=name or sender,
                subject=str(message.get("Subject", "")).strip()[:300],
                root=(references or own)[0], references=(*references, own[0]),
                text=without_quotes(text), files=files,
                authenticated=_authenticated(message, authserv_id, sender),
                replying_to=tuple(replying_to), automatic=automatic(message))


def automatic(message: Message) -> str | None:
    """The header saying a machine sent the mail (RFC 3834 §2), as "Name: value"; None when
    a person did (or nothing says otherwise)."""
    submitted = str(message.get("Auto-Submitted", "")).strip()
    keyword = re.split(r"[\s;(]", submitted, maxsplit=1)[0].lower()
    if keyword and keyword != "no":
        return f"Auto-Submitted: {keyword[:40]}"
    precedence = str(message.get("Precedence", "")).strip().lower()
    if precedence in ("bulk", "list", "junk"):
        return f"Precedence: {precedence}"
    for name in LIST_HEADERS:
        if message.get(name) is not None:
            return f"{name} (a mailing list's)"
    return None


def _ids(header: object) -> list[str]:
    return MESSAGE_ID.findall(str(header or ""))


def _authenticated(message: Message, authserv_id: str | None, sender: str) -> bool:
    """The named receiving server vouched for the From address (`mail_auth`): a mail with
    more than one From header or address is proven by nothing (which one was checked?)."""
    if len(message.get_all("From") or []) != 1 or len(getaddresses(
            [str(message["From"])])) != 1:
        return False
    said = [str(v) for v in message.get_all("Authentication-Results") or []]
    return mail_auth.proving(said, authserv_id, sender) is not None


def _body(message: Message) -> tuple[str, tuple[tuple[str, bytes], ...]]:
    """The plain text part (else the HTML one, read as text) and the attached files."""
    plain = html = None
    files: list[tuple[str, bytes]] = []
    for part in message.walk():
        if part.is_multipart():
            continue
        name = part.get_filename()
        payload = part.get_payload(decode=True)
        if name and isinstance(payload, bytes):
            files.append((name[:255], payload))
        elif part.get_content_type() == "text/plain" and plain is None:
            plain = _text(part)
        elif part.get_content_type() == "text/html" and html is None:
            html = _text(part)
    if plain is not None and plain.strip():
        return plain, tuple(files)
    return (html_to_text(html) if html else ""), tuple(files)


def _text(part: Message) -> str:
    if isinstance(part, EmailMessage):
        content = part.get_content()
        return content if isinstance(content, str) else ""
    payload = part.get_payload(decode=True)
    return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""


def without_quotes(text: str) -> str:
    """A reply's own words: the quoted history under "On … wrote:" and `>` lines left out."""
    kept: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if QUOTE_INTRO.match(line.strip()):
            break
        if not line.lstrip().startswith(">"):
            kept.append(line.rstrip())
    return "\n".join(kept).strip()
