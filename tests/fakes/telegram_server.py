"""A scripted, real-HTTP fake of the Telegram Bot API for the test-suite.

``FakeTelegram`` is a genuine HTTP server (stdlib ``ThreadingHTTPServer`` in a daemon thread,
bound to ``127.0.0.1`` on a free port) that speaks the Bot API wire protocol, so the unmodified
``telegram.Bot`` of python-telegram-bot (PTB) works against it over loopback. Nothing is
monkeypatched. A test passes :attr:`FakeTelegram.base_url` (``http://127.0.0.1:<port>/bot``) as
the bot's ``base_url``; PTB appends the token and ``/<method>``.

Example::

    with FakeTelegram() as tg:
        update_id = tg.push_message(chat_id=42, from_id=42, text="/start")
        ...  # the channel, built with base_url=tg.base_url and token=tg.token, polls and answers
        [reply] = tg.wait_sent(1, chat_id=42)
        assert reply.plain == "Hello" and tg.confirmed_below > update_id

Wire protocol
-------------
``/bot<token>/<method>``, by GET (query string) or POST: ``application/x-www-form-urlencoded``
(what PTB sends: strings as they are, every other value JSON-encoded, so ``chat_id=42``,
``reply_markup={"inline_keyboard": ...}``), ``application/json`` or ``multipart/form-data``
(what PTB sends when uploading a file; a file part is kept as ``bytes``). Method names are
case-insensitive, as Telegram's are. Parameters are decoded by name: ids, offsets and limits to
``int``, flags to ``bool``, ``reply_markup``/``reply_parameters``/``link_preview_options``/
``allowed_updates``/``entities``/``commands``/``scope`` from JSON (bad JSON: 400).

Every answer is ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code": N,
"description": "...", "parameters": {...}}`` with the HTTP status ``N``, and closes its
connection (``Connection: close``). PTB maps the statuses to its errors: 400 ``BadRequest``,
401/404 ``InvalidToken``, 403 ``Forbidden``, 409 ``Conflict``, 429 with ``retry_after``
``RetryAfter``, 5xx ``NetworkError`` (``BadRequest`` is a subclass of ``NetworkError``: test a
dropped connection with ``not isinstance(exc, BadRequest)``). PTB strips ``Bad Request: `` off
the description and capitalises the rest, so match its messages case-insensitively
(``pytest.raises(BadRequest, match="(?i)message is too long")``).

A ``telegram.Bot`` builds two httpx clients, each with its own SSL context (~50 ms apiece);
a test that makes many bots can pass ``request=HTTPXRequest(httpx_kwargs={"verify": ctx})``
(and the same ``get_updates_request``) with one shared ``ssl.create_default_context()``, as
``tests/fakes/test_telegram_server.py`` does. Nothing changes on the wire.

Methods
-------
``getFile(file_id)``
    A file a pushed update holds (:meth:`FakeTelegram.push_file`): its ``file_path``, whose
    bytes ``GET /file/bot<token>/<file_path>`` answers (PTB's ``base_file_url``:
    :attr:`FakeTelegram.file_url`).
``getMe``
    The bot user (``id`` = the number before the token's colon unless ``bot_id`` is given,
    ``username`` = ``bot_username``).
``deleteWebhook`` / ``getWebhookInfo``
    ``true`` (``drop_pending_updates=true`` drops the stored updates) / an empty webhook.
``getUpdates(offset, limit, timeout, allowed_updates)``
    Telegram's semantics. Updates stay stored until confirmed; a call with ``offset`` confirms
    (drops for good) every update with ``update_id < offset`` (a negative offset keeps only the
    last ``-offset``), then answers the stored ones (at most ``limit``, 1..100, default 100).
    With none, it long-polls up to ``timeout`` seconds (default 0) and answers as soon as one is
    pushed. update_ids rise from ``first_update_id`` (10000). ``allowed_updates``, once given,
    holds for later calls (an empty list: the default, every kind but ``chat_member``,
    ``message_reaction`` and ``message_reaction_count``); as on Telegram it filters updates
    when they are *created*: a pushed update of a kind not allowed is not stored (see
    :meth:`FakeTelegram.filtered_updates`). A second getUpdates while one is waiting ends the
    waiting one with 409 ``Conflict: terminated by other getUpdates request; ...``.
``sendMessage(chat_id, text, parse_mode?, entities?, reply_markup?, reply_parameters? |
reply_to_message_id?, message_thread_id?, link_preview_options?, ...)``
    Checks the text as Telegram does, then answers the Message (``from`` the bot, ``text`` the
    *parsed* text, ``entities`` built from the markup, ``reply_markup`` echoed when inline,
    ``reply_to_message`` when replying) with a fresh ``message_id``: one counter per chat,
    shared with the messages pushed into that chat (as in a real chat, ids rise in both
    directions). Refusals (all 400 unless said): ``chat_id is empty``; ``chat not found`` (a
    non-numeric chat_id); 403 ``Forbidden: bot was blocked by the user`` (see
    :meth:`FakeTelegram.block_chat`); ``message text is empty`` (none, or only whitespace after
    parsing); ``message is too long`` (over 4096 *characters*, i.e. Unicode code points, of the
    parsed text: tags and escapes do not count; entity offsets are UTF-16 code units, as
    Telegram's); ``unsupported parse_mode``; ``can't parse entities: ...`` (below);
    ``message to be replied not found`` (a reply to a message id this chat never had, unless
    ``allow_sending_without_reply``); ``BUTTON_DATA_INVALID`` (a ``callback_data`` outside 1..64
    bytes); ``can't parse inline keyboard button: ...`` (a button without exactly one action).
``sendChatAction(chat_id, action)``
    ``true``; ``action`` must be one of Telegram's (``typing``, ``upload_photo``, ...).
``answerCallbackQuery(callback_query_id, text?, show_alert?, url?, cache_time?)``
    ``true`` for a query this fake pushed and not yet answered; else 400 ``query is too old and
    response timeout expired or query ID is invalid``.
``editMessageText(chat_id, message_id, text, parse_mode?, reply_markup?, ...)`` /
``editMessageReplyMarkup(chat_id, message_id, reply_markup?)``
    The edited Message (with ``edit_date``); the stored :class:`Sent` is updated and the edit
    recorded (:meth:`FakeTelegram.edits`). Text is checked as for sendMessage. 400 ``message to
    edit not found`` (unknown or deleted), ``message can't be edited`` (a user's message),
    ``message is not modified: ...`` (same text, entities and markup as now: a real trap for
    streaming edits), ``inline_message_id`` is not supported (400).
``deleteMessage(chat_id, message_id)``
    ``true``, marks the :class:`Sent` ``deleted``; 400 ``message to delete not found``.
``setMyCommands`` / ``getMyCommands`` / ``deleteMyCommands``
    Stored per (scope, language_code); a command must match ``[a-z0-9_]{1,32}`` (400
    ``BOT_COMMAND_INVALID``) with a 1..256-character description.
anything else
    404 ``Not Found``. A wrong token: 401 ``Unauthorized``, for every method.

Parsing (``parse_mode``, case-insensitive)
    ``HTML``: tags ``b strong i em u ins s strike del code pre a tg-spoiler span blockquote
    tg-emoji`` (case-insensitive, attributes allowed; ``span`` needs ``class="tg-spoiler"``),
    properly nested and closed; entities ``&lt; &gt; &amp; &quot; &#NN; &#xHH;``. An unknown tag
    (``<br>``, ``<p>``), an unescaped ``<``, a bare ``&`` or unknown entity (``&nbsp;``) fail.
    *Stricter than Telegram* for ``&``: tdlib keeps an unrecognised ``&`` as a literal; the fake
    refuses it so a converter that forgets to escape fails loudly. A bare ``>`` is accepted.
    ``MarkdownV2``: modelled on tdlib's parser. A backslash escapes any ASCII character;
    outside code, each of the reserved characters ``_*[]()~`>#+-=|{}.!`` must be escaped
    unless it opens or closes an entity: ``*bold*``, ``_italic_``, ``__underline__``,
    ``~strike~``, ``||spoiler||``, ``[text](url)`` (a ``)`` or backslash inside the url
    escaped), ``![emoji](tg://emoji?id=N)``, code in one backquote, pre in three (an optional
    language on the opening line; inside code and pre only the backquote and the backslash are
    special), and ``>`` opening a line (a blockquote). Only the innermost open entity can be
    closed, so crossed markup fails; an entity left open fails (``Can't find end of Bold entity
    at byte offset N``). Not modelled: ``**>`` expandable blockquotes and tdlib's
    special-casing of ``___`` runs. ``Markdown`` (legacy): ``*bold*``, ``_italic_``, code in one
    backquote, pre in three, ``[text](url)``; one left open fails with ``Can't find end of the
    entity starting at byte offset N``. Without ``parse_mode`` the text is taken as it is (with
    any ``entities`` given).

Test controls (thread-safe; call them from the test thread)
-----------------------------------------------------------
``push_message(chat_id, from_id, text, *, chat_type="private", first_name="Ann",
username=None, chat_title=None, reply_to=None, message_id=None, message_thread_id=None)``
    Stores a ``message`` update and returns its update_id. Entities are filled as Telegram
    does: ``bot_command`` for each ``/word`` (``/cmd@botname`` too) at the start or after
    whitespace, ``mention`` for each ``@username`` (5..32 word characters). A group or
    supergroup chat carries a ``title``. ``reply_to`` is the id of a message of that chat (one
    the bot sent, or one pushed): the update carries it as ``reply_to_message`` (its ``from``
    the bot, for the bot's). :meth:`FakeTelegram.update` gives back the update dict (for its
    ``message_id``).
``push_callback(chat_id, from_id, message_id, data, *, first_name="Ann")``
    A ``callback_query`` update whose ``message`` is the bot's message ``message_id`` as it is
    now; the query id is then answerable once.
``push_raw(update)``
    Any other update (``edited_message``, a photo with a caption, ...); ``update_id`` is filled
    in when missing. Messages inside are remembered, so replies and edits can refer to them.
Reading: ``sent(chat_id=None)`` (:class:`Sent`, in order; ``.text`` as sent, ``.plain`` as
    shown, ``.entities``, ``.reply_markup`` as a dict, ``.reply_to``, ``.deleted``, ``.edits``),
    ``message(chat_id, message_id)``, ``wait_sent(count, chat_id=None, timeout=10.0)``,
    ``edits(chat_id=None)``, ``actions(chat_id=None)``, ``callback_answers``,
    ``pending_updates()`` (stored, unconfirmed), ``filtered_updates()``, ``update(update_id)``,
    ``calls(method=None)`` (every request, in arrival order, recorded on arrival: method,
    params, time, ``token_ok``, ``status`` once answered, ``None`` if dropped),
    ``wait_calls(method, count=1, timeout=10.0)``, ``offsets()`` (the ``offset`` of every
    getUpdates call, ``None`` when absent), ``confirmed_below`` (the highest offset a getUpdates
    call confirmed: every update below it is gone), ``wait_confirmed(update_id, timeout)``,
    ``commands``. Times are ``time.monotonic()``. ``wait_*`` raise ``AssertionError`` saying
    what was there on timeout.
``reset()`` forgets everything scripted and recorded (not the port).

Faults
------
``fail(method, status, description=None, times=1, retry_after=None, parameters=None)``
    The next ``times`` calls of ``method`` answer that error (429 gets ``retry_after``, 1 by
    default, so PTB raises ``RetryAfter``). A failed getUpdates confirms nothing.
``hold(method)``
    Returns a :class:`Hold`; calls of ``method`` arriving while it is held are recorded, then
    block (up to 60 s) until ``hold.release()`` (or ``.set()``), and are answered only then
    (a held sendMessage has not "sent" anything yet). ``hold.wait_arrived(n)`` waits for them.
``delay(method, seconds)``
    Every call of ``method`` waits ``seconds`` before it is handled (0 removes the delay).
``set_down(True)``
    Every request, and every one waiting (a long poll, a held or delayed call), has its
    connection closed without an answer, like a server gone away (PTB: ``NetworkError``).
    ``set_down(False)`` brings it back.
``stop()`` / ``start()``
    ``stop()`` closes the port (connection refused; waiting requests are dropped);
    ``start()`` again serves on the *same* port with the state kept, a server coming back.
``block_chat(chat_id)`` / ``unblock_chat(chat_id)``
    Sending to, acting in or editing in that chat answers 403 ``Forbidden: bot was blocked by
    the user``.
Faults are taken when a call arrives (so their order is arrival order), before any delay or
hold, and applied after them.
"""

