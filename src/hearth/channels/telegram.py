"""The Telegram channel: a bot on python-telegram-bot's `Bot`, long polling.

Polling is Hearth's own loop (not the library's Updater), so the offset Telegram is told is
the one committed with the admission it passes: at start the stored cursor is asked for, and
Telegram hands back everything still unconfirmed — what arrived while the gateway was down,
and a message taken in but not yet confirmed when it stopped (admitted once: its update_id is
recorded with its admission). A private chat is a thread; so is a group, where the bot answers
only when addressed (an @mention of it, a reply to it, or a /command@it). Approvals are asked
with buttons; only an owner's press answers them.

A wrong token or an unreachable server is said in `health` and tried again with a pause that
doubles up to five minutes, reset only by a poll that succeeds (a `getMe` that answers while
`getUpdates` keeps failing does not reset it); the gateway and the other channels go on
meanwhile. Sending never depends on the poller: replies, approvals and typing go through a bot
of their own (`_sender`), made at the first send and kept, so an answer owed while polling is
down still goes out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import httpx
from telegram import (
    Bot,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    MessageEntity,
    Update,
)
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.request import HTTPXRequest

from hearth import masking
from hearth.channels.base import (
    DECISIONS,
    Desk,
    Health,
    NotSent,
    Outbound,
    Refused,
    SendError,
    Unsure,
)
from hearth.channels.chunking import utf16_units
from hearth.channels.telegram_format import to_html
from hearth.config import TelegramConfig
from hearth.engine.intake.channel_inbound import Inbound
from hearth.errors import Refusal
from hearth.tasks import cancel_and_wait

log = logging.getLogger(__name__)

NAME = "telegram"
UPDATES = ["message", "callback_query"]
PAUSE_MAX = 300.0
MESSAGE_MAX = 4096  # Telegram's own limit, in UTF-16 code units, after entities
APPROVAL_PREFIX = "ap"


class TelegramChannel:
    name = NAME
    resend_is_safe = False  # Telegram cannot say whether a message arrived

    def __init__(self, config: TelegramConfig) -> None:
        self.config = config
        self.max_chars = config.max_chars
        self.measure: Callable[[str], int] = utf16_units
        self.health = Health()
        self._token = config.resolved_token()
        if self._token:
            masking.know(self._token)  # never in a log line or an error sentence
        self._bot: Bot | None = None  # the poller's
        self._sending: Bot | None = None  # the sender's, kept whatever the poller does
        self._desk: Desk | None = None
        self._task: asyncio.Task[None] | None = None
        self._pause = 1.0  # before the poller's next try; reset by a poll that succeeds

    def owner_thread(self) -> str | None:
        """The owner's private chat with the bot: its id is the owner's user id."""
        return str(self.config.owner_ids[0]) if self.config.owner_ids else None

    async def start(self, desk: Desk) -> None:
        self._desk = desk
        if not self._token:
            self.health = Health("error", "No bot token: set TELEGRAM_BOT_TOKEN (or token_env "
                                 "/ token in [channels.telegram]) and restart.")
            return
        self._task = asyncio.create_task(self._run(), name="channel:telegram:poll")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        await self._drop_bot()
        sending, self._sending = self._sending, None
        if sending is not None:
            with contextlib.suppress(TelegramError, httpx.HTTPError, RuntimeError):
                await sending.shutdown()

    # -- taking in ---------------------------------------------------------------------

    async def _run(self) -> None:
        """Connect and poll; on a failure say why, pause (doubling), and try again."""
        while True:
            pause = self._pause
            try:
                await self._connect()
                await self._poll()
            except InvalidToken:
                self._failed("The Telegram token was refused (401 Unauthorized): check the "
                             "bot token in [channels.telegram].", pause)
            except (NetworkError, TimedOut) as error:
                self._failed(f"Telegram cannot be reached ({masking.mask(str(error))}); "
                             "trying again.", pause)
            except TelegramError as error:
                self._failed(f"Telegram answered with an error: {masking.mask(str(error))}",
                             pause)
            await self._drop_bot()
            await asyncio.sleep(pause)
            self._pause = min(PAUSE_MAX, max(self._pause, pause) * 2)

    def _failed(self, sentence: str, pause: float) -> None:
        self.health = Health("error", f"{sentence} (next try in {pause:.0f} s)")
        log.warning("telegram: %s", sentence)

    async def _drop_bot(self) -> None:
        bot, self._bot = self._bot, None
        if bot is not None:
            with contextlib.suppress(TelegramError, httpx.HTTPError, RuntimeError):
                await bot.shutdown()

    def _new_bot(self) -> Bot:
        assert self._token is not None
        poll = self.config.poll_timeout_seconds
        return Bot(self._token, base_url=self.config.base_url,
                   base_file_url=_file_url(self.config.base_url),
                   request=HTTPXRequest(connection_pool_size=64, read_timeout=20.0,
                                        write_timeout=20.0, connect_timeout=10.0),
                   get_updates_request=HTTPXRequest(read_timeout=poll + 15.0,
                                                    connect_timeout=10.0))

    async def _connect(self) -> None:
        bot = self._new_bot()
        await bot.initialize()  # getMe: a wrong token fails here
        self._bot = bot
        self.health = Health("running", f"Connected as @{bot.username}.",
                             {"bot": f"@{bot.username}"})

    async def _poll(self) -> None:
        assert self._bot is not None and self._desk is not None
        offset = await self._desk.cursor(NAME)
        while True:
            updates = await self._bot.get_updates(
                offset=offset, timeout=int(self.config.poll_timeout_seconds),
                allowed_updates=UPDATES)
            self._pause = 1.0  # the failing call itself answered: the backoff starts over
            for update in updates:
                await self._take(update)
                offset = update.update_id + 1

    async def _take(self, update: Update) -> None:
        assert self._desk is not None
        cursor = update.update_id + 1
        if update.callback_query is not None:
            await self._pressed(update.callback_query)
            await self._desk.skip(NAME, cursor)
            return
        inbound = self._inbound(update, cursor)
        if inbound is None:
            await self._desk.skip(NAME, cursor)
            return
        try:
            inbound = await self._with_files(update, inbound)
            await self._desk.receive(inbound)
        except Refusal as refusal:
            if refusal.code == "shutting_down":
                raise asyncio.CancelledError from refusal  # taken in again at the next start
            log.warning("telegram: a message was not admitted: %s", refusal.sentence)
            await self._desk.skip(NAME, cursor)

    async def _with_files(self, update: Update, inbound: Inbound) -> Inbound:
        """`inbound` with the files its message carries, fetched (getFile, then the file's
        URL; Telegram gives a bot files of up to 20 MB). One that cannot be fetched is named
        in the message instead, saying so."""
        assert self._bot is not None and update.message is not None
        files: list[tuple[str, bytes]] = []
        lost: list[str] = []
        for file_id, name in _fetchable(update.message):
            try:
                found = await self._bot.get_file(file_id)
                files.append((name, bytes(await found.download_as_bytearray())))
            except (TelegramError, httpx.HTTPError) as error:
                log.warning("telegram: a file could not be fetched (%s)", type(error).__name__)
                lost.append(f"{name} (it could not be fetched)")
        return replace(inbound, files=tuple(files),
                       attachments=(*inbound.attachments, *lost))

    def _inbound(self, update: Update, cursor: int) -> Inbound | None:
        message = update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return None
        text = message.text or message.caption or ""
        private = message.chat.type == "private"
        if not private:
            addressed, text = self._addressed(message, text)
            if not addressed:
                return None
        attachments = _attachments(message)
        if not text.strip() and not attachments and not _fetchable(message):
            return None
        sender = message.from_user
        owner = sender.id in self.config.owner_ids
        return Inbound(channel=NAME, thread=str(message.chat.id),
                       inbound_id=str(update.update_id), sender=str(sender.id),
                       sender_name=sender.full_name or sender.username or str(sender.id),
                       text=text.strip(), owner=owner, owner_dm=private and owner,
                       attachments=attachments, cursor=cursor)

    def _addressed(self, message: Message, text: str) -> tuple[bool, str]:
        """Whether a group message is for the bot, and its text without the @mention."""
        assert self._bot is not None
        me = self._bot.bot
        handle = f"@{me.username}".lower()
        reply = message.reply_to_message
        addressed = bool(reply and reply.from_user and reply.from_user.id == me.id)
        kinds: list[str | None] = [MessageEntity.MENTION, MessageEntity.BOT_COMMAND]
        found = (message.parse_entities(kinds) if message.text
                 else message.parse_caption_entities(kinds))
        for entity, said in found.items():
            if entity.type == MessageEntity.MENTION and said.lower() == handle:
                addressed = True
                text = text.replace(said, "", 1)
            elif entity.type == MessageEntity.BOT_COMMAND and said.lower().endswith(handle):
                addressed = True
        return addressed, _tidy(text) if addressed else text

    async def _pressed(self, query: CallbackQuery) -> None:
        """An approval's button: answered by the owner only; the buttons go once answered."""
        assert self._desk is not None and self._bot is not None
        parts = (query.data or "").split(":")
        if len(parts) != 3 or parts[0] != APPROVAL_PREFIX or parts[2] not in DECISIONS:
            await self._bot.answer_callback_query(query.id, text="This button is not Hearth's.")
            return
        owner = query.from_user.id in self.config.owner_ids
        sentence = await self._desk.answer(NAME, parts[1], parts[2], str(query.from_user.id),
                                           owner)
        with contextlib.suppress(TelegramError):
            await self._bot.answer_callback_query(query.id, text=sentence[:200])
            if owner and isinstance(query.message, Message):
                await self._bot.edit_message_reply_markup(
                    chat_id=query.message.chat.id, message_id=query.message.message_id,
                    reply_markup=None)

    # -- sending -------------------------------------------------------------------------

    async def _sender(self) -> Bot:
        """The bot replies go out by, made and kept at the first send: it does not wait on
        the poller (NotSent while Telegram cannot be reached, tried again by the ledger)."""
        if self._sending is not None:
            return self._sending
        if not self._token:
            raise NotSent("Telegram has no bot token")
        bot = self._new_bot()
        try:
            await bot.initialize()
        except TelegramError as error:  # getMe: nothing was sent
            with contextlib.suppress(TelegramError, httpx.HTTPError, RuntimeError):
                await bot.shutdown()
            raise NotSent(f"Telegram cannot be reached ({masking.mask(str(error))})") from error
        self._sending = bot
        return bot

    async def send(self, out: Outbound) -> str | None:
        bot = await self._sender()
        markup = None
        if out.buttons and out.approval_id:
            markup = InlineKeyboardMarkup([[
                InlineKeyboardButton(label, callback_data=f"{APPROVAL_PREFIX}:"
                                     f"{out.approval_id}:{decision}")
                for label, decision in out.buttons]])
        html = to_html(out.text)
        try:
            if utf16_units(html) <= MESSAGE_MAX:
                try:
                    sent = await bot.send_message(_chat_id(out.thread), html,
                                                  parse_mode=ParseMode.HTML, reply_markup=markup)
                    return str(sent.message_id)
                except BadRequest as error:
                    if "can't parse entities" not in str(error).lower():
                        raise
            sent = await bot.send_message(_chat_id(out.thread), out.text, reply_markup=markup)
            return str(sent.message_id)
        except TelegramError as error:
            raise _send_error(error) from error

    async def typing(self, thread: str) -> None:
        with contextlib.suppress(TelegramError, SendError):
            bot = await self._sender()
            await bot.send_chat_action(_chat_id(thread), ChatAction.TYPING)


