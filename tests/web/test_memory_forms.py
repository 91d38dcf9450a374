"""The Memory page's forms: add an item (kind and words) and edit one in place, through the
engine's memory functions the API uses, so the same rules hold (words kept once, the same
limits, no item's words turned into another's); a refused form comes back as the page with
its sentence and what was typed, at the refusal's status, never JSON; and each item names the
chat it is filed under with a link. In-process, through Starlette's TestClient."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.support.dashboard import bearer, sign_in

HTML = {"Accept": "text/html"}


@pytest.fixture
def client(client: TestClient) -> TestClient:
    """The folder's client, asking for pages as a browser's form post does."""
    client.headers.update(HTML)
    return client


def _items(client: TestClient) -> list[dict[str, object]]:
    answer = client.get("/api/memory", headers=bearer(client))
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def _texts(page: str) -> list[str]:
    return re.findall(r'<p class="memory-text">(.*?)</p>', page, re.S)


def _refused(answer: httpx.Response, status: int, sentence: str) -> str:
    """The Memory page drawn again with the refusal's sentence (once), at its status."""
    assert answer.status_code == status, answer.text[:500]
    text = answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert '<h1 class="page-title">Memory</h1>' in text
    alerts = re.findall(r'<p class="error" role="alert">(.*?)</p>', text, re.S)
    assert len(alerts) == 1 and sentence in alerts[0], alerts
    return text


def test_an_item_is_added_from_the_page_once(client: TestClient) -> None:
    csrf = sign_in(client)
    added = client.post("/memory/add", data={"csrf": csrf, "kind": "preference",
                                             "text": "  I take my tea black.  "})
    assert added.status_code == 303
    [item] = _items(client)
    assert added.headers["location"] == f"/memory?done=added#memory-{item['id']}"
    assert (item["kind"], item["text"], item["written_by"], item["filed_under"]) == (
        "preference", "I take my tea black.", "owner", None)
    page = client.get(added.headers["location"]).text
    assert "Added to memory." in page and _texts(page) == ["I take my tea black."]
    again = client.post("/memory/add", data={"csrf": csrf, "kind": "fact",
                                             "text": "I take my tea black."})
    assert again.headers["location"] == f"/memory?done=known#memory-{item['id']}"
    assert len(_items(client)) == 1
    assert "already in memory" in client.get(again.headers["location"]).text


@pytest.mark.parametrize(("form", "sentence"), [
    ({"kind": "fact", "text": "   "}, "Write what your agent should remember."),
    ({"kind": "fact"}, "Write what your agent should remember."),
    ({"kind": "gossip", "text": "The neighbours argue."}, "Pick what kind of item"),
    ({"text": "No kind given."}, "Pick what kind of item"),
    ({"kind": "fact", "text": "x" * 2001}, "at most 2,000 characters"),
])
def test_a_bad_item_comes_back_as_the_page_with_what_was_typed(
        client: TestClient, form: dict[str, str], sentence: str) -> None:
    csrf = sign_in(client)
    page = _refused(client.post("/memory/add", data={"csrf": csrf, **form}), 422, sentence)
    typed = form.get("text", "")
    assert f">{typed}</textarea>" in page  # kept in the add form
    assert _items(client) == []


def test_an_item_is_edited_in_place(client: TestClient) -> None:
    csrf = sign_in(client)
    client.post("/memory/add", data={"csrf": csrf, "kind": "preference",
                                     "text": "I take my tea black."})
    [item] = _items(client)
    page = client.get("/memory").text
    assert f'action="/memory/{item["id"]}/edit"' in page
    assert '<details class="memory-edit">' in page  # closed until Edit is pressed
    edited = client.post(f"/memory/{item['id']}/edit",
                         data={"csrf": csrf, "kind": "fact", "text": "I take my tea with milk."})
    assert edited.status_code == 303
    assert edited.headers["location"] == f"/memory?done=saved#memory-{item['id']}"
    [now] = _items(client)
    assert (now["id"], now["kind"], now["text"]) == (item["id"], "fact",
                                                     "I take my tea with milk.")
    in_search = client.post(f"/memory/{item['id']}/edit",
                            data={"csrf": csrf, "kind": "lesson", "q": "tea",
                                  "text": "I take my tea with milk."})
    assert in_search.headers["location"] == f"/memory?q=tea&done=saved#memory-{item['id']}"
    assert _items(client)[0]["kind"] == "lesson"