from __future__ import annotations

import email.parser
import email.policy
import html
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.fakes.loopback import Loopback

__all__ = [
    "Action", "Call", "CallbackAnswer", "DEFAULT_TOKEN", "Edit", "FakeTelegram", "Hold", "Sent",
]

DEFAULT_TOKEN = "123456:TEST-token-abcdefghijklmnopqrstu"
MAX_MESSAGE_LENGTH = 4096
HOLD_TIMEOUT = 60.0
CONFLICT = ("Conflict: terminated by other getUpdates request; "
            "make sure that only one bot instance is running")
NOT_MODIFIED = ("Bad Request: message is not modified: specified new message content and reply "
                "markup are exactly the same as a current content and reply markup of the message")
QUERY_INVALID = ("Bad Request: query is too old and response timeout expired or query ID is "
                 "invalid")
BLOCKED = "Forbidden: bot was blocked by the user"
NOT_BY_DEFAULT = frozenset({"chat_member", "message_reaction", "message_reaction_count"})
CHAT_ACTIONS = frozenset({
    "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
    "upload_document", "choose_sticker", "find_location", "record_video_note",
    "upload_video_note",
})
_DEFAULT_DESCRIPTIONS = {
    400: "Bad Request: scripted failure", 401: "Unauthorized", 403: BLOCKED, 404: "Not Found",
    409: CONFLICT, 429: "Too Many Requests: retry after {retry_after}",
    500: "Internal Server Error", 502: "Bad Gateway",
}
_INT_PARAMS = frozenset({
    "chat_id", "message_id", "offset", "limit", "timeout", "from_chat_id", "message_thread_id",
    "reply_to_message_id", "cache_time", "user_id", "max_connections",
})
_BOOL_PARAMS = frozenset({
    "show_alert", "disable_notification", "protect_content", "drop_pending_updates",
    "allow_sending_without_reply", "disable_web_page_preview", "allow_paid_broadcast",
})
_JSON_PARAMS = frozenset({
    "reply_markup", "reply_parameters", "link_preview_options", "allowed_updates", "entities",
    "caption_entities", "commands", "scope", "media",
})


