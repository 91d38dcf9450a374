"""The dashboard's rough edges a new user hit first (issue 25), each found in Chromium: the
first message's approval shows while you watch, a message sent while a turn runs is drawn
after the answer it waited behind, the sidebar follows an approval answered, and more."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.browser import (
    DESKTOP,
    PHONE,
    no_sideways_scroll,
    open_chat,
    set_theme,
    shots,
)

Shot = Callable[[Page, str], Path]


def test_the_first_messages_approval_shows_while_you_watch(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Shot) -> None:
    page = signed_in(gateway)  # on the front page: a new chat
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "a.txt", "content": "x"})]),
                      Reply(text="Finished."))
    page.get_by_label("Message").fill("write a.txt")
    page.get_by_label("Message").press("Enter")
    expect(page.get_by_role("button", name="Allow once")).to_be_visible()
    expect(page.locator("#turn-status .what")).to_have_text("Waiting for your answer")
    expect(page.locator(".chat-nav .pill.waiting")).to_have_text("Waiting")
    expect(page.locator(".page-nav a[href='/approvals'] .count")).to_have_text("1")
    shots(page, gateway, shot, page.url.removeprefix(gateway.url), "first-message-approval")
    page.get_by_role("button", name="Allow once").click()
    expect(page.locator(".item.assistant .markdown")).to_have_text("Finished.")


def test_the_sidebar_follows_an_approval_asked_and_answered(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Shot) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "b.txt", "content": "x"})]),
                      Reply(text="Finished."))
    open_chat(page, gateway, key)
    link = page.locator(f".chat-nav a[href='/chats/{key}']")
    badge = page.locator(".page-nav a[href='/approvals'] .count")
    expect(badge).to_have_count(0)
    api.send(key, "write b.txt")
    expect(page.get_by_role("button", name="Allow once")).to_be_visible()
    expect(link.locator(".pill.waiting")).to_have_text("Waiting")  # asked: drawn without a reload
    expect(badge).to_have_text("1")
    shot(page, "sidebar-waiting")
    page.get_by_role("button", name="Allow once").click()
    expect(page.locator(".item.assistant .markdown")).to_have_text("Finished.")
    expect(link.locator(".pill.waiting")).to_have_count(0)  # answered: gone without a reload
    expect(badge).to_have_count(0)


def _said(page: Page) -> list[str]:
    """The transcript's messages as drawn, in order: (kind) text."""
    return [f"{kind}: {text.strip()}" for kind, text in page.evaluate(
        """() => [...document.querySelectorAll('#transcript > .item.user, '
                  + '#transcript > .item.assistant:not(#streaming)')]
               .map((item) => [item.classList.contains('user') ? 'user' : 'assistant',
                               item.querySelector('.text, .markdown')?.innerText ?? ''])""")]


def test_a_message_sent_while_a_turn_runs_is_drawn_after_the_answer_it_waited_behind(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Shot) -> None:
    page = signed_in(gateway)
    key = gateway.client().new_chat()
    slow = " ".join(f"w{i}" for i in range(40))
    model_server.push(Reply(text=slow + " first", chunks=20, delay=0.1),
                      Reply(text="second answer"))
    open_chat(page, gateway, key)
    box = page.get_by_label("Message")
    box.fill("question one")
    box.press("Enter")
    expect(page.locator("#streaming .text")).to_contain_text("w3")
    box.fill("question two")
    box.press("Enter")
    expect(page.locator(".item.assistant .markdown").last).to_have_text("second answer",
                                                                         timeout=20_000)
    want = ["user: question one", f"assistant: {slow} first", "user: question two",
            "assistant: second answer"]
    assert _said(page) == want
    expect(page.locator(".topbar .page-title")).to_have_text("A title")  # named as it answered
    shot(page, "queued-message-order")
    page.reload()
    expect(page.locator(".item.assistant .markdown").last).to_have_text("second answer")
    assert _said(page) == want  # the store's order is drawn the same way


