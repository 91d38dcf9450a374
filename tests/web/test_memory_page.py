"""The Memory page: taught items newest first (paged with `before=`), a search that narrows
them, a Delete button that forgets an item (CSRF required), and every piece of memory text
rendered inert. In-process, through Starlette's TestClient."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from hearth.store import memory as memory_store
from hearth.web.pages import memory as memory_page
from tests.support.dashboard import sign_in

HOSTILE = ('<script>alert(1)</script> <img src=x onerror="alert(2)"> '
           '<a href="javascript:alert(3)">click</a> javascript:alert(4)')


def _teach(client: TestClient, csrf: str, words: str, kind: str = "fact") -> int:
    made = client.post("/api/memory", json={"text": words, "kind": kind},
                       headers={"X-CSRF-Token": csrf})
    assert made.status_code == 201, made.text
    return int(made.json()["id"])


def _texts(page: str) -> list[str]:
    return re.findall(r'<p class="memory-text">(.*?)</p>', page, re.S)


def _stored(client: TestClient, item_id: int) -> memory_store.MemoryItem | None:
    with client.app.state.engine.db.read() as conn:  # type: ignore[attr-defined]
        return memory_store.get(conn, item_id)


def test_the_list_shows_items_newest_first_with_what_each_is(client: TestClient) -> None:
    csrf = sign_in(client)
    _teach(client, csrf, "I take my tea black.", "preference")
    _teach(client, csrf, "The cat is called Mochi.")
    page = client.get("/memory")
    assert page.status_code == 200 and 'href="/memory" aria-current="page"' in page.text
    assert _texts(page.text) == ["The cat is called Mochi.", "I take my tea black."]
    assert '<span class="memory-kind">preference</span>' in page.text
    assert "written by owner" in page.text and "filed under no one chat" in page.text
    assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d UTC',
                     page.text)


def test_the_list_pages_with_a_more_link(client: TestClient,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_page, "PAGE", 2)
    csrf = sign_in(client)
    ids = [_teach(client, csrf, f"Item number {n} is kept.") for n in range(5)]
    first = client.get("/memory").text
    assert _texts(first) == ["Item number 4 is kept.", "Item number 3 is kept."]
    more = re.search(r'<a href="(/memory\?before=\d+)" rel="next">More</a>', first)
    assert more is not None and more.group(1) == f"/memory?before={ids[3]}"
    second = client.get(more.group(1)).text
    assert _texts(second) == ["Item number 2 is kept.", "Item number 1 is kept."]
    third = client.get(f"/memory?before={ids[1]}").text
    assert _texts(third) == ["Item number 0 is kept."] and 'rel="next"' not in third


def test_search_narrows_the_list_and_leaves_no_recall_marks(client: TestClient) -> None:
    csrf = sign_in(client)
    tea = _teach(client, csrf, "I take my tea black.", "preference")
    _teach(client, csrf, "The cat is called Mochi.")
    page = client.get("/memory", params={"q": "tea"}).text
    assert _texts(page) == ["I take my tea black."]
    assert 'value="tea"' in page and "Mochi" not in page
    nothing = client.get("/memory", params={"q": "giraffes"}).text
    assert _texts(nothing) == [] and "Nothing in memory matches" in nothing
    stored = _stored(client, tea)
    assert stored is not None and stored.recall_count == 0


def test_delete_forgets_the_item_and_goes_back(client: TestClient) -> None:
    csrf = sign_in(client)
    kept = _teach(client, csrf, "The cat is called Mochi.")
    gone = _teach(client, csrf, "I take my tea black.", "preference")
    page = client.get("/memory").text
    assert f'action="/memory/{gone}/delete"' in page
    answer = client.post(f"/memory/{gone}/delete", data={"csrf": csrf})
    assert answer.status_code == 303 and answer.headers["location"] == "/memory"
    assert _texts(client.get("/memory").text) == ["The cat is called Mochi."]
    assert _stored(client, gone) is None and _stored(client, kept) is not None
    again = client.post(f"/memory/{gone}/delete", data={"csrf": csrf})
    assert again.status_code == 404 and again.json()["error"]["code"] == "memory_not_found"
    in_search = client.post(f"/memory/{kept}/delete", data={"csrf": csrf, "q": "cat"})
    assert in_search.headers["location"] == "/memory?q=cat"


def test_delete_needs_the_csrf_token(client: TestClient) -> None:
    csrf = sign_in(client)
    kept = _teach(client, csrf, "The cat is called Mochi.")
    for form in ({}, {"csrf": "forged"}):
        refused = client.post(f"/memory/{kept}/delete", data=form)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    other_site = client.post(f"/memory/{kept}/delete", data={"csrf": csrf},
                             headers={"Origin": "https://evil.example"})
    assert other_site.status_code == 403
    assert _stored(client, kept) is not None


def test_hostile_memory_text_is_rendered_inert(client: TestClient) -> None:
    csrf = sign_in(client)
    _teach(client, csrf, HOSTILE)
    for page in (client.get("/memory").text, client.get("/memory?q=alert").text):
        assert "<script>alert" not in page and "<img" not in page
        assert 'href="javascript:' not in page.lower() and 'onerror="' not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert "&lt;a href=&#34;javascript:alert(3)&#34;&gt;" in page


@pytest.mark.parametrize("query", ["before=0", "before=abc", "before=-3", f"q={'x' * 501}",
                                   "q=tea&before=5"])
def test_bad_parameters_are_the_error_envelope(client: TestClient, query: str) -> None:
    sign_in(client)
    answer = client.get(f"/memory?{query}")
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_request"


def test_the_page_and_its_delete_needsign_in(client: TestClient) -> None:
    assert client.get("/memory").headers["location"] == "/login"
    assert client.post("/memory/1/delete", data={"csrf": "x"}).status_code == 401