def test_an_edit_into_another_items_words_is_refused_in_its_own_form(
        client: TestClient) -> None:
    csrf = sign_in(client)
    for words in ("The cat is called Mochi.", "I take my tea black."):
        client.post("/memory/add", data={"csrf": csrf, "kind": "fact", "text": words})
    tea, cat = _items(client)
    answer = client.post(f"/memory/{tea['id']}/edit",
                         data={"csrf": csrf, "kind": "fact", "text": "The cat is called Mochi."})
    page = _refused(answer, 409, f"Memory already keeps these words as item {cat['id']}")
    form = page.split(f'action="/memory/{tea["id"]}/edit"', 1)[1].split("</form>", 1)[0]
    assert 'role="alert"' in form and ">The cat is called Mochi.</textarea>" in form
    assert f'<li class="memory-item" id="memory-{tea["id"]}">' in page
    assert re.search(rf'id="memory-{tea["id"]}">\s*<p class="memory-text">I take my tea black',
                     page)
    assert 'class="memory-edit" open' in page  # the refused edit stays open
    assert [i["text"] for i in _items(client)] == ["I take my tea black.",
                                                   "The cat is called Mochi."]


@pytest.mark.parametrize(("form", "status", "sentence"), [
    ({"kind": "fact", "text": " "}, 422, "1 to 2,000 characters"),
    ({"kind": "gossip", "text": "x"}, 422, "kind must be one of"),
])
def test_a_bad_edit_is_the_page_with_the_engines_sentence(
        client: TestClient, form: dict[str, str], status: int, sentence: str) -> None:
    csrf = sign_in(client)
    client.post("/memory/add", data={"csrf": csrf, "kind": "fact", "text": "Kept."})
    [item] = _items(client)
    _refused(client.post(f"/memory/{item['id']}/edit", data={"csrf": csrf, **form}),
             status, sentence)
    assert _items(client)[0]["text"] == "Kept."


@pytest.mark.parametrize("item_id", ["999", "0", "abc", "-1", str(2**62 + 1), "9" * 40])
def test_editing_no_item_is_a_page_saying_so(client: TestClient, item_id: str) -> None:
    csrf = sign_in(client)
    answer = client.post(f"/memory/{item_id}/edit",
                         data={"csrf": csrf, "kind": "fact", "text": "New words."})
    _refused(answer, 404, f"There is no memory item {item_id}.")


def test_the_forms_need_sign_in_and_the_csrf_token(client: TestClient) -> None:
    assert client.post("/memory/add", data={"kind": "fact", "text": "x"}).status_code == 401
    csrf = sign_in(client)
    client.post("/memory/add", data={"csrf": csrf, "kind": "fact", "text": "Kept."})
    [item] = _items(client)
    for form in ({}, {"csrf": "forged"}):
        assert client.post("/memory/add", data={**form, "kind": "fact",
                                                "text": "Sneaked in."}).status_code == 403
        assert client.post(f"/memory/{item['id']}/edit",
                           data={**form, "kind": "fact", "text": "Changed."}).status_code == 403
    assert [i["text"] for i in _items(client)] == ["Kept."]


def test_an_item_links_the_chat_it_is_filed_under(client: TestClient) -> None:
    sign_in(client)
    made = client.post("/api/sessions", json={}, headers=bearer(client))
    key = made.json()["key"]
    client.patch(f"/api/sessions/{key}", json={"title": "Weekend plans"}, headers=bearer(client))
    taught = client.post("/api/memory", json={"text": "Sam is vegetarian.", "kind": "fact"},
                         headers={**bearer(client), "X-Hearth-Session": key})
    assert taught.status_code == 201, taught.text
    page = client.get("/memory").text
    assert f'filed under <a href="/chats/{key}">Weekend plans</a>' in page