def test_editing_the_first_message_leaves_no_earlier_messages_link(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page]
        ) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="Hi."))
    assert api.wait(api.send(key, "hello")["run_id"])["status"] == "complete"
    open_chat(page, gateway, key)
    mine = page.locator(".item.user").first
    mine.hover()
    mine.get_by_role("button", name="Edit").click()
    model_server.push(Reply(text="Hello again."))
    page.get_by_label("Your message, edited").fill("hello there")
    page.get_by_label("Your message, edited").press("Enter")
    expect(page.locator(".item.assistant .markdown")).to_have_text(["Hello again."])
    expect(page.get_by_role("link", name="Earlier messages")).to_have_count(0)
    page.reload()
    expect(page.locator(".item.assistant .markdown")).to_have_text(["Hello again."])
    expect(page.get_by_role("link", name="Earlier messages")).to_have_count(0)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_sign_in_page_shows_nothing_of_the_app_and_says_its_error_plainly(
        gateway: Gateway, page: Page, shot: Shot, scheme: str) -> None:
    page.emulate_media(color_scheme=scheme)
    page.goto(f"{gateway.url}/login")
    for hidden in ("New chat", "Approvals", "Settings", "Sign out", "Search chats"):
        expect(page.get_by_text(hidden, exact=True)).to_have_count(0)
    expect(page.locator(".sidebar, nav")).to_have_count(0)
    page.get_by_label("Token").fill("not-the-token")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("That is not this gateway's token. hearth token prints it.")
    assert "`" not in alert.inner_text()
    expect(alert.locator("code")).to_have_text("hearth token")
    shot(page, f"login-error-{scheme}")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, f"login-error-{scheme}-phone")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_chat_map_rail_draws_small_marks_that_never_overlap(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Shot, scheme: str) -> None:
    page = signed_in(gateway)
    page.emulate_media(color_scheme=scheme)
    api = gateway.client()
    key = api.new_chat()
    for n in range(12):
        if n % 3 == 0:  # a tool call or two: the tick's dots
            model_server.push(Reply(tool_calls=[Call("read_file", {"path": "x.txt"}),
                                                Call("list_files", {"path": "."})]))
        model_server.push(Reply(text=f"Answer {n}."))
        api.wait(api.send(key, f"question {n}")["run_id"])
    page.goto(f"{gateway.url}/chats/{key}")
    rail = page.get_by_role("navigation", name="Chat map")
    expect(rail.get_by_role("link")).to_have_count(12)
    boxes = page.evaluate("""() => {
        const at = (sel) => [...document.querySelectorAll(sel)]
            .map((e) => e.getBoundingClientRect().toJSON());
        return {dots: at('#chat-map .dot'), links: at('#chat-map a'), width: innerWidth};
    }""")
    assert len(boxes["dots"]) == 8  # 2 in each of 4 ticks
    assert all(d["width"] <= 6 and d["height"] <= 6 for d in boxes["dots"]), boxes["dots"]
    tops = [(a["top"], a["bottom"]) for a in boxes["links"]]
    pairs = zip(tops, tops[1:], strict=False)
    assert all(upper[1] <= lower[0] + 0.5 for upper, lower in pairs), tops
    assert all(a["right"] <= boxes["width"] for a in boxes["links"])
    page.screenshot(path=str(shot(page, f"chat-map-rail-{scheme}")))


def _in_view_below_the_top_bar(page: Page, selector: str) -> bool:
    return bool(page.evaluate("""(sel) => {
        const box = document.querySelector(sel).getBoundingClientRect();
        const bar = document.querySelector('.topbar').getBoundingClientRect();
        const nav = document.querySelector('.settings-nav').getBoundingClientRect();
        const cover = nav.width > innerWidth / 2 ? nav.bottom : bar.bottom;  // a phone's tabs
        return box.top >= cover - 1 && box.bottom <= innerHeight;
    }""", selector))


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_after_add_model_the_confirmation_is_in_view_below_the_top_bar(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        size: dict[str, int]) -> None:
    page = signed_in(gateway)
    page.set_viewport_size(size)
    page.goto(f"{gateway.url}/settings#add-model")
    page.get_by_label("Id", exact=True).fill("spare")
    page.get_by_label("Model name").fill("fake-model")
    page.get_by_label("Base URL").fill(model_server.openai_base_url)
    page.get_by_role("button", name="Add model").click()
    notice = page.locator(".notice.saved")
    expect(notice).to_contain_text("The model is added")
    assert _in_view_below_the_top_bar(page, ".notice.saved")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_settings_show_one_section_at_a_time_and_deep_links_open_theirs(
        gateway: Gateway, signed_in: Callable[..., Page], shot: Shot, scheme: str) -> None:
    page = signed_in(gateway)
    set_theme(page, gateway, scheme)
    nav = page.get_by_role("navigation", name="Settings sections")
    page.goto(f"{gateway.url}/settings")
    expect(nav.get_by_role("link")).to_have_text(
        ["Models", "Agents", "Channels", "Apps", "Spending", "Jobs", "Shell sandbox", "Account"])
    expect(page.locator("#models")).to_be_visible()
    expect(page.locator("#apps")).to_be_hidden()
    nav.get_by_role("link", name="Apps").click()
    expect(page.locator("#apps")).to_be_visible()
    expect(page.locator("#models")).to_be_hidden()
    expect(nav.get_by_role("link", name="Apps")).to_have_attribute("aria-current", "page")
    shot(page, f"settings-sections-{scheme}")
    page.goto(f"{gateway.url}/settings#agents")  # a deep link, loaded anew
    page.reload()
    expect(page.locator("#agents")).to_be_visible()
    expect(page.locator("#models")).to_be_hidden()
    page.goto(f"{gateway.url}/settings#chain")  # a place inside a section opens that section
    page.reload()
    expect(page.locator("#models")).to_be_visible()
    expect(page.locator("#chain")).to_be_in_viewport()
    page.set_viewport_size(PHONE)
    page.goto(f"{gateway.url}/settings#account")
    page.reload()
    expect(page.locator("#account")).to_be_visible()
    box = nav.bounding_box()
    assert box is not None and box["width"] <= PHONE["width"]  # tabs, not a column
    tabs = nav.get_by_role("link")
    assert tabs.nth(0).bounding_box()["y"] == tabs.nth(1).bounding_box()["y"]  # in a row
    no_sideways_scroll(page)
    shot(page, f"settings-sections-phone-{scheme}")