class ApiError(Exception):
    """A Bot API refusal: the HTTP status, Telegram's description and optional parameters."""

    def __init__(self, status: int, description: str,
                 parameters: dict[str, Any] | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


class _Aborted(Exception):
    """The request is dropped without an answer (the fake stopped or went down meanwhile)."""


def _bad(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


# ---------------------------------------------------------------------------- records


@dataclass
class Call:
    """One request as it arrived. ``status`` is set once answered (``None``: dropped)."""

    method: str
    params: dict[str, Any]
    time: float
    token_ok: bool
    status: int | None = None


@dataclass
class Sent:
    """A message the bot sent, as it is now (edits update it in place).

    ``text`` is the text as the bot sent it (markup included), ``plain`` the text a user sees
    and ``entities`` its formatting (UTF-16 offsets), ``reply_markup`` the markup as a dict.
    """

    chat_id: int
    message_id: int
    text: str
    parse_mode: str | None
    plain: str
    entities: list[dict[str, Any]]
    reply_markup: dict[str, Any] | None
    reply_to: int | None
    message_thread_id: int | None
    params: dict[str, Any]
    time: float
    edits: int = 0
    deleted: bool = False


@dataclass
class Edit:
    """One accepted editMessageText / editMessageReplyMarkup, as asked."""

    method: str
    chat_id: int
    message_id: int
    text: str | None
    parse_mode: str | None
    reply_markup: dict[str, Any] | None
    time: float


@dataclass
class Action:
    """One sendChatAction."""

    chat_id: int
    action: str
    time: float
    message_thread_id: int | None = None


@dataclass
class CallbackAnswer:
    """One accepted answerCallbackQuery."""

    callback_query_id: str
    text: str | None
    show_alert: bool
    url: str | None
    time: float


class Hold:
    """Holds the calls of one method until released (see :meth:`FakeTelegram.hold`)."""

    def __init__(self, method: str, cond: threading.Condition) -> None:
        self.method = method
        self._cond = cond
        self._released = False
        self.arrived = 0

    def release(self) -> None:
        with self._cond:
            self._released = True
            self._cond.notify_all()

    set = release

    def is_set(self) -> bool:
        return self._released

    def wait_arrived(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Wait until ``count`` calls are (or were) held."""
        with self._cond:
            return self._cond.wait_for(lambda: self.arrived >= count, timeout=timeout)


@dataclass
class _Fault:
    status: int
    description: str
    parameters: dict[str, Any] | None
    times: int


# ---------------------------------------------------------------------------- formatted text


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode())


class _ParseError(Exception):
    pass


class _Builder:
    """Accumulates a formatted text's plain text and its entities (UTF-16 offsets)."""

    def __init__(self) -> None:
        self.chars: list[str] = []
        self.pos = 0
        self.entities: list[dict[str, Any]] = []

    def add(self, text: str) -> None:
        self.chars.append(text)
        self.pos += _utf16_len(text)

    def entity(self, kind: str, start: int, **extra: Any) -> None:
        if self.pos > start:
            self.entities.append({"type": kind, "offset": start, "length": self.pos - start,
                                  **extra})

    def result(self) -> tuple[str, list[dict[str, Any]]]:
        self.entities.sort(key=lambda e: (e["offset"], -e["length"]))
        return "".join(self.chars), self.entities


@dataclass
class _Open:
    """An entity opened and not yet closed while parsing."""

    kind: str
    start: int
    byte: int
    extra: dict[str, Any] = field(default_factory=dict)


_HTML_TAGS = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline",
    "ins": "underline", "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough",
    "code": "code", "pre": "pre", "a": "text_link", "tg-spoiler": "spoiler", "span": "spoiler",
    "blockquote": "blockquote", "tg-emoji": "custom_emoji",
}
_HTML_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot)|#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6}));")
_HTML_START = re.compile(
    r"<([A-Za-z][A-Za-z0-9-]*)((?:\s+[A-Za-z][A-Za-z0-9-]*"
    r"(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'>]+))?)*)\s*>")
_HTML_NAME = re.compile(r"[^\s<>]*")  # always matches: the name an unsupported tag gives
_HTML_END = re.compile(r"</([A-Za-z][A-Za-z0-9-]*)\s*>")
_HTML_ATTR = re.compile(
    r"([A-Za-z][A-Za-z0-9-]*)(?:\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>]+)))?")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


def _html_char(match: re.Match[str]) -> str:
    name, dec, hexa = match.groups()
    if name:
        return _NAMED[name]
    code = int(dec) if dec else int(hexa, 16)
    if not 0 < code <= 0x10FFFF:
        raise _ParseError(f"Invalid HTML entity {match.group(0)}")
    return chr(code)


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The plain text and entities of an HTML-formatted text; :class:`_ParseError` if bad."""
    out, stack, i = _Builder(), list[_Open](), 0
    while i < len(text):
        c = text[i]
        if c == "&":
            match = _HTML_ENTITY.match(text, i)
            if match is None:
                raise _ParseError(f'Character "&" at byte offset {_byte_offset(text, i)} is not '
                                  'a part of a supported HTML entity; escape it as "&amp;"')
            out.add(_html_char(match))
            i = match.end()
        elif c == "<":
            i = _html_tag(text, i, out, stack)
        else:
            out.add(c)
            i += 1
    if stack:
        raise _ParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1].kind}"')
    return out.result()


def _html_tag(text: str, i: int, out: _Builder, stack: list[_Open]) -> int:
    """Parse the tag at ``text[i]`` (a ``<``); return the index after it."""
    offset = _byte_offset(text, i)
    if text.startswith("</", i):
        end = _HTML_END.match(text, i)
        if end is None:
            raise _ParseError(f"Unclosed end tag at byte offset {offset}")
        name = end.group(1).lower()
        if not stack:
            raise _ParseError(f"Unexpected end tag at byte offset {offset}")
        if stack[-1].kind != name:
            raise _ParseError(f'Unmatched end tag at byte offset {offset}, expected '
                              f'"</{stack[-1].kind}>", found "</{name}>"')
        _html_close(stack.pop(), out, stack)
        return end.end()
    start = _HTML_START.match(text, i)
    name = (start.group(1) if start else _HTML_NAME.match(text, i + 1).group(0)).lower()  # type: ignore[union-attr]
    if start is None or name not in _HTML_TAGS:
        raise _ParseError(f'Unsupported start tag "{name}" at byte offset {offset}')
    attrs = {m.group(1).lower(): html.unescape(next((g for g in m.groups()[1:] if g is not None),
                                                    ""))
             for m in _HTML_ATTR.finditer(start.group(2))}
    if name == "span" and attrs.get("class") != "tg-spoiler":
        raise _ParseError(f'Unsupported start tag "span" at byte offset {offset}')
    stack.append(_Open(name, out.pos, offset, attrs))
    return start.end()


def _html_close(tag: _Open, out: _Builder, stack: list[_Open]) -> None:
    kind, attrs = _HTML_TAGS[tag.kind], tag.extra
    if kind == "code" and stack and stack[-1].kind == "pre":
        language = attrs.get("class", "")
        if language.startswith("language-"):
            stack[-1].extra["language"] = language.removeprefix("language-")
        return
    if kind == "text_link":
        if attrs.get("href"):
            out.entity("text_link", tag.start, url=attrs["href"])
    elif kind == "pre":
        language = attrs.get("language")
        out.entity("pre", tag.start, **({"language": language} if language else {}))
    elif kind == "blockquote":
        out.entity("expandable_blockquote" if "expandable" in attrs else "blockquote", tag.start)
    elif kind == "custom_emoji":
        out.entity("custom_emoji", tag.start, custom_emoji_id=attrs.get("emoji-id", ""))
    else:
        out.entity(kind, tag.start)


_MD2_RESERVED = frozenset("_*[]()~`>#+-=|{}.!")
_MD2_NAMES = {
    "bold": "Bold", "italic": "Italic", "underline": "Underline", "strikethrough": "Strikethrough",
    "spoiler": "Spoiler", "text_link": "TextUrl", "custom_emoji": "CustomEmoji", "code": "Code",
    "pre": "Pre",
}
_MD2_CLOSERS = {"bold": "*", "italic": "_", "underline": "__", "strikethrough": "~",
                "spoiler": "||", "text_link": "]", "custom_emoji": "]"}


def _reserved(text: str, i: int) -> _ParseError:
    return _ParseError(f"Character '{text[i]}' is reserved and must be escaped with the "
                       "preceding '\\'")


def parse_markdown_v2(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The plain text and entities of a MarkdownV2 text (see the module docstring)."""
    out, stack, i, quote = _Builder(), list[_Open](), 0, None
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and 0 < ord(text[i + 1]) < 127:
            out.add(text[i + 1])
            i += 2
        elif stack and stack[-1].kind in ("code", "pre"):
            i = _md2_in_code(text, i, out, stack)
        elif c == ">" and (i == 0 or text[i - 1] == "\n"):
            quote = out.pos if quote is None else quote
            i += 1
        elif c not in _MD2_RESERVED:
            if c == "\n" and quote is not None and not text.startswith(">", i + 1):
                out.entity("blockquote", quote)
                quote = None
            out.add(c)
            i += 1
        elif stack and _md2_closes(stack[-1].kind, text, i):
            i = _md2_close(text, i, out, stack.pop())
        else:
            i = _md2_open(text, i, out, stack)
    if quote is not None:
        out.entity("blockquote", quote)
    if stack:
        raise _ParseError(f"Can't find end of {_MD2_NAMES[stack[-1].kind]} entity at byte "
                          f"offset {stack[-1].byte}")
    return out.result()


def _md2_closes(kind: str, text: str, i: int) -> bool:
    if kind == "italic":  # "_" closes italic unless "__" opens an underline inside it
        return text[i] == "_" and not text.startswith("__", i)
    return text.startswith(_MD2_CLOSERS[kind], i)


def _md2_open(text: str, i: int, out: _Builder, stack: list[_Open]) -> int:
    c, byte = text[i], _byte_offset(text, i)
    if text.startswith("```", i):
        header = re.match(r"([^\s`]*)\n", text[i + 3:])
        language = header.group(1) if header else ""
        stack.append(_Open("pre", out.pos, byte, {"language": language}))
        return i + 3 + (header.end() if header else 0)
    opener = {"_": "italic", "*": "bold", "~": "strikethrough", "[": "text_link", "`": "code"}
    if text.startswith("__", i):
        kind, width = "underline", 2
    elif text.startswith("||", i):
        kind, width = "spoiler", 2
    elif text.startswith("![", i):
        kind, width = "custom_emoji", 2
    elif c in opener:
        kind, width = opener[c], 1
    else:
        raise _reserved(text, i)
    stack.append(_Open(kind, out.pos, byte))
    return i + width


def _md2_in_code(text: str, i: int, out: _Builder, stack: list[_Open]) -> int:
    if text[i] != "`":
        out.add(text[i])
        return i + 1
    top = stack[-1]
    if top.kind == "code":
        stack.pop()
        out.entity("code", top.start)
        return i + 1
    if not text.startswith("```", i):
        raise _reserved(text, i)
    stack.pop()
    language = top.extra.get("language")
    out.entity("pre", top.start, **({"language": language} if language else {}))
    return i + 3


def _md2_close(text: str, i: int, out: _Builder, top: _Open) -> int:
    """Close ``top`` at ``text[i]``; a link reads its ``(url)``. Return the index after it."""
    i += len(_MD2_CLOSERS[top.kind])
    if top.kind not in ("text_link", "custom_emoji"):
        out.entity(top.kind, top.start)
        return i
    if not text.startswith("(", i):
        if top.kind == "custom_emoji":
            raise _ParseError(f"Custom emoji entity must contain a tg://emoji URL at byte "
                              f"offset {_byte_offset(text, i)}")
        return i  # "[text]" without a url: the text, no entity, as tdlib does
    url, j = [], i + 1
    while j < len(text) and text[j] != ")":
        if text[j] == "\\" and j + 1 < len(text):
            j += 1
        url.append(text[j])
        j += 1
    if j >= len(text):
        raise _ParseError(f"Can't find end of a URL at byte offset {_byte_offset(text, i + 1)}")
    target = "".join(url)
    if top.kind == "custom_emoji":
        out.entity("custom_emoji", top.start, custom_emoji_id=target.rpartition("id=")[2])
    elif target:
        out.entity("text_link", top.start, url=target)
    return j + 1


def parse_markdown(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The plain text and entities of a legacy Markdown text."""
    out, i = _Builder(), 0
    while i < len(text):
        c = text[i]
        if c == "\\" and text[i + 1:i + 2] in ("_", "*", "`", "["):
            out.add(text[i + 1])
            i += 2
        elif c in "_*`[":
            i = _md_entity(text, i, out)
        else:
            out.add(c)
            i += 1
    return out.result()


def _md_entity(text: str, i: int, out: _Builder) -> int:
    c = text[i]
    closer = {"_": "_", "*": "*", "`": "`", "[": "]"}[c]
    width = 3 if text.startswith("```", i) else 1
    closer = "```" if width == 3 else closer
    end = text.find(closer, i + width)
    if end < 0:
        raise _ParseError(f"Can't find end of the entity starting at byte offset "
                          f"{_byte_offset(text, i)}")
    start = out.pos
    out.add(text[i + width:end])
    kinds = {"_": "italic", "*": "bold", "`": "pre" if width == 3 else "code"}
    if c != "[":
        out.entity(kinds[c], start)
        return end + width
    if not text.startswith("(", end + 1):
        return end + 1
    close = text.find(")", end + 2)
    if close < 0:
        raise _ParseError(f"Can't find end of the entity starting at byte offset "
                          f"{_byte_offset(text, i)}")
    out.entity("text_link", start, url=text[end + 2:close])
    return close + 1


_PARSERS: dict[str, Callable[[str], tuple[str, list[dict[str, Any]]]]] = {
    "html": parse_html, "markdownv2": parse_markdown_v2, "markdown": parse_markdown,
}

_COMMAND = re.compile(r"(?<!\S)/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?(?![A-Za-z0-9_@])")
_MENTION = re.compile(r"(?<![\w@])@[A-Za-z0-9_]{5,32}(?![\w@])")


def incoming_entities(text: str) -> list[dict[str, Any]]:
    """The entities Telegram puts on a user's plain text: bot commands and @mentions."""
    found = [("bot_command", m) for m in _COMMAND.finditer(text)]
    found += [("mention", m) for m in _MENTION.finditer(text)]
    entities = [{"type": kind, "offset": _utf16_len(text[:m.start()]),
                 "length": _utf16_len(m.group(0))} for kind, m in found]
    return sorted(entities, key=lambda e: e["offset"])


# ---------------------------------------------------------------------------- request decoding


def decode_params(content_type: str, body: bytes, query: str) -> dict[str, Any]:
    """A request's parameters, from its query string and body, typed by name."""
    raw: dict[str, Any] = dict(parse_qsl(query, keep_blank_values=True))
    kind = content_type.split(";", 1)[0].strip().lower()
    try:
        if kind == "application/json" and body.strip():
            decoded = json.loads(body)
            if not isinstance(decoded, dict):
                raise _bad("JSON body must be an object")
            raw.update(decoded)
        elif kind == "application/x-www-form-urlencoded":
            raw.update(parse_qsl(body.decode(), keep_blank_values=True))
        elif kind == "multipart/form-data":
            raw.update(_multipart(content_type, body))
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad(f"can't parse request body: {exc}") from exc
    return {name: _coerce(name, value) for name, value in raw.items()}


def _multipart(content_type: str, body: bytes) -> dict[str, Any]:
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    parts: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        payload = payload if isinstance(payload, bytes) else b""
        if name:
            parts[str(name)] = payload if part.get_filename() else payload.decode()
    return parts


def _coerce(name: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if name in _INT_PARAMS and re.fullmatch(r"-?\d+", value):
        return int(value)
    if name in _BOOL_PARAMS and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    if name in _JSON_PARAMS:
        try:
            return json.loads(value)
        except ValueError as exc:
            raise _bad(f"can't parse {name} JSON object") from exc
    return value


def check_reply_markup(markup: Any) -> dict[str, Any] | None:
    """Validate a reply_markup as Telegram does (inline buttons in detail)."""
    if markup is None:
        return None
    if not isinstance(markup, dict):
        raise _bad("can't parse reply keyboard markup JSON object")
    rows = markup.get("inline_keyboard")
    if rows is None:
        return markup
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise _bad("field \"inline_keyboard\" of the InlineKeyboardMarkup should be an Array of "
                   "Arrays")
    for button in itertools.chain.from_iterable(rows):
        _check_button(button)
    return markup


_BUTTON_ACTIONS = ("url", "callback_data", "web_app", "login_url", "switch_inline_query",
                   "switch_inline_query_current_chat", "switch_inline_query_chosen_chat",
                   "copy_text", "callback_game", "pay")


def _check_button(button: Any) -> None:
    if not isinstance(button, dict) or not isinstance(button.get("text"), str):
        raise _bad("can't parse inline keyboard button: Text must be a String")
    actions = [name for name in _BUTTON_ACTIONS if name in button]
    if len(actions) != 1:
        raise _bad("can't parse inline keyboard button: Text buttons are unallowed in the "
                   "inline keyboard")
    data = button.get("callback_data")
    if data is not None and not (isinstance(data, str) and 1 <= len(data.encode()) <= 64):
        raise _bad("BUTTON_DATA_INVALID")


def _chat_id(params: dict[str, Any]) -> int:
    value = params.get("chat_id")
    if value is None or value == "":
        raise _bad("chat_id is empty")
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad("chat not found")
    return value


def _kind_of(update: dict[str, Any]) -> str:
    return next((key for key in update if key != "update_id"), "")


# ---------------------------------------------------------------------------- the server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: FakeTelegram


class FakeTelegram(Loopback):
    """A fake Bot API server: see the module docstring."""

    def __init__(self, token: str = DEFAULT_TOKEN, bot_username: str = "hearth_bot",
                 bot_id: int | None = None, *, first_name: str = "Hearth",
                 first_update_id: int = 10000, port: int = 0) -> None:
        self.token = token
        self.bot_username = bot_username
        self.bot_id = bot_id if bot_id is not None else int(token.split(":", 1)[0])
        self.first_name = first_name
        self.first_update_id = first_update_id
        super().__init__(port)
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._epoch = 0  # bumped by stop() and set_down(True): waiting requests are dropped
        self._down = False
        self._active = 0
        self._clear()
        self._methods = self._method_table()

    def _clear(self) -> None:
        self._update_ids = itertools.count(self.first_update_id)
        self._updates: list[dict[str, Any]] = []  # stored, unconfirmed, by update_id
        self._all_updates: dict[int, dict[str, Any]] = {}
        self._filtered: list[dict[str, Any]] = []
        self._allowed: frozenset[str] | None = None
        self._poll_generation = 0
        self.confirmed_below = 0
        self._next_message_id: dict[int, int] = {}
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._deleted: set[tuple[int, int]] = set()
        self._chats: dict[int, dict[str, Any]] = {}
        self._sent: list[Sent] = []
        self._edits: list[Edit] = []
        self._actions: list[Action] = []
        self.callback_answers: list[CallbackAnswer] = []
        self._open_queries: set[str] = set()
        self._query_ids = itertools.count(4_300_000_000_000_000_001)
        self._calls: list[Call] = []
        self._faults: dict[str, list[_Fault]] = {}
        self._holds: dict[str, Hold] = {}
        self._delays: dict[str, float] = {}
        self._blocked: set[int] = set()
        self.commands: dict[str, list[dict[str, Any]]] = {}
        self._files: dict[str, bytes] = {}  # file_id -> bytes (push_file, getFile)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeTelegram:
        """Serve (again, on the same port after a stop; the state is kept)."""
        if not self.running:
            httpd = _HTTPServer(("127.0.0.1", self._port), _Handler)
            httpd.owner = self
            self._serve(httpd)
        return self

    def stop(self) -> None:
        """Close the port; requests in flight are dropped without an answer."""
        if not self.running:
            return
        with self._cond:
            self._epoch += 1
            self._cond.notify_all()
        self._unserve()
        with self._cond:
            self._cond.wait_for(lambda: self._active == 0, timeout=5)

    @property
    def base_url(self) -> str:
        """What a bot takes as its ``base_url``: the token and ``/<method>`` follow it."""
        return f"{self.url}/bot"

    @property
    def file_url(self) -> str:
        """What a bot's ``base_file_url`` is here (``http://127.0.0.1:<port>/file/bot``)."""
        return self.base_url.replace("/bot", "/file/bot")

    @property
    def bot_user(self) -> dict[str, Any]:
        return {"id": self.bot_id, "is_bot": True, "first_name": self.first_name,
                "username": self.bot_username}

    def reset(self) -> None:
        """Forget every update, message, record and fault (the port and the bot stay)."""
        with self._cond:
            self._clear()
            self._down = False
            self._epoch += 1
            self._cond.notify_all()

    # ------------------------------------------------------------------ pushing updates

    def push_message(self, chat_id: int, from_id: int, text: str, *, chat_type: str = "private",
                     first_name: str = "Ann", username: str | None = None,
                     chat_title: str | None = None, reply_to: int | None = None,
                     message_id: int | None = None,
                     message_thread_id: int | None = None) -> int:
        """Store a user's text message as an update; return its update_id."""
        user = {"id": from_id, "is_bot": False, "first_name": first_name,
                **({"username": username} if username else {})}
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat |= {"first_name": first_name, **({"username": username} if username else {})}
        else:
            chat["title"] = chat_title or "Test group"
        with self._cond:
            self._chats[chat_id] = chat
            message: dict[str, Any] = {
                "message_id": message_id or self._new_message_id(chat_id), "from": user,
                "chat": chat, "date": int(time.time()), "text": text}
            if entities := incoming_entities(text):
                message["entities"] = entities
            if reply_to is not None:
                message["reply_to_message"] = self._stored_message(chat_id, reply_to)
            if message_thread_id is not None:
                message |= {"message_thread_id": message_thread_id, "is_topic_message": True}
            self._remember(message)
            return self._push({"message": message})

    def push_file(self, chat_id: int, from_id: int, kind: str, data: bytes, *,
                  caption: str | None = None, file_name: str | None = None,
                  mime_type: str | None = None) -> int:
        """Store a user's photo, document, voice note or audio (`kind`) as an update, its
        bytes served by getFile and the file URL; return the update_id."""
        with self._cond:
            file_id = f"file{len(self._files) + 1}"
            self._files[file_id] = data
        about: dict[str, Any] = {"file_id": file_id, "file_unique_id": f"u{file_id}",
                                 "file_size": len(data)}
        if file_name:
            about["file_name"] = file_name
        if mime_type:
            about["mime_type"] = mime_type
        if kind == "photo":  # sizes of one photo, the largest last
            media: Any = [{**about, "width": 90, "height": 90}, {**about, "width": 800,
                                                                  "height": 600}]
        elif kind == "voice":
            media = {**about, "duration": 2}
        else:
            media = about
        user = {"id": from_id, "is_bot": False, "first_name": "Ann"}
        chat = {"id": chat_id, "type": "private", "first_name": "Ann"}
        with self._cond:
            self._chats[chat_id] = chat
            message: dict[str, Any] = {"message_id": self._new_message_id(chat_id),
                                       "from": user, "chat": chat, "date": int(time.time()),
                                       kind: media}
            if caption:
                message["caption"] = caption
            self._remember(message)
            return self._push({"message": message})

    def file_bytes(self, path: str) -> bytes | None:
        """The bytes a file URL names (`/file/bot<token>/files/<file_id>`), or None."""
        match = re.fullmatch(r"/file/bot([^/]+)/files/([A-Za-z0-9]+)", urlsplit(path).path)
        if match is None or unquote(match.group(1)) != self.token:
            return None
        with self._cond:
            return self._files.get(match.group(2))

    def push_callback(self, chat_id: int, from_id: int, message_id: int, data: str, *,
                      first_name: str = "Ann") -> int:
        """Store a press of an inline button under the bot's message; return the update_id."""
        with self._cond:
            sent = self._sent_message(chat_id, message_id)
            if sent is None:
                raise ValueError(f"the bot sent no message {message_id} in chat {chat_id}")
            query_id = str(next(self._query_ids))
            self._open_queries.add(query_id)
            return self._push({"callback_query": {
                "id": query_id, "from": {"id": from_id, "is_bot": False,
                                         "first_name": first_name},
                "message": self._messages[(chat_id, message_id)],
                "chat_instance": str(-abs(chat_id) - 7), "data": data}})

    def push_raw(self, update: dict[str, Any]) -> int:
        """Store any update (``update_id`` filled in when missing); return its update_id."""
        with self._cond:
            for value in update.values():
                if isinstance(value, dict) and "message_id" in value and "chat" in value:
                    self._remember(value)
            return self._push(dict(update))

    def _push(self, update: dict[str, Any]) -> int:
        update_id = int(update.get("update_id") or next(self._update_ids))
        stored = {"update_id": update_id, **update}
        self._all_updates[update_id] = stored
        if self._allows(_kind_of(stored)):
            self._updates.append(stored)
            self._updates.sort(key=lambda u: u["update_id"])
        else:
            self._filtered.append(stored)
        self._cond.notify_all()
        return update_id

    def _allows(self, kind: str) -> bool:
        if self._allowed is None:
            return kind not in NOT_BY_DEFAULT
        return kind in self._allowed

    def _remember(self, message: dict[str, Any]) -> None:
        chat_id = int(message["chat"]["id"])
        self._chats.setdefault(chat_id, message["chat"])
        self._messages[(chat_id, int(message["message_id"]))] = message
        self._next_message_id[chat_id] = max(self._next_message_id.get(chat_id, 1),
                                             int(message["message_id"]) + 1)

    def _new_message_id(self, chat_id: int) -> int:
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def _stored_message(self, chat_id: int, message_id: int) -> dict[str, Any]:
        message = self._messages.get((chat_id, message_id))
        if message is None:
            raise ValueError(f"chat {chat_id} has no message {message_id} to reply to")
        return message

    # ------------------------------------------------------------------ reading

    def update(self, update_id: int) -> dict[str, Any]:
        """The update pushed with this id (confirmed or not)."""
        with self._lock:
            return self._all_updates[update_id]

    def pending_updates(self) -> list[dict[str, Any]]:
        """The stored updates no getUpdates confirmed yet."""
        with self._lock:
            return list(self._updates)

    def filtered_updates(self) -> list[dict[str, Any]]:
        """Updates pushed while ``allowed_updates`` excluded their kind (never delivered)."""
        with self._lock:
            return list(self._filtered)

    def sent(self, chat_id: int | None = None) -> list[Sent]:
        with self._lock:
            return [s for s in self._sent if chat_id is None or s.chat_id == chat_id]

    def message(self, chat_id: int, message_id: int) -> Sent:
        """The bot's message as it is now."""
        with self._lock:
            sent = self._sent_message(chat_id, message_id)
        if sent is None:
            raise KeyError(f"the bot sent no message {message_id} in chat {chat_id}")
        return sent

    def wait_sent(self, count: int, chat_id: int | None = None,
                  timeout: float = 10.0) -> list[Sent]:
        """Wait until at least ``count`` messages were sent (to ``chat_id``); return them all."""
        with self._cond:
            if self._cond.wait_for(lambda: len(self.sent(chat_id)) >= count, timeout=timeout):
                return self.sent(chat_id)
            seen = [(s.chat_id, s.text) for s in self._sent]
        where = "" if chat_id is None else f" to chat {chat_id}"
        raise AssertionError(f"expected {count} message(s){where} within {timeout}s; "
                             f"sent: {seen!r}")

    def edits(self, chat_id: int | None = None) -> list[Edit]:
        with self._lock:
            return [e for e in self._edits if chat_id is None or e.chat_id == chat_id]

    def actions(self, chat_id: int | None = None) -> list[Action]:
        with self._lock:
            return [a for a in self._actions if chat_id is None or a.chat_id == chat_id]

    def calls(self, method: str | None = None) -> list[Call]:
        """Every request (of ``method``), in arrival order."""
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def wait_calls(self, method: str | None, count: int = 1,
                   timeout: float = 10.0) -> list[Call]:
        with self._cond:
            if self._cond.wait_for(lambda: len(self.calls(method)) >= count, timeout=timeout):
                return self.calls(method)
            seen = [c.method for c in self._calls]
        raise AssertionError(f"expected {count} call(s) of {method} within {timeout}s; "
                             f"calls: {seen!r}")

    def offsets(self) -> list[int | None]:
        """The ``offset`` of every getUpdates call, in arrival order (``None``: none given)."""
        return [c.params.get("offset") for c in self.calls("getUpdates")]

    def wait_confirmed(self, update_id: int, timeout: float = 10.0) -> None:
        """Wait until a getUpdates call confirmed ``update_id`` (an offset above it)."""
        with self._cond:
            if self._cond.wait_for(lambda: self.confirmed_below > update_id, timeout=timeout):
                return
        raise AssertionError(f"update {update_id} not confirmed within {timeout}s; "
                             f"offsets: {self.offsets()!r}")

    # ------------------------------------------------------------------ faults

    def fail(self, method: str, status: int, description: str | None = None, times: int = 1,
             retry_after: int | None = None, parameters: dict[str, Any] | None = None) -> None:
        """The next ``times`` calls of ``method`` answer this error."""
        params = dict(parameters or {})
        if status == 429:
            params.setdefault("retry_after", retry_after or 1)
        elif retry_after is not None:
            params["retry_after"] = retry_after
        text = description or _DEFAULT_DESCRIPTIONS.get(status, f"Error {status}").format(
            retry_after=params.get("retry_after"))
        fault = _Fault(status, text, params or None, times)
        with self._lock:
            self._faults.setdefault(method, []).append(fault)

    def hold(self, method: str) -> Hold:
        """Hold the calls of ``method`` until the returned handle is released."""
        with self._lock:
            handle = self._holds[method] = Hold(method, self._cond)
            return handle

    def delay(self, method: str, seconds: float) -> None:
        with self._lock:
            if seconds > 0:
                self._delays[method] = seconds
            else:
                self._delays.pop(method, None)

    def set_down(self, down: bool) -> None:
        """Drop every request (and every waiting one) without an answer, or stop doing so."""
        with self._cond:
            self._down = down
            if down:
                self._epoch += 1
            self._cond.notify_all()

    def block_chat(self, chat_id: int) -> None:
        with self._lock:
            self._blocked.add(chat_id)

    def unblock_chat(self, chat_id: int) -> None:
        with self._lock:
            self._blocked.discard(chat_id)

    # ------------------------------------------------------------------ serving a request

    def handle(self, path: str, content_type: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """Answer one request: the status and the JSON body. :class:`_Aborted`: no answer."""
        with self._cond:
            epoch, down = self._epoch, self._down
        split = urlsplit(path)
        match = re.fullmatch(r"/bot([^/]+)/([A-Za-z0-9_]+)/?", split.path)
        token, name = (unquote(match.group(1)), match.group(2)) if match else ("", "")
        method = next((m for m in self._methods if m.lower() == name.lower()), name)
        call = Call(method, {}, time.monotonic(), token == self.token)
        try:
            call.params = decode_params(content_type, body, split.query)
        except ApiError as exc:
            call.params = {"_undecodable": exc.description}
        with self._cond:
            self._calls.append(call)
            self._cond.notify_all()
        if down:
            raise _Aborted
        status, payload = self._answer(call, match is not None, epoch)
        call.status = status
        return status, payload

    def _answer(self, call: Call, routed: bool, epoch: int) -> tuple[int, dict[str, Any]]:
        if routed and not call.token_ok:
            return _error(ApiError(401, "Unauthorized"))
        handler = self._methods.get(call.method)
        if handler is None:
            return _error(ApiError(404, "Not Found"))
        if "_undecodable" in call.params:
            return _error(_bad(str(call.params["_undecodable"]).removeprefix("Bad Request: ")))
        fault, hold = self._take_fault(call.method)
        try:
            self._delay_and_hold(call.method, hold, epoch)
            if fault is not None:
                raise ApiError(fault.status, fault.description, fault.parameters)
            return 200, {"ok": True, "result": handler(call.params, epoch)}
        except ApiError as exc:
            return _error(exc)
        except (TypeError, ValueError) as exc:  # a parameter of the wrong type
            return _error(_bad(f"wrong parameter in request: {exc}"))

    def _take_fault(self, method: str) -> tuple[_Fault | None, Hold | None]:
        with self._cond:
            hold = self._holds.get(method)
            if hold is not None and not hold.is_set():
                hold.arrived += 1
                self._cond.notify_all()
            faults = self._faults.get(method)
            if not faults:
                return None, hold
            fault = faults[0]
            fault.times -= 1
            if fault.times <= 0:
                faults.pop(0)
            return fault, hold

    def _delay_and_hold(self, method: str, hold: Hold | None, epoch: int) -> None:
        with self._cond:
            delay = self._delays.get(method, 0.0)
        if delay:
            self._wait(lambda: False, delay, epoch)
        if hold is not None:
            self._wait(hold.is_set, HOLD_TIMEOUT, epoch)

    def _wait(self, done: Callable[[], bool], timeout: float, epoch: int) -> bool:
        """Wait until ``done()`` or ``timeout``; :class:`_Aborted` if the fake stops or goes down
        meanwhile."""
        with self._cond:
            finished = self._cond.wait_for(lambda: done() or self._epoch != epoch,
                                           timeout=timeout)
            if self._epoch != epoch:
                raise _Aborted
            return finished

    def _entered(self, delta: int) -> None:
        with self._cond:
            self._active += delta
            self._cond.notify_all()

    # ------------------------------------------------------------------ Bot API methods

    def _method_table(self) -> dict[str, Callable[[dict[str, Any], int], Any]]:
        return {
            "getMe": lambda p, e: self.bot_user,
            "deleteWebhook": self._delete_webhook,
            "getWebhookInfo": lambda p, e: {"url": "", "has_custom_certificate": False,
                                             "pending_update_count": len(self.pending_updates())},
            "getUpdates": self._get_updates,
            "sendMessage": self._send_message,
            "sendChatAction": self._send_chat_action,
            "answerCallbackQuery": self._answer_callback_query,
            "editMessageText": self._edit_message_text,
            "editMessageReplyMarkup": self._edit_message_reply_markup,
            "deleteMessage": self._delete_message,
            "setMyCommands": self._set_my_commands,
            "getMyCommands": lambda p, e: self.commands.get(_commands_key(p), []),
            "deleteMyCommands": self._delete_my_commands,
            "getFile": self._get_file,
        }

    def _get_file(self, params: dict[str, Any], epoch: int) -> dict[str, Any]:
        file_id = str(params.get("file_id", ""))
        with self._cond:
            data = self._files.get(file_id)
        if data is None:
            raise _bad("Bad Request: invalid file_id")
        return {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": len(data),
                "file_path": f"files/{file_id}"}

    def _delete_webhook(self, params: dict[str, Any], epoch: int) -> bool:
        if params.get("drop_pending_updates"):
            with self._cond:
                self._updates.clear()
        return True

    def _get_updates(self, params: dict[str, Any], epoch: int) -> list[dict[str, Any]]:
        offset, allowed = params.get("offset"), params.get("allowed_updates")
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        timeout = max(float(params.get("timeout") or 0), 0.0)
        with self._cond:
            self._poll_generation += 1
            generation = self._poll_generation
            self._cond.notify_all()  # a poll still waiting is now superseded
            if isinstance(allowed, list):
                self._allowed = frozenset(allowed) if allowed else None
            if isinstance(offset, int):
                self._confirm(offset)
            self._wait(lambda: bool(self._updates) or self._poll_generation != generation,
                       timeout, epoch)
            if self._poll_generation != generation:
                raise ApiError(409, CONFLICT)
            return self._updates[:limit]

    def _confirm(self, offset: int) -> None:
        if offset < 0:
            kept = self._updates[offset:]
            offset = kept[0]["update_id"] if kept else self.confirmed_below
        self._updates = [u for u in self._updates if u["update_id"] >= offset]
        self.confirmed_below = max(self.confirmed_below, offset)
        self._cond.notify_all()

    def _send_message(self, params: dict[str, Any], epoch: int) -> dict[str, Any]:
        chat_id = self._writable_chat(params)
        text, parse_mode = params.get("text"), params.get("parse_mode")
        plain, entities = _render(text, parse_mode, params.get("entities"))
        markup = check_reply_markup(params.get("reply_markup"))
        with self._cond:
            reply_to = self._reply_target(chat_id, params)
            message_id = self._new_message_id(chat_id)
            sent = Sent(chat_id, message_id, str(text), parse_mode, plain, entities, markup,
                        reply_to, params.get("message_thread_id"), params, time.monotonic())
            self._sent.append(sent)
            message = self._sent_dict(sent)
            self._cond.notify_all()
            return message

    def _writable_chat(self, params: dict[str, Any]) -> int:
        chat_id = _chat_id(params)
        with self._lock:
            if chat_id in self._blocked:
                raise ApiError(403, BLOCKED)
        return chat_id

    def _reply_target(self, chat_id: int, params: dict[str, Any]) -> int | None:
        reply = params.get("reply_parameters")
        target = reply.get("message_id") if isinstance(reply, dict) else None
        target = target if target is not None else params.get("reply_to_message_id")
        if target is None:
            return None
        lenient = params.get("allow_sending_without_reply") or (
            isinstance(reply, dict) and reply.get("allow_sending_without_reply"))
        if (chat_id, target) in self._messages and (chat_id, target) not in self._deleted:
            return int(target)
        if lenient:
            return None
        raise _bad("message to be replied not found")

    def _sent_dict(self, sent: Sent) -> dict[str, Any]:
        """The Message Telegram answers for ``sent`` (also stored for replies and callbacks)."""
        message: dict[str, Any] = {
            "message_id": sent.message_id, "from": self.bot_user,
            "chat": self._chats.get(sent.chat_id) or _chat_guess(sent.chat_id),
            "date": int(time.time()), "text": sent.plain}
        if sent.entities:
            message["entities"] = sent.entities
        if sent.reply_markup and sent.reply_markup.get("inline_keyboard"):
            message["reply_markup"] = {"inline_keyboard": sent.reply_markup["inline_keyboard"]}
        if sent.reply_to is not None:
            message["reply_to_message"] = self._messages[(sent.chat_id, sent.reply_to)]
        if sent.message_thread_id is not None:
            message["message_thread_id"] = sent.message_thread_id
        if sent.edits:
            message["edit_date"] = int(time.time())
        self._messages[(sent.chat_id, sent.message_id)] = message
        return message

    def _sent_message(self, chat_id: int, message_id: int) -> Sent | None:
        return next((s for s in self._sent
                     if s.chat_id == chat_id and s.message_id == message_id), None)

    def _send_chat_action(self, params: dict[str, Any], epoch: int) -> bool:
        chat_id = self._writable_chat(params)
        action = params.get("action")
        if action not in CHAT_ACTIONS:
            raise _bad("wrong parameter action in request")
        with self._cond:
            self._actions.append(Action(chat_id, str(action), time.monotonic(),
                                        params.get("message_thread_id")))
            self._cond.notify_all()
        return True

    def _answer_callback_query(self, params: dict[str, Any], epoch: int) -> bool:
        query_id = str(params.get("callback_query_id") or "")
        with self._cond:
            if query_id not in self._open_queries:
                raise _bad(QUERY_INVALID.removeprefix("Bad Request: "))
            self._open_queries.discard(query_id)
            self.callback_answers.append(CallbackAnswer(
                query_id, params.get("text"), bool(params.get("show_alert")), params.get("url"),
                time.monotonic()))
            self._cond.notify_all()
        return True

    def _editable(self, params: dict[str, Any]) -> Sent:
        if params.get("inline_message_id") is not None:
            raise _bad("inline_message_id is not supported by the fake")
        chat_id = self._writable_chat(params)
        message_id = params.get("message_id")
        sent = self._sent_message(chat_id, message_id) if isinstance(message_id, int) else None
        if sent is None and (chat_id, message_id) in self._messages:
            raise _bad("message can't be edited")
        if sent is None or sent.deleted:
            raise _bad("message to edit not found")
        return sent

    def _edit_message_text(self, params: dict[str, Any], epoch: int) -> dict[str, Any]:
        text, parse_mode = params.get("text"), params.get("parse_mode")
        plain, entities = _render(text, parse_mode, params.get("entities"))
        markup = check_reply_markup(params.get("reply_markup"))
        with self._cond:
            sent = self._editable(params)
            if (plain, entities, markup) == (sent.plain, sent.entities, sent.reply_markup):
                raise ApiError(400, NOT_MODIFIED)
            sent.text, sent.parse_mode, sent.plain = str(text), parse_mode, plain
            sent.entities, sent.reply_markup = entities, markup
            return self._record_edit("editMessageText", sent, text, parse_mode)

    def _edit_message_reply_markup(self, params: dict[str, Any], epoch: int) -> dict[str, Any]:
        markup = check_reply_markup(params.get("reply_markup"))
        with self._cond:
            sent = self._editable(params)
            if markup == sent.reply_markup or (not markup and not sent.reply_markup):
                raise ApiError(400, NOT_MODIFIED)
            sent.reply_markup = markup
            return self._record_edit("editMessageReplyMarkup", sent, None, None)

    def _record_edit(self, method: str, sent: Sent, text: Any,
                     parse_mode: str | None) -> dict[str, Any]:
        sent.edits += 1
        self._edits.append(Edit(method, sent.chat_id, sent.message_id,
                                None if text is None else str(text), parse_mode,
                                sent.reply_markup, time.monotonic()))
        self._cond.notify_all()
        return self._sent_dict(sent)

    def _delete_message(self, params: dict[str, Any], epoch: int) -> bool:
        chat_id = _chat_id(params)
        message_id = params.get("message_id")
        with self._cond:
            key = (chat_id, message_id if isinstance(message_id, int) else 0)
            if key not in self._messages or key in self._deleted:
                raise _bad("message to delete not found")
            self._deleted.add(key)
            sent = self._sent_message(*key)
            if sent is not None:
                sent.deleted = True
            self._cond.notify_all()
        return True

    def _set_my_commands(self, params: dict[str, Any], epoch: int) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise _bad("can't parse commands JSON object")
        for command in commands:
            name = command.get("command") if isinstance(command, dict) else None
            if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_]{1,32}", name):
                raise _bad("BOT_COMMAND_INVALID")
            if not 1 <= len(str(command.get("description") or "")) <= 256:
                raise _bad("command description must be 1-256 characters long")
        with self._lock:
            self.commands[_commands_key(params)] = commands
        return True

    def _delete_my_commands(self, params: dict[str, Any], epoch: int) -> bool:
        with self._lock:
            self.commands.pop(_commands_key(params), None)
        return True


def _commands_key(params: dict[str, Any]) -> str:
    scope = params.get("scope") or {"type": "default"}
    return f"{json.dumps(scope, sort_keys=True)}|{params.get('language_code') or ''}"


def _chat_guess(chat_id: int) -> dict[str, Any]:
    """A chat this fake never saw a message in: private for a positive id, else a supergroup."""
    if chat_id > 0:
        return {"id": chat_id, "type": "private", "first_name": "Ann"}
    return {"id": chat_id, "type": "supergroup", "title": "Test group"}


def _render(text: Any, parse_mode: Any,
            entities: Any = None) -> tuple[str, list[dict[str, Any]]]:
    """Check a message text as Telegram does: the plain text and its entities, or 400."""
    if text is None or text == "":
        raise _bad("message text is empty")
    text = str(text)
    if parse_mode:
        parser = _PARSERS.get(str(parse_mode).lower())
        if parser is None:
            raise _bad("unsupported parse_mode")
        try:
            plain, found = parser(text)
        except _ParseError as exc:
            raise _bad(f"can't parse entities: {exc}") from exc
    else:
        plain, found = text, list(entities) if isinstance(entities, list) else []
    if not plain.strip():
        raise _bad("message text is empty")
    if len(plain) > MAX_MESSAGE_LENGTH:
        raise _bad("message is too long")
    return plain, found


def _error(exc: ApiError) -> tuple[int, dict[str, Any]]:
    payload: dict[str, Any] = {"ok": False, "error_code": exc.status,
                               "description": exc.description}
    if exc.parameters:
        payload["parameters"] = exc.parameters
    return exc.status, payload


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/file/bot"):
            self._serve_file()
            return
        self._serve()

    def _serve_file(self) -> None:
        """A file's bytes, as Telegram's `https://api.telegram.org/file/bot<token>/<path>`."""
        self.close_connection = True
        data = self.server.owner.file_bytes(self.path)
        self.send_response(200 if data is not None else 404)
        body = data if data is not None else b"Not Found"
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        self._serve()

    def _serve(self) -> None:
        self.close_connection = True
        owner = self.server.owner
        owner._entered(1)
        try:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            status, payload = owner.handle(self.path, self.headers.get("content-type", ""), body)
        except (_Aborted, BrokenPipeError, ConnectionResetError):
            return  # dropped: the connection closes without an answer
        except Exception as exc:  # noqa: BLE001 - a bug of the fake, said, not a silent drop
            status, payload = _error(ApiError(500, f"Internal Server Error: fake bug {exc!r}"))
        finally:
            owner._entered(-1)
        try:
            self._send_json(status, payload)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
