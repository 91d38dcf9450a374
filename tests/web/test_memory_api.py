"""The memory API (`GET/POST/DELETE /api/memory`) against a real gateway subprocess.

Covers teaching, listing, paging, searching (which leaves no recall marks: checked in the
gateway's database file itself), forgetting, validation, and requests made as a chat's work
(`X-Hearth-Session`): Incognito and Temporary chats keep nothing, a Temporary chat reads
nothing, a persistent chat's teaching is filed under it. Also: the chat list's search never
shows an Incognito or Temporary chat. One gateway serves the module; every test uses words
of its own, so the tests do not depend on each other's order.
"""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any, get_args

import httpx
import pytest

from hearth.store.memory import KINDS
from hearth.web.http.params import Kind
from tests.gateway import Api, Gateway, module_gateway
from tests.support.http import error_of

JSON = {"content-type": "application/json"}
HEADER = "X-Hearth-Session"


server, gateway, api = module_gateway("memory-api")


def word() -> str:
    """A word no other test uses (letters only, so it is one search term)."""
    return "w" + uuid.uuid4().hex[:10].translate(str.maketrans("0123456789", "ghijklmnop"))


def rows(gateway: Gateway) -> list[dict[str, Any]]:
    """Every taught item, straight from the gateway's database file."""
    with sqlite3.connect(f"file:{gateway.home / 'hearth.db'}?mode=ro", uri=True) as conn:
        conn.row_factory = sqlite3.Row
        found = conn.execute("SELECT * FROM memory_items WHERE kind != 'document' ORDER BY id")
        return [dict(r) for r in found]


def row(gateway: Gateway, item_id: int) -> dict[str, Any] | None:
    return next((r for r in rows(gateway) if r["id"] == item_id), None)


def set_recorded_mode(gateway: Gateway, key: str, recorded: str) -> None:
    """Write a chat's mode by hand, as an old or damaged record might hold it."""
    with sqlite3.connect(gateway.home / "hearth.db") as conn:
        conn.execute("UPDATE sessions SET memory_mode = ? WHERE key = ?", (recorded, key))


def teach(api: Api, text: str, kind: str = "fact", **headers: str) -> httpx.Response:
    return api.http.post("/api/memory", json={"text": text, "kind": kind}, headers=headers)


