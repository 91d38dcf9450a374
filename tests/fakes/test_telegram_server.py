"""Tests for the fake Telegram Bot API server, driven by python-telegram-bot's own ``Bot``.

They pin down that :mod:`tests.fakes.telegram_server` speaks the Bot API well enough for the
unmodified PTB client (requests, answers, the errors PTB maps), keeps Telegram's getUpdates
semantics (stored until confirmed by an offset, long polls that wake on a push, 409 for a
second poller), refuses what Telegram refuses (long, empty, badly formatted texts) and that its
controls and faults behave as its docstring says.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
import telegram
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, ReplyParameters
from telegram.error import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
)
from telegram.request import HTTPXRequest

from tests.fakes.telegram_server import FakeTelegram

T = TypeVar("T")


@pytest.fixture(scope="module")
def _fake() -> Iterator[FakeTelegram]:
    with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def tg(_fake: FakeTelegram) -> FakeTelegram:
    _fake.reset()
    return _fake


# A bot's two httpx clients each build an SSL context (~50 ms) the loopback never uses: the
# tests share one, which changes nothing on the wire.
_SSL = ssl.create_default_context()


def make_bot(fake: FakeTelegram, token: str | None = None) -> telegram.Bot:
    return telegram.Bot(token or fake.token, base_url=fake.base_url,
                        request=HTTPXRequest(httpx_kwargs={"verify": _SSL}),
                        get_updates_request=HTTPXRequest(httpx_kwargs={"verify": _SSL}))


def with_bot(fake: FakeTelegram, go: Callable[[telegram.Bot], Awaitable[T]],
             token: str | None = None) -> T:
    """Run ``go(bot)`` with a PTB bot on the fake, in a fresh event loop."""
    async def main() -> T:
        bot = make_bot(fake, token)
        await bot.initialize()
        try:
            return await go(bot)
        finally:
            await bot.shutdown()
    return asyncio.run(main())


def raw_post(fake: FakeTelegram, path: str, body: bytes,
             content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(fake.url + path, data=body,
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


KEYBOARD = InlineKeyboardMarkup([[InlineKeyboardButton("Allow", callback_data="allow:1"),
                                  InlineKeyboardButton("Deny", callback_data="deny:1")]])


# ---------------------------------------------------------------------------- getMe, tokens


def test_get_me_answers_the_bot_user(tg: FakeTelegram) -> None:
    me = with_bot(tg, lambda bot: bot.get_me())
    assert (me.id, me.is_bot, me.username) == (123456, True, "hearth_bot")
    assert [c.method for c in tg.calls()] == ["getMe", "getMe"]  # initialize() and ours


def test_a_wrong_token_raises_invalid_token_for_every_method(tg: FakeTelegram) -> None:
    async def go(bot: telegram.Bot) -> None:
        raise AssertionError("initialize should have failed")

    with pytest.raises(InvalidToken):
        with_bot(tg, go, token="999:WRONG")
    status, body = raw_post(tg, "/bot999:WRONG/sendMessage", b'{"chat_id": 1, "text": "x"}')
    assert (status, body) == (401, {"ok": False, "error_code": 401,
                                    "description": "Unauthorized"})
    assert tg.sent() == [] and not tg.calls()[-1].token_ok


def test_an_unknown_method_is_404_in_telegrams_envelope(tg: FakeTelegram) -> None:
    status, body = raw_post(tg, f"/bot{tg.token}/sendTelepathy", b"{}")
    assert (status, body) == (404, {"ok": False, "error_code": 404, "description": "Not Found"})


def test_json_and_form_bodies_and_any_case_method_names_are_understood(tg: FakeTelegram) -> None:
    status, body = raw_post(tg, f"/bot{tg.token}/SENDMESSAGE",
                            b'{"chat_id": 5, "text": "json", "reply_markup": '
                            b'{"inline_keyboard": [[{"text": "a", "callback_data": "b"}]]}}')
    assert status == 200 and body["result"]["text"] == "json"
    status, body = raw_post(tg, f"/bot{tg.token}/sendMessage",
                            b"chat_id=5&text=form+%26+more",
                            "application/x-www-form-urlencoded")
    assert status == 200 and body["result"]["message_id"] == 2
    first, second = tg.sent(5)
    assert first.reply_markup == {"inline_keyboard": [[{"text": "a", "callback_data": "b"}]]}
    assert second.text == "form & more" and tg.calls()[0].method == "sendMessage"
    status, body = raw_post(tg, f"/bot{tg.token}/sendMessage", b"chat_id=5&text=x&reply_markup=%7B",
                            "application/x-www-form-urlencoded")
    assert status == 400 and "reply_markup" in body["description"]


# ---------------------------------------------------------------------------- getUpdates


def test_updates_stay_stored_until_an_offset_confirms_them(tg: FakeTelegram) -> None:
    first = tg.push_message(42, 7, "/start@hearth_bot hi @someone_x", username="ann")
    second = tg.push_message(42, 7, "second")
    assert second == first + 1 and first == 10000

    async def go(bot: telegram.Bot) -> tuple[Any, ...]:
        once = await bot.get_updates(timeout=0)
        again = await bot.get_updates(timeout=0)  # no offset: nothing was confirmed
        after = await bot.get_updates(offset=second + 1, timeout=0)
        return once, again, after

    once, again, after = with_bot(tg, go)
    assert [u.update_id for u in once] == [u.update_id for u in again] == [first, second]
    message = once[0].message
    assert message.chat.id == 42 and message.from_user.username == "ann"
    assert [(e.type, e.offset, e.length) for e in message.entities] == [
        ("bot_command", 0, 17), ("mention", 21, 10)]
    assert after == () and tg.pending_updates() == []
    assert tg.offsets() == [None, None, second + 1] and tg.confirmed_below == second + 1
    tg.wait_confirmed(second, timeout=0.1)
    with pytest.raises(AssertionError, match="not confirmed"):
        tg.wait_confirmed(second + 1, timeout=0.1)


def test_a_limit_and_an_offset_confirm_only_what_is_below(tg: FakeTelegram) -> None:
    ids = [tg.push_message(1, 1, f"m{n}") for n in range(3)]

    async def go(bot: telegram.Bot) -> tuple[Any, ...]:
        return await bot.get_updates(limit=1), await bot.get_updates(offset=ids[1], limit=5)

    first, rest = with_bot(tg, go)
    assert [u.update_id for u in first] == [ids[0]]
    assert [u.update_id for u in rest] == ids[1:]
    assert [u["update_id"] for u in tg.pending_updates()] == ids[1:]


def test_a_long_poll_wakes_as_soon_as_an_update_is_pushed(tg: FakeTelegram) -> None:
    timer = threading.Timer(0.2, lambda: tg.push_message(42, 42, "late"))

    async def go(bot: telegram.Bot) -> tuple[Any, float]:
        began = time.monotonic()
        timer.start()
        updates = await bot.get_updates(timeout=5)
        return updates, time.monotonic() - began

    updates, took = with_bot(tg, go)
    assert [u.message.text for u in updates] == ["late"]
    assert 0.15 < took < 1.5


def test_an_empty_long_poll_answers_after_its_timeout(tg: FakeTelegram) -> None:
    async def go(bot: telegram.Bot) -> tuple[Any, float]:
        began = time.monotonic()
        return await bot.get_updates(timeout=0.4), time.monotonic() - began  # type: ignore[arg-type]

    updates, took = with_bot(tg, go)
    assert updates == () and 0.35 < took < 2


def test_a_second_poller_ends_the_waiting_one_with_conflict(tg: FakeTelegram) -> None:
    async def go(bot: telegram.Bot) -> tuple[Any, ...]:
        other = telegram.Bot(tg.token, base_url=tg.base_url)
        waiting = asyncio.create_task(bot.get_updates(timeout=5))
        await asyncio.to_thread(tg.wait_calls, "getUpdates", 1)
        async with other:
            second = await other.get_updates(timeout=0)
        first = await asyncio.gather(waiting, return_exceptions=True)
        return first[0], second

    first, second = with_bot(tg, go)
    assert isinstance(first, Conflict) and "terminated by other getUpdates" in str(first)
    assert second == ()


def test_a_long_poll_and_sends_run_side_by_side(tg: FakeTelegram) -> None:
    async def go(bot: telegram.Bot) -> Any:
        poll = asyncio.create_task(bot.get_updates(timeout=5))
        await asyncio.to_thread(tg.wait_calls, "getUpdates", 1)
        for n in range(3):
            await bot.send_message(9, f"while polling {n}")
        tg.push_message(9, 9, "now")
        return await poll

    updates = with_bot(tg, go)
    assert [u.message.text for u in updates] == ["now"] and len(tg.sent(9)) == 3


def test_allowed_updates_filter_updates_created_after_them(tg: FakeTelegram) -> None:
    early = tg.push_raw({"edited_message": {"message_id": 1, "date": 0, "text": "early",
                                            "chat": {"id": 3, "type": "private"}}})

    async def go(bot: telegram.Bot) -> Any:
        await bot.get_updates(timeout=0, allowed_updates=["message", "callback_query"])
        tg.push_raw({"edited_message": {"message_id": 1, "date": 0, "text": "late",
                                        "chat": {"id": 3, "type": "private"}}})
        tg.push_message(3, 3, "kept")
        return await bot.get_updates(timeout=0)

    updates = with_bot(tg, go)
    assert [u.update_id for u in updates][0] == early  # created before: still delivered
    assert [u.effective_message.text for u in updates] == ["early", "kept"]
    assert [u["edited_message"]["text"] for u in tg.filtered_updates()] == ["late"]


def test_delete_webhook_can_drop_pending_updates(tg: FakeTelegram) -> None:
    tg.push_message(1, 1, "old")
    info = with_bot(tg, lambda bot: bot.get_webhook_info())
    assert info.url == "" and info.pending_update_count == 1
    assert with_bot(tg, lambda bot: bot.delete_webhook(drop_pending_updates=True)) is True
    assert tg.pending_updates() == []


# ---------------------------------------------------------------------------- sendMessage


def test_sent_messages_are_recorded_with_ids_rising_per_chat(tg: FakeTelegram) -> None:
    tg.push_message(1, 1, "hello")  # message 1 of chat 1: ids are shared in a chat

    async def go(bot: telegram.Bot) -> list[int]:
        ids = [(await bot.send_message(1, "a")).message_id,
               (await bot.send_message(2, "b", reply_markup=KEYBOARD)).message_id,
               (await bot.send_message(1, "c")).message_id]
        return ids

    assert with_bot(tg, go) == [2, 1, 3]
    assert [(s.chat_id, s.message_id, s.text) for s in tg.sent()] == [
        (1, 2, "a"), (2, 1, "b"), (1, 3, "c")]
    markup = tg.sent(2)[0].reply_markup
    assert markup == {"inline_keyboard": [[{"text": "Allow", "callback_data": "allow:1"},
                                           {"text": "Deny", "callback_data": "deny:1"}]]}


def test_a_message_over_4096_characters_is_refused(tg: FakeTelegram) -> None:
    async def go(bot: telegram.Bot) -> Any:
        fits = await bot.send_message(1, "é" * 4096)
        tagged = await bot.send_message(1, "<b>" + "x" * 4096 + "</b>", parse_mode="HTML")
        try:
            await bot.send_message(1, "x" * 4097)
        except BadRequest as exc:
            return fits, tagged, exc
        raise AssertionError("a 4097-character text was accepted")

    fits, tagged, refused = with_bot(tg, go)
    assert len(fits.text) == 4096 and len(tagged.text) == 4096  # tags do not count
    assert "message is too long" in str(refused).lower() and len(tg.sent()) == 2


@pytest.mark.parametrize("text", ["", "   \n ", "<b> </b>"])
def test_an_empty_message_is_refused(tg: FakeTelegram, text: str) -> None:
    with pytest.raises(BadRequest, match="text is empty"):
        with_bot(tg, lambda bot: bot.send_message(1, text, parse_mode="HTML"))


@pytest.mark.parametrize("text", [
    "a < b", "line<br>break", "<p>para</p>", "<b>open", "<b><i>crossed</b></i>", "</b>",
    "AT&T", "&nbsp;", '<span class="x">s</span>',
])
def test_bad_html_is_refused(tg: FakeTelegram, text: str) -> None:
    with pytest.raises(BadRequest, match="[Cc]an't parse entities"):
        with_bot(tg, lambda bot: bot.send_message(1, text, parse_mode="HTML"))
    assert tg.sent() == []


def test_good_html_gives_the_plain_text_and_entities(tg: FakeTelegram) -> None:
    text = ('<B>bold</B> &lt;&amp;&gt; <a href="https://x.org/?a=1&amp;b=2">link</a> '
            '<pre><code class="language-py">x = 1</code></pre> <tg-spoiler>s</tg-spoiler> 😀'
            '<i>i</i>')
    message = with_bot(tg, lambda bot: bot.send_message(1, text, parse_mode="html"))
    assert message.text == "bold <&> link x = 1 s 😀i"
    assert [(e.type, e.offset, e.length) for e in message.entities] == [
        ("bold", 0, 4), ("text_link", 9, 4), ("pre", 14, 5), ("spoiler", 20, 1),
        ("italic", 24, 1)]  # the emoji is two UTF-16 units
    assert message.entities[1].url == "https://x.org/?a=1&b=2"
    assert message.entities[2].language == "py"
    assert tg.sent()[0].text == text and tg.sent()[0].plain == message.text


@pytest.mark.parametrize("text", [
    "Hello.", "1+1=2", "a-b", "(x)", "*open", "_a *b_ c*", "`code", "```\npre",
    "[link](http://x", "a|b", "#tag", "!",
])
def test_bad_markdown_v2_is_refused(tg: FakeTelegram, text: str) -> None:
    with pytest.raises(BadRequest, match="[Cc]an't parse entities"):
        with_bot(tg, lambda bot: bot.send_message(1, text, parse_mode="MarkdownV2"))


@pytest.mark.parametrize(("text", "plain", "kinds"), [
    ("Hello\\.", "Hello.", []),
    ("*b* _i_ __u__ ~s~ ||sp||", "b i u s sp",
     ["bold", "italic", "underline", "strikethrough", "spoiler"]),
    ("[a\\.b](https://x.org/p\\)q)", "a.b", ["text_link"]),
    ("`x.y` ```python\nprint(1)```", "x.y print(1)", ["code", "pre"]),
    (">quoted\\!\n>more\nafter", "quoted!\nmore\nafter", ["blockquote"]),
    ("*bold _nested_ \\* star*", "bold nested * star", ["bold", "italic"]),
])
def test_good_markdown_v2_gives_the_plain_text_and_entities(
        tg: FakeTelegram, text: str, plain: str, kinds: list[str]) -> None:
    message = with_bot(tg, lambda bot: bot.send_message(1, text, parse_mode="MarkdownV2"))
    assert message.text == plain and [e.type for e in message.entities] == kinds


def test_an_unknown_parse_mode_is_refused(tg: FakeTelegram) -> None:
    with pytest.raises(BadRequest, match="[Uu]nsupported parse_mode"):
        with_bot(tg, lambda bot: bot.send_message(1, "x", parse_mode="BBCode"))


def test_callback_data_over_64_bytes_is_refused(tg: FakeTelegram) -> None:
    markup = InlineKeyboardMarkup([[InlineKeyboardButton("x", callback_data="d" * 65)]])
    with pytest.raises(BadRequest, match="(?i)BUTTON_DATA_INVALID"):
        with_bot(tg, lambda bot: bot.send_message(1, "x", reply_markup=markup))


def test_replies_carry_the_replied_message(tg: FakeTelegram) -> None:
    async def go(bot: telegram.Bot) -> tuple[Any, ...]:
        mine = await bot.send_message(4, "question?")
        tg.push_message(4, 4, "answer", reply_to=mine.message_id)
        [update] = await bot.get_updates()
        assert update.message is not None
        reply = await bot.send_message(4, "thanks", reply_parameters=ReplyParameters(
            update.message.message_id))
        try:
            await bot.send_message(4, "lost", reply_parameters=ReplyParameters(999))
        except BadRequest as exc:
            return update, reply, exc
        raise AssertionError("a reply to a missing message was accepted")

    update, reply, refused = with_bot(tg, go)
    replied = update.message.reply_to_message
    assert replied.text == "question?" and replied.from_user.id == tg.bot_id
    assert reply.reply_to_message.text == "answer" and tg.sent(4)[1].reply_to == 2
    assert "message to be replied not found" in str(refused).lower()


def test_a_blocked_chat_is_forbidden(tg: FakeTelegram) -> None:
    tg.block_chat(8)
    with pytest.raises(Forbidden, match="blocked"):
        with_bot(tg, lambda bot: bot.send_message(8, "x"))
    tg.unblock_chat(8)
    assert with_bot(tg, lambda bot: bot.send_message(8, "x")).message_id == 1


def test_wait_sent_says_what_was_sent_when_it_times_out(tg: FakeTelegram) -> None:
    with_bot(tg, lambda bot: bot.send_message(1, "only one"))
    assert [s.text for s in tg.wait_sent(1, chat_id=1, timeout=1)] == ["only one"]
    with pytest.raises(AssertionError, match="only one"):
        tg.wait_sent(2, timeout=0.1)


# ---------------------------------------------------------------------------- other methods


def test_chat_actions_are_recorded_and_checked(tg: FakeTelegram) -> None:
    assert with_bot(tg, lambda bot: bot.send_chat_action(6, "typing")) is True
    [action] = tg.actions(6)
    assert action.action == "typing" and action.time <= time.monotonic()
    with pytest.raises(BadRequest, match="action"):
        with_bot(tg, lambda bot: bot.send_chat_action(6, "dancing"))


def test_a_callback_query_round_trip(tg: FakeTelegram) -> None:
    async def go(bot: telegram.Bot) -> Any:
        sent = await bot.send_message(3, "Allow the tool?", reply_markup=KEYBOARD)
        tg.push_callback(3, 3, sent.message_id, "allow:1")
        [update] = await bot.get_updates()
        query = update.callback_query
        assert query is not None
        assert await bot.answer_callback_query(query.id, text="Allowed") is True
        try:
            await bot.answer_callback_query(query.id)
        except BadRequest as exc:
            return query, exc
        raise AssertionError("a query was answered twice")

    query, twice = with_bot(tg, go)
    assert query.data == "allow:1" and query.from_user.id == 3
    assert query.message.message_id == 1 and query.message.from_user.id == tg.bot_id
    assert query.message.reply_markup.inline_keyboard[0][1].callback_data == "deny:1"
    [answer] = tg.callback_answers
    assert (answer.callback_query_id, answer.text) == (query.id, "Allowed")
    assert "query is too old" in str(twice).lower()


def test_edits_update_the_sent_message_and_refuse_no_change(tg: FakeTelegram) -> None:
    async def go(bot: telegram.Bot) -> tuple[Any, ...]:
        sent = await bot.send_message(2, "draft", reply_markup=KEYBOARD)
        edited = await bot.edit_message_text("<b>final</b>", 2, sent.message_id,
                                             parse_mode="HTML", reply_markup=KEYBOARD)
        cleared = await bot.edit_message_reply_markup(2, sent.message_id)
        try:
            await bot.edit_message_text("<b>final</b>", 2, sent.message_id, parse_mode="HTML")
        except BadRequest as exc:
            return edited, cleared, exc
        raise AssertionError("an edit without a change was accepted")

    edited, cleared, same = with_bot(tg, go)
    assert edited.text == "final" and edited.edit_date is not None
    assert edited.reply_markup == KEYBOARD and cleared.reply_markup is None
    assert "message is not modified" in str(same).lower()
    [now] = tg.sent(2)
    assert (now.text, now.plain, now.reply_markup, now.edits) == ("<b>final</b>", "final", None, 2)
    assert [e.method for e in tg.edits(2)] == ["editMessageText", "editMessageReplyMarkup"]
    with pytest.raises(BadRequest, match="(?i)message to edit not found"):
        with_bot(tg, lambda bot: bot.edit_message_text("x", 2, 99))


def test_deleting_a_message_marks_it(tg: FakeTelegram) -> None:
    async def go(bot: telegram.Bot) -> bool:
        sent = await bot.send_message(2, "gone soon")
        return await bot.delete_message(2, sent.message_id)

    assert with_bot(tg, go) is True and tg.sent(2)[0].deleted
    with pytest.raises(BadRequest, match="not found"):
        with_bot(tg, lambda bot: bot.delete_message(2, 1))


def test_bot_commands_are_stored_and_checked(tg: FakeTelegram) -> None:
    async def go(bot: telegram.Bot) -> Any:
        await bot.set_my_commands([("new", "Start a new chat"), ("stop", "Stop the turn")])
        return await bot.get_my_commands()

    assert [c.command for c in with_bot(tg, go)] == ["new", "stop"]
    with pytest.raises(BadRequest, match="(?i)BOT_COMMAND_INVALID"):
        with_bot(tg, lambda bot: bot.set_my_commands([("New-Chat", "bad name")]))


# ---------------------------------------------------------------------------- faults


def test_fail_429_raises_retry_after_then_passes(tg: FakeTelegram) -> None:
    tg.fail("sendMessage", 429, retry_after=3)

    async def go(bot: telegram.Bot) -> tuple[Any, ...]:
        try:
            await bot.send_message(1, "x")
        except RetryAfter as exc:
            return exc, await bot.send_message(1, "x")
        raise AssertionError("the scripted 429 did not come")

    refused, passed = with_bot(tg, go)
    assert "retry in 3 seconds" in str(refused).lower()
    assert passed.message_id == 1 and [c.status for c in tg.calls("sendMessage")] == [429, 200]


def test_a_failed_get_updates_confirms_nothing(tg: FakeTelegram) -> None:
    update_id = tg.push_message(1, 1, "x")
    tg.fail("getUpdates", 502, times=2)

    async def go(bot: telegram.Bot) -> int:
        failures = 0
        for _ in range(2):
            try:
                await bot.get_updates(offset=update_id + 1)
            except NetworkError:
                failures += 1
        return failures

    assert with_bot(tg, go) == 2
    assert len(tg.pending_updates()) == 1 and tg.confirmed_below == 0


def test_set_down_drops_requests_until_back(tg: FakeTelegram) -> None:
    async def go(bot: telegram.Bot) -> tuple[Any, ...]:
        poll = asyncio.create_task(bot.get_updates(timeout=5))
        await asyncio.to_thread(tg.wait_calls, "getUpdates", 1)
        tg.set_down(True)  # the waiting poll is dropped too
        polled = await asyncio.gather(poll, return_exceptions=True)
        try:
            await bot.send_message(1, "into the void")
        except NetworkError as exc:
            tg.set_down(False)
            return polled[0], exc, await bot.send_message(1, "back")
        raise AssertionError("a request to a down server was answered")

    polled, dropped, back = with_bot(tg, go)
    assert isinstance(polled, NetworkError) and not isinstance(polled, BadRequest)
    assert isinstance(dropped, NetworkError) and not isinstance(dropped, BadRequest)
    assert back.text == "back" and [s.text for s in tg.sent()] == ["back"]
    assert tg.calls("sendMessage")[0].status is None


def test_stop_and_start_again_serves_the_same_port_and_state() -> None:
    fake = FakeTelegram().start()
    try:
        port = fake.port
        update_id = fake.push_message(1, 1, "kept")
        fake.stop()
        with pytest.raises(NetworkError):
            with_bot(fake, lambda bot: bot.get_me())
        fake.start()
        updates = with_bot(fake, lambda bot: bot.get_updates())
        assert fake.port == port and [u.update_id for u in updates] == [update_id]
    finally:
        fake.stop()


def test_a_held_send_is_answered_only_when_released(tg: FakeTelegram) -> None:
    hold = tg.hold("sendMessage")

    async def go(bot: telegram.Bot) -> tuple[Any, ...]:
        send = asyncio.create_task(bot.send_message(1, "held"))
        assert await asyncio.to_thread(hold.wait_arrived, 1, 5.0)
        during = list(tg.sent())
        hold.release()
        return during, await send

    during, sent = with_bot(tg, go)
    assert during == [] and sent.text == "held" and len(tg.calls("sendMessage")) == 1


def test_a_delay_slows_every_call_of_its_method(tg: FakeTelegram) -> None:
    tg.delay("sendChatAction", 0.3)

    async def go(bot: telegram.Bot) -> float:
        began = time.monotonic()
        await bot.send_chat_action(1, "typing")
        return time.monotonic() - began

    assert with_bot(tg, go) >= 0.3
    tg.delay("sendChatAction", 0)
    assert with_bot(tg, go) < 0.3