def _tidy(text: str) -> str:
    """An addressed group message without the spaces its @mention left: each line's runs of
    spaces made one, its line breaks kept, blank lines at either end dropped."""
    return "\n".join(" ".join(line.split()) for line in text.splitlines()).strip()


def _file_url(base_url: str) -> str:
    """Where the Bot API serves files: `…/file/bot` beside `…/bot`."""
    head, bot, tail = base_url.rpartition("/bot")
    return f"{head}/file/bot{tail}" if bot else base_url.rstrip("/") + "/file/bot"


def _chat_id(thread: str) -> int | str:
    return int(thread) if thread.lstrip("-").isdigit() else thread


def _attachments(message: Message) -> tuple[str, ...]:
    """What a message carries that Hearth does not fetch, named."""
    return tuple(f"a {kind}" for kind in ("video", "sticker", "location", "contact")
                 if getattr(message, kind, None) is not None)


def _fetchable(message: Message) -> list[tuple[str, str]]:
    """The files a message carries that are fetched and kept: (file_id, name) of its photo
    (the largest size), document, voice note or audio."""
    found: list[tuple[str, str]] = []
    if message.photo:
        found.append((message.photo[-1].file_id, f"photo-{message.message_id}.jpg"))
    if message.document is not None:
        found.append((message.document.file_id,
                      message.document.file_name or f"file-{message.message_id}"))
    if message.voice is not None:
        found.append((message.voice.file_id, f"voice note {message.message_id}.ogg"))
    if message.audio is not None:
        found.append((message.audio.file_id,
                      message.audio.file_name or f"audio-{message.message_id}"))
    return found


def _send_error(error: TelegramError) -> SendError:
    """What a failed send means for the ledger: not sent, refused for good, or unsure."""
    why = masking.mask(str(error))
    if isinstance(error, RetryAfter):
        with warnings.catch_warnings():  # PTB 22 warns that it will be a timedelta one day
            warnings.simplefilter("ignore")
            wait = error.retry_after
        seconds = wait.total_seconds() if isinstance(wait, timedelta) else float(wait)
        return NotSent(f"Telegram asked to wait {seconds:.0f} s", seconds)
    if isinstance(error, InvalidToken):
        return NotSent("Telegram refused the bot token")
    if isinstance(error, Forbidden):
        return Refused(f"Telegram refused it: the bot may be blocked or out of the chat ({why})")
    if isinstance(error, BadRequest):
        return Refused(f"Telegram refused it ({why})")
    cause = error.__cause__
    if isinstance(cause, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return NotSent(f"Telegram cannot be reached ({why})")
    if isinstance(error, NetworkError) and cause is None:
        return NotSent(f"Telegram answered with an error ({why})")  # a 5xx: it took nothing
    return Unsure(f"the connection to Telegram broke during the send ({why})")