def listed(api: Api, **params: Any) -> list[dict[str, Any]]:
    answer = api.http.get("/api/memory", params=params)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def history_text(gateway: Gateway) -> str:
    folder = gateway.home / "workspace" / "memory"
    return "".join(p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.md")))


# ---------------------------------------------------------------- teach, list, forget


def test_teach_list_and_forget(api: Api, gateway: Gateway) -> None:
    text = f"The owner's bicycle is called {word()}."
    made = teach(api, text, "fact")
    assert made.status_code == 201, made.text
    item = made.json()
    assert item["text"] == text and item["kind"] == "fact"
    assert item["written_by"] == "owner" and item["filed_under"] is None
    assert item["recall_count"] == 0 and item["last_recalled_at"] is None
    assert isinstance(item["id"], int) and item["created_at"].endswith("+00:00")

    again = teach(api, "  " + text.upper().replace(" ", "   ") + " ", "lesson")
    assert again.status_code == 200 and again.json()["id"] == item["id"]
    assert again.json()["kind"] == "fact"  # the kept item, as it was kept
    assert [r["id"] for r in rows(gateway) if r["text"] == text] == [item["id"]]
    assert text in history_text(gateway)

    assert listed(api)[0] == item  # newest first
    assert api.http.delete(f"/api/memory/{item['id']}").json() == {"forgotten": item["id"]}
    assert row(gateway, item["id"]) is None
    assert item["id"] not in [i["id"] for i in listed(api, limit=200)]
    error_of(api.http.delete(f"/api/memory/{item['id']}"), 404, "memory_not_found")


def test_pages_walk_newest_first_with_before_and_kind(api: Api) -> None:
    tag = word()
    made = [teach(api, f"{tag} commitment {n}", "commitment").json()["id"] for n in range(5)]
    teach(api, f"{tag} a preference among them", "preference")
    walked: list[dict[str, Any]] = []
    before = None
    while True:
        params: dict[str, Any] = {"limit": 2, "kind": "commitment"}
        if before is not None:
            params["before"] = before
        page = api.http.get("/api/memory", params=params).json()
        assert len(page["items"]) <= 2
        walked += page["items"]
        before = page["next_before"]
        if before is None:
            break
        assert before == page["items"][-1]["id"]
    ids = [i["id"] for i in walked]
    assert ids == sorted(ids, reverse=True) and len(ids) == len(set(ids))
    assert {i["kind"] for i in walked} == {"commitment"}
    assert ids[:5] == made[::-1]
    assert listed(api, limit=1, before=made[2]) == [
        i for i in walked if i["id"] == made[1]]


# ---------------------------------------------------------------- search


def test_search_finds_by_keyword_and_leaves_no_recall_mark(
    api: Api, gateway: Gateway
) -> None:
    cat = word()
    wanted = teach(api, f"The owner's cat is called {cat}.", "fact").json()
    teach(api, f"The owner prefers {cat} to be fed at seven.", "preference")
    teach(api, f"Nothing to do with felines {word()}.", "fact")
    found = listed(api, q=f"what is {cat.upper()}?")
    assert {i["text"] for i in found} == {f"The owner's cat is called {cat}.",
                                          f"The owner prefers {cat} to be fed at seven."}
    assert [i["text"] for i in listed(api, q=cat, kind="preference")] == [
        f"The owner prefers {cat} to be fed at seven."]
    assert len(listed(api, q=cat, limit=1)) == 1
    answer = api.http.get("/api/memory", params={"q": cat}).json()
    assert answer["next_before"] is None
    assert listed(api, q="the and for") == []  # no word worth searching
    assert listed(api, q="   ")[:1] == listed(api, limit=1)  # a blank q is the plain list
    kept = api.new_chat()
    assert listed_as(api, kept, q=cat)  # a chat's own search marks nothing either
    stored = row(gateway, wanted["id"])
    assert stored is not None
    assert stored["recall_count"] == 0 and stored["last_recalled_at"] is None


def test_recall_by_a_turn_does_mark_so_the_check_above_could_fail(
    api: Api, gateway: Gateway
) -> None:
    """The positive control: a turn's recall is what bumps the counts."""
    topic = word()
    item = teach(api, f"The owner's boat is moored at {topic}.", "fact").json()
    key = api.new_chat()
    api.wait(api.send(key, f"Where is my boat, near {topic}?")["run_id"])
    stored = row(gateway, item["id"])
    assert stored is not None and stored["recall_count"] >= 1


def test_search_with_before_is_refused(api: Api) -> None:
    error_of(api.http.get("/api/memory", params={"q": "boat", "before": 5}), 422)


# ---------------------------------------------------------------- validation


BAD_BODIES: list[Any] = [
    {}, {"text": "x"}, {"kind": "fact"}, {"text": "x", "kind": "opinion"},
    {"text": "x", "kind": "document"}, {"text": "", "kind": "fact"},
    {"text": "   \n\t", "kind": "fact"}, {"text": "a" * 2001, "kind": "fact"},
    {"text": 5, "kind": "fact"}, {"text": ["x"], "kind": "fact"}, {"text": None, "kind": "fact"},
    {"text": "x", "kind": "fact", "written_by": "someone"},
    {"text": "x", "kind": "fact", "filed_under": "chat-1-1"},
    {"text": "x", "kind": 1}, ["x"], "x", None, 7,
]


def test_bad_bodies_are_refused_and_nothing_is_kept(api: Api, gateway: Gateway) -> None:
    before = rows(gateway)
    for body in BAD_BODIES:
        error_of(api.http.post("/api/memory", json=body), 422, "invalid_request")
    error_of(api.http.post("/api/memory", content=b'{"text": ', headers=JSON), 400,
             "invalid_json")
    error_of(api.http.post("/api/memory", content=b"\xff\xfe{", headers=JSON), 400)
    error_of(api.http.post("/api/memory", content=b'{"text": "a\\ud800b", "kind": "fact"}',
                           headers=JSON), 422)
    assert rows(gateway) == before
    longest = teach(api, word() + "a" * 1989, "fact")
    assert longest.status_code == 201 and len(longest.json()["text"]) == 2000


@pytest.mark.parametrize("params", [
    {"limit": 0}, {"limit": 201}, {"limit": -1}, {"limit": "many"},
    {"before": 0}, {"before": -3}, {"before": "x"}, {"before": str(2**63)},
    {"kind": "document"}, {"kind": "opinion"}, {"q": "q" * 501},
])
def test_bad_list_params_are_422(api: Api, params: dict[str, Any]) -> None:
    error_of(api.http.get("/api/memory", params=params), 422, "invalid_request")


@pytest.mark.parametrize("item_id", ["abc", "0", "-1", str(2**63), "1.5", "1e3"])
def test_bad_ids_are_422(api: Api, item_id: str) -> None:
    error_of(api.http.delete(f"/api/memory/{item_id}"), 422, "invalid_request")


def test_unknown_ids_are_404(api: Api) -> None:
    error_of(api.http.delete(f"/api/memory/{2**62}"), 404, "memory_not_found")


def test_search_shows_document_passages_which_the_api_does_not_forget(
    api: Api, gateway: Gateway
) -> None:
    topic = word()
    projects = gateway.home / "workspace" / "memory" / "projects.md"
    projects.write_text(f"# Projects\n\nRestoring the {topic} greenhouse.\n", encoding="utf-8")
    api.wait(api.send(api.new_chat(), "hello")["run_id"])  # a turn indexes changed documents
    [passage] = listed(api, q=topic)
    assert passage["kind"] == "document" and passage["source"] == "projects.md"
    assert passage["text"] == f"Restoring the {topic} greenhouse."
    assert listed(api, q=topic, kind="fact") == []
    assert passage["id"] not in [i["id"] for i in listed(api, limit=200)]  # not an item
    error_of(api.http.delete(f"/api/memory/{passage['id']}"), 404, "memory_not_found")
    assert listed(api, q=topic) == [passage]


def test_the_routes_need_the_token(gateway: Gateway) -> None:
    with httpx.Client(base_url=gateway.url, timeout=10) as anonymous:
        for method, path in (("GET", "/api/memory"), ("POST", "/api/memory"),
                             ("DELETE", "/api/memory/1")):
            error_of(anonymous.request(method, path, json={"text": "x", "kind": "fact"}),
                     401, "unauthorized")


# ---------------------------------------------------------------- as a chat's work


def listed_as(api: Api, key: str, **params: Any) -> list[dict[str, Any]]:
    answer = api.http.get("/api/memory", params=params, headers={HEADER: key})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def test_a_persistent_chat_files_what_it_teaches_under_itself(
    api: Api, gateway: Gateway
) -> None:
    key = api.new_chat(memory_mode="persistent")
    text = f"The owner's allotment is plot {word()}."
    made = teach(api, text, "fact", **{HEADER: key})
    assert made.status_code == 201, made.text
    item = made.json()
    assert item["filed_under"] == key and item["written_by"] == f"api:{key}"
    stored = row(gateway, item["id"])
    assert stored is not None
    assert stored["filed_under"] == key and stored["written_by"] == f"api:{key}"
    assert listed_as(api, key)[0]["id"] == item["id"]
    # the owner saying it too: the item is no longer this one chat's alone
    assert teach(api, text).status_code == 200
    assert listed(api, limit=1)[0]["filed_under"] is None
    assert api.http.delete(f"/api/memory/{item['id']}",
                           headers={HEADER: key}).json() == {"forgotten": item["id"]}
    assert row(gateway, item["id"]) is None


@pytest.mark.parametrize("mode", ["incognito", "temporary", "unreadable"])
def test_a_restricted_chat_keeps_nothing(api: Api, gateway: Gateway, mode: str) -> None:
    if mode == "unreadable":
        key = api.new_chat()
        set_recorded_mode(gateway, key, "no-such-mode")
    else:
        key = api.new_chat(memory_mode=mode)
    kept = teach(api, f"Kept by the owner {word()}.").json()
    before, history = rows(gateway), history_text(gateway)
    secret = f"A secret told in a {mode} chat {word()}."
    for kind in ("fact", "preference", "lesson", "commitment"):
        message = error_of(teach(api, secret, kind, **{HEADER: key}), 403, "restricted_session")
        assert "nothing was written" in message
    error_of(teach(api, kept["text"], **{HEADER: key}), 403, "restricted_session")
    error_of(api.http.delete(f"/api/memory/{kept['id']}", headers={HEADER: key}), 403,
             "restricted_session")
    error_of(api.http.delete("/api/memory/999999999", headers={HEADER: key}), 403,
             "restricted_session")
    assert rows(gateway) == before
    assert history_text(gateway) == history and secret not in history


def test_an_incognito_chat_reads_memory(api: Api, gateway: Gateway) -> None:
    key = api.new_chat(memory_mode="incognito")
    topic = word()
    item = teach(api, f"The owner's kayak is {topic}.").json()
    assert listed_as(api, key, limit=1)[0]["id"] == item["id"]
    assert [i["id"] for i in listed_as(api, key, q=topic)] == [item["id"]]
    stored = row(gateway, item["id"])
    assert stored is not None and stored["recall_count"] == 0


@pytest.mark.parametrize("mode", ["temporary", "unreadable"])
def test_a_temporary_chat_reads_nothing(api: Api, gateway: Gateway, mode: str) -> None:
    if mode == "unreadable":
        key = api.new_chat()
        set_recorded_mode(gateway, key, "Persistent ")
    else:
        key = api.new_chat(memory_mode="temporary")
    topic = word()
    teach(api, f"The owner's canoe is {topic}.")
    for params in ({}, {"q": topic}, {"kind": "fact", "limit": 1}):
        message = error_of(api.http.get("/api/memory", params=params, headers={HEADER: key}),
                           403, "restricted_session")
        assert "neither reads nor keeps" in message


def test_an_unknown_or_bad_chat_header(api: Api, gateway: Gateway) -> None:
    before = rows(gateway)
    for method, path, extra in (("GET", "/api/memory", {}),
                                ("POST", "/api/memory",
                                 {"json": {"text": f"x {word()}", "kind": "fact"}}),
                                ("DELETE", "/api/memory/1", {})):
        error_of(api.http.request(method, path, headers={HEADER: "no-such-chat"}, **extra),
                 404, "session_not_found")
        error_of(api.http.request(method, path, headers={HEADER: "k" * 201}, **extra), 422,
                 "invalid_request")
        error_of(api.http.request(method, path, headers={HEADER: ""}, **extra), 422,
                 "invalid_request")
    assert rows(gateway) == before


# ---------------------------------------------------------------- the chat list's search


def test_the_chat_list_search_never_shows_a_restricted_chat(api: Api) -> None:
    tag = word()
    kept = api.new_chat(name=f"{tag}-kept")
    hidden = [api.new_chat(name=f"{tag}-{mode}", memory_mode=mode)
              for mode in ("incognito", "temporary")]
    for key in (kept, *hidden):
        api.http.patch(f"/api/sessions/{key}", json={"title": f"Otters {tag}"})
    for q in (tag, f"otters {tag}", "incognito", "temporary", "otters"):
        found = []
        cursor = None
        while True:
            params: dict[str, Any] = {"q": q, "limit": 200}
            if cursor:
                params["cursor"] = cursor
            page = api.http.get("/api/sessions", params=params).json()
            found += page["sessions"]
            cursor = page["next_cursor"]
            if not cursor:
                break
        assert not {s["key"] for s in found} & set(hidden), q
        assert {s["memory_mode"] for s in found} <= {"persistent"}, q
        if tag in q:
            assert [s["key"] for s in found] == [kept], q
    for key in hidden:  # they exist, and open by key
        assert api.http.get(f"/api/sessions/{key}").status_code == 200


def test_the_memory_kinds_match_the_store() -> None:
    assert get_args(Kind) == KINDS