def test_a_refused_settings_form_opens_its_own_section(
        gateway: Gateway, signed_in: Callable[..., Page]) -> None:
    page = signed_in(gateway)
    page.goto(f"{gateway.url}/settings#agent-form")
    page.get_by_label("Name", exact=True).fill("bad name!")
    page.get_by_role("button", name="Save the agent").click()
    expect(page.get_by_role("alert")).to_be_visible()
    expect(page.locator("#agents")).to_be_visible()
    expect(page.locator("#models")).to_be_hidden()


CODE_ANSWER = ("Here it is:\n\n```python\ndef greet(name):\n    # say hello\n"
               "    return f\"Hello, {name}!\"\n```\n\nAnd the shell:\n\n```\nls -la\n```")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_code_blocks_are_coloured_and_named_live_and_after_a_reload_alike(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Shot, scheme: str) -> None:
    page = signed_in(gateway)
    set_theme(page, gateway, scheme)
    key = gateway.client().new_chat()
    open_chat(page, gateway, key)
    model_server.push(Reply(text=CODE_ANSWER, chunks=8, delay=0.05))
    page.get_by_label("Message").fill("show me code")
    page.get_by_label("Message").press("Enter")
    blocks = page.locator(".item.assistant .code-block")
    expect(blocks).to_have_count(2)
    expect(blocks.first.locator(".code-lang")).to_have_text("python")
    expect(blocks.nth(1).locator(".code-lang")).to_have_count(0)
    for block in (blocks.first, blocks.nth(1)):
        copy = block.locator(".code-head").get_by_role("button", name="Copy the code")
        expect(copy).to_be_visible()
    keyword = blocks.first.locator(".k").first
    plain = blocks.first.locator(".n").first
    assert keyword.evaluate("e => getComputedStyle(e).color") != \
        plain.evaluate("e => getComputedStyle(e).color")
    live = blocks.first.locator("pre").inner_html()
    shot(page, f"code-blocks-{scheme}")
    page.reload()
    expect(blocks).to_have_count(2)
    assert blocks.first.locator("pre").inner_html() == live  # one renderer
    page.set_viewport_size(PHONE)
    page.reload()  # drawn at the phone's width from the start: no drawer sliding away
    expect(blocks).to_have_count(2)
    no_sideways_scroll(page)
    shot(page, f"code-blocks-phone-{scheme}")


def test_the_keyboard_closes_and_moves_through_menus_and_slash_searches(
        gateway: Gateway, signed_in: Callable[..., Page], shot: Shot) -> None:
    page = signed_in(gateway)
    key = gateway.client().new_chat()
    page.goto(f"{gateway.url}/chats/{key}")
    options = page.locator(".chat-menu > summary")
    box = options.bounding_box()
    assert box is not None and box["width"] >= 36 and box["height"] >= 36  # a target to hit
    text_colour = page.evaluate("getComputedStyle(document.body).color")
    assert options.evaluate("e => getComputedStyle(e).color") == text_colour  # not pale
    options.focus()
    page.keyboard.press("Enter")
    menu = page.locator("details.chat-menu")
    expect(menu).to_have_attribute("open", "")
    shot(page, "chat-menu-open")
    page.keyboard.press("Tab")  # into the menu
    first = page.evaluate("document.activeElement.outerHTML")
    page.keyboard.press("Escape")
    expect(menu).not_to_have_attribute("open", "")
    expect(options).to_be_focused()  # back where it was opened
    page.keyboard.press("Enter")
    expect(menu).to_have_attribute("open", "")
    page.locator(".chat-menu .menu-panel button").first.focus()
    before = page.evaluate("document.activeElement.outerHTML")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.outerHTML") != before  # moved
    page.keyboard.press("ArrowUp")
    assert page.evaluate("document.activeElement.outerHTML") == before
    page.mouse.click(5, 400)  # outside: closes
    expect(menu).not_to_have_attribute("open", "")
    assert first
    page.locator("main").click()
    page.keyboard.press("/")
    expect(page.locator("#chat-search")).to_be_focused()
    page.keyboard.type("/x")  # in a text box "/" is a character
    expect(page.locator("#chat-search")).to_have_value("/x")


