"""The dashboard's search page (`/search`): the sidebar's box and the chat list's row send
there, the snippet is drawn escaped with only the matched words in <mark>, each hit links to
the page of its chat that holds it, at the message (an old one through `before=`), the filters
stay as chosen, and what cannot be searched is said on the page. In-process, through
Starlette's TestClient."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from hearth.store import sessions, transcript
from hearth.store.db import Database
from hearth.web.pages import search as search_page
from hearth.web.pages.chat import WINDOW
from tests.support.dashboard import INLINE_SCRIPT, main_of, sign_in

WORD = "snorkelwhip"
HOSTILE = '<script>window.__pwned=1</script> <img src=x onerror="alert(2)"> <b>bold</b>'


@pytest.fixture
def client(client: TestClient) -> TestClient:
    """The folder's client, signed in."""
    sign_in(client)
    return client


def db_of(client: TestClient) -> Database:
    return client.app.state.engine.db  # type: ignore[attr-defined,no-any-return]


def chat_with(client: TestClient, key: str, *texts: str, mode: str = "persistent") -> None:
    with db_of(client).write() as conn:  # the test's thread runs no event loop
        sessions.insert(conn, key=key, tab_id=f"tab-{key}", memory_mode=mode, chat_number=None)
        for n, text in enumerate(texts):
            transcript.append(conn, key, "user" if n % 2 == 0 else "assistant", {"text": text})


def snippets(page: str) -> list[str]:
    return re.findall(r'<p class="snippet">(.*?)</p>', main_of(page), re.DOTALL)


def test_the_sidebar_and_the_chat_list_search_what_was_said(client: TestClient) -> None:
    listed = client.get("/chats").text
    assert '<form class="sidebar-search" method="get" action="/search"' in listed
    assert re.search(r'<form method="get" action="/search" role="search" class="search-row">',
                     main_of(listed))
    empty = client.get("/search")
    assert empty.status_code == 200 and 'name="q"' in main_of(empty.text)
    assert "search-results" not in empty.text


def test_a_snippet_is_escaped_and_only_the_matched_words_are_marked(client: TestClient) -> None:
    chat_with(client, "kept", f"{HOSTILE} {WORD} and more")
    page = client.get("/search", params={"q": WORD})
    assert page.status_code == 200
    [snippet] = snippets(page.text)
    assert f"<mark>{WORD}</mark>" in snippet
    assert re.findall(r"<(/?\w+)", snippet) == ["mark", "/mark"]  # no other element
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in snippet
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in snippet
    assert not INLINE_SCRIPT.search(main_of(page.text))


def test_a_restricted_chats_words_are_not_on_the_page(client: TestClient) -> None:
    chat_with(client, "secret", f"the {WORD} secret", mode="incognito")
    chat_with(client, "kept", f"the {WORD} kept")
    page = main_of(client.get("/search", params={"q": WORD}).text)
    assert "kept" in page and "secret" not in page


def test_a_hit_links_to_the_page_that_holds_it_at_the_message(client: TestClient) -> None:
    texts = [f"message {n}" for n in range(WINDOW + 60)]
    texts[4] = f"an old {WORD}"  # seq 5: before the newest page
    texts[-2] = f"a recent {WORD}"  # on the newest page
    chat_with(client, "long", *texts)
    last = len(texts)
    page = client.get("/search", params={"q": WORD}).text
    links = sorted(set(re.findall(r'href="(/chats/long[^"]*)"', main_of(page))))
    assert links == [f"/chats/long#seq-{last - 1}", "/chats/long?before=6#seq-5"]
    older = client.get("/chats/long", params={"before": 6}).text
    assert 'id="seq-5"' in older and WORD in older
    newest = client.get("/chats/long").text
    assert f'id="seq-{last - 1}"' in newest and 'id="seq-5"' not in newest


def test_the_filters_stay_as_chosen_and_narrow(client: TestClient) -> None:
    chat_with(client, "a", f"{WORD} one")
    page = client.get("/search", params={"q": WORD, "pinned": "1", "since": "2020-01-02"})
    main = main_of(page.text)
    assert 'name="pinned" value="1" checked' in main
    assert 'value="2020-01-02"' in main
    assert "No message matches" in main and snippets(page.text) == []


def test_what_cannot_be_searched_is_said_on_the_page(client: TestClient) -> None:
    page = client.get("/search", params={"q": WORD, "since": "2026-02-30"})
    assert page.status_code == 422
    main = main_of(page.text)
    assert 'role="alert"' in main and "YYYY-MM-DD" in main and 'name="q"' in main


def test_more_results_carry_the_query_the_filters_and_the_cursor(client: TestClient) -> None:
    chat_with(client, "many", *(f"{WORD} {n}" for n in range(23)))
    page = client.get("/search", params={"q": WORD, "folder": "", "tag": ""}).text
    [more] = re.findall(r'href="(/search\?[^"]*)"', main_of(page))
    assert f"q={WORD}" in more and "cursor=" in more and "folder=" not in more
    second = client.get(more.replace("&amp;", "&")).text
    assert len(snippets(page)) == 20 and len(snippets(second)) == 3


def test_parts_cut_the_text_at_the_marks() -> None:
    assert search_page.parts("a bc d", [(2, 4)]) == [("a ", False), ("bc", True), (" d", False)]
    assert search_page.parts("abc", [(0, 3)]) == [("abc", True)]
    assert search_page.parts("abcd", [(0, 2), (1, 3)]) == [("ab", True), ("cd", False)]