def test_opening_details_leaves_the_answers_row_where_it_was(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Shot) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="An answer."))
    api.wait(api.send(key, "hi")["run_id"])
    page.goto(f"{gateway.url}/chats/{key}")
    tools = page.locator(".item.assistant .answer-tools")
    copy = tools.get_by_role("button", name="Copy the answer")
    expect(copy).to_be_visible()
    before = copy.bounding_box()
    tools.locator(".turn-details > summary").click()
    expect(tools.locator(".turn-details dl .model")).to_be_visible()
    assert copy.bounding_box() == before
    shot(page, "details-open")
    page.keyboard.press("Escape")
    expect(tools.locator(".turn-details dl")).to_be_hidden()


def test_a_denied_call_says_why_once(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Shot) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "d.txt", "content": "x"})]),
                      Reply(text="Understood, I left it."))
    open_chat(page, gateway, key)
    api.send(key, "write d.txt")
    page.get_by_role("button", name="Deny").click()
    expect(page.locator(".item.assistant .markdown")).to_have_text("Understood, I left it.")
    expect(page.locator(".card .receipt")).to_contain_text("denied")
    said = "The owner denied this call"
    assert page.locator("#transcript").inner_text().count(said) == 1
    shot(page, "denied-live")
    page.reload()
    expect(page.locator(".card .receipt")).to_contain_text("denied")
    assert page.locator("#transcript").inner_text().count(said) == 1


def test_the_waiting_line_counts_from_when_it_was_asked_across_a_reload(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page]
        ) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat(trust="ask")
    model_server.push(Reply(tool_calls=[Call("write_file", {"path": "w.txt", "content": "x"})]),
                      Reply(text="Done."))
    api.send(key, "write w.txt")
    page.goto(f"{gateway.url}/chats/{key}")
    expect(page.get_by_role("button", name="Allow once")).to_be_visible()
    page.wait_for_timeout(3000)
    page.reload()
    expect(page.locator("#turn-status .what")).to_have_text("Waiting for your answer")
    elapsed = page.locator("#turn-status .elapsed")
    expect(elapsed).to_have_text(re.compile(r"^\d+ s$"))
    assert int(elapsed.inner_text().split()[0]) >= 3  # not 0 again after the reload


def test_the_chat_list_counts_what_was_said_not_tool_calls_or_notices(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page]
        ) -> None:
    page = signed_in(gateway)
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(tool_calls=[Call("list_files", {"path": "."})]),
                      Reply(text="Nothing there yet."))
    api.wait(api.send(key, "what is in my folder?")["run_id"])
    model_server.push(*[Reply(status=400) for _ in range(3)])  # refused: not retried
    api.wait(api.send(key, "and now?")["run_id"])  # a failed turn: a notice, no answer
    page.goto(f"{gateway.url}/chats")
    row = page.locator(".chat-row", has=page.locator(f"a[href='/chats/{key}']"))
    expect(row.locator(".said")).to_have_text("3 messages")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_usage_tables_headers_keep_their_words_whole_on_a_phone(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Shot, scheme: str) -> None:
    page = signed_in(gateway)
    set_theme(page, gateway, scheme)
    api = gateway.client()
    model_server.push(Reply(text="Noted.", usage=(123_456, 7_890)))
    api.wait(api.send(api.new_chat(), "hi")["run_id"])
    page.set_viewport_size(PHONE)
    page.goto(f"{gateway.url}/usage")
    headers = page.locator(".usage-table thead th")
    expect(headers.first).to_be_visible()
    lines = page.evaluate("""() => [...document.querySelectorAll('.usage-table th')]
        .map((th) => { const r = document.createRange(); r.selectNodeContents(th);
                       return [th.innerText, r.getClientRects().length]; })""")
    assert all(count == 1 for _, count in lines), lines  # each header on one line
    no_sideways_scroll(page)
    shot(page, f"usage-phone-{scheme}")
