"""`PATCH /api/memory/{id}`: revising an item's kind and/or words, checked as teaching is;
words that are another item's are refused (409); the old words leave the index, the history
and every file; new words are no one chat's alone unless that chat revises them; work that
keeps nothing changes nothing; an item's view names the chat it is filed under."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from hearth.store.memory import fingerprint
from tests.gateway import Api, Gateway, module_gateway
from tests.support.http import error_fields, error_of

server, gateway, api = module_gateway("memory-edit-api")
HEADER = "X-Hearth-Session"


def word() -> str:
    """A word no other test uses (letters only: one search term, kept whole by the index)."""
    return "q" + uuid.uuid4().hex[:10].translate(str.maketrans("0123456789", "ghijklmnop"))


def teach(api: Api, text: str, kind: str = "fact", **headers: str) -> dict[str, Any]:
    answer = api.http.post("/api/memory", json={"text": text, "kind": kind}, headers=headers)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def revise(api: Api, item_id: int, **body: Any) -> httpx.Response:
    headers = body.pop("headers", {})
    return api.http.patch(f"/api/memory/{item_id}", json=body, headers=headers)


def row(gateway: Gateway, item_id: int) -> dict[str, Any]:
    with sqlite3.connect(f"file:{gateway.home / 'hearth.db'}?mode=ro", uri=True) as conn:
        conn.row_factory = sqlite3.Row
        return dict(conn.execute("SELECT * FROM memory_items WHERE id = ?",
                                 (item_id,)).fetchone())


def found(api: Api, words: str) -> list[int]:
    answer = api.http.get("/api/memory", params={"q": words})
    assert answer.status_code == 200, answer.text
    return [item["id"] for item in answer.json()["items"]]


def holding(home: Path, text: str) -> list[str]:
    """Every file under `home` whose bytes hold `text`."""
    needle = text.encode()
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")
                  if p.is_file() and needle in p.read_bytes())


def test_new_words_replace_the_old_everywhere(api: Api, gateway: Gateway) -> None:
    old, new = word(), word()
    item = teach(api, f"The spare key is under the {old} pot")
    assert holding(gateway.home, old)  # the positive control: the scan finds the old words
    answer = revise(api, item["id"], text=f"  The spare key is under the {new} mat  ")
    assert answer.status_code == 200, answer.text
    revised = answer.json()
    assert revised["id"] == item["id"] and revised["kind"] == "fact"
    assert revised["text"] == f"The spare key is under the {new} mat"  # trimmed
    assert revised["updated_at"] >= item["updated_at"]
    assert row(gateway, item["id"])["fingerprint"] == fingerprint(revised["text"])
    assert found(api, new) == [item["id"]] and found(api, old) == []
    assert holding(gateway.home, old) == []  # not the index, the history, nor the log
    assert any(name.startswith("workspace/memory/history/")
               for name in holding(gateway.home, new))


def test_a_kind_alone_changes_and_the_chat_it_came_from_stays(api: Api) -> None:
    key = api.new_chat()
    item = teach(api, f"Standup is at nine {word()}", "commitment", **{HEADER: key})
    assert item["filed_under"] == key  # the view names the chat, for a page to link to
    answer = revise(api, item["id"], kind="preference")
    assert answer.status_code == 200, answer.text
    assert (answer.json()["kind"], answer.json()["text"]) == ("preference", item["text"])
    assert answer.json()["filed_under"] == key  # the words are still that chat's alone


def test_rewritten_words_are_the_reviser_s(api: Api) -> None:
    mine, other = api.new_chat(), api.new_chat()
    own = teach(api, f"Tea with oat milk {word()}", **{HEADER: mine})
    by_itself = revise(api, own["id"], text=f"Tea with soy milk {word()}", headers={HEADER: mine})
    assert by_itself.json()["filed_under"] == mine  # the same chat stands behind it
    by_other = revise(api, own["id"], text=f"Tea, no milk {word()}", headers={HEADER: other})
    assert by_other.status_code == 200 and by_other.json()["filed_under"] is None
    taught = teach(api, f"Coffee black {word()}", **{HEADER: mine})
    by_owner = revise(api, taught["id"], text=f"Coffee with sugar {word()}")
    assert by_owner.json()["filed_under"] is None  # a fact edited in Memory outlives the chat


def test_words_that_are_another_items_are_refused(api: Api, gateway: Gateway) -> None:
    first = teach(api, f"The cat is called {word()}")
    second = teach(api, f"The dog is called {word()}")
    error = error_fields(revise(api, second["id"], text="  " + first["text"].upper() + " "), 409,
                         "memory_duplicate")
    assert error["duplicate_of"] == first["id"] and str(first["id"]) in error["message"]
    assert row(gateway, second["id"])["text"] == second["text"]  # nothing changed
    recased = revise(api, second["id"], text=second["text"].upper())  # its own words, recased
    assert recased.status_code == 200 and recased.json()["text"] == second["text"].upper()


def test_work_that_keeps_nothing_changes_nothing(api: Api, gateway: Gateway) -> None:
    item = teach(api, f"Bin day is Tuesday {word()}")
    for mode in ("incognito", "temporary"):
        key = api.new_chat(memory_mode=mode)
        answer = revise(api, item["id"], text="Bin day is Friday", headers={HEADER: key})
        error_of(answer, 403, "restricted_session")
    assert row(gateway, item["id"])["text"] == item["text"]


@pytest.mark.parametrize("body", [
    {}, {"text": ""}, {"text": "   "}, {"text": "x" * 2001}, {"kind": "document"},
    {"kind": "bogus"}, {"text": 5}, {"text": None, "kind": None}, {"extra": 1},
])
def test_bad_bodies_are_refused(api: Api, gateway: Gateway, body: dict[str, Any]) -> None:
    item = teach(api, f"Plants need water {word()}")
    error_of(revise(api, item["id"], **body), 422, "invalid_request")
    assert row(gateway, item["id"])["text"] == item["text"]


def test_unknown_and_bad_ids(api: Api) -> None:
    error_of(revise(api, 2**40, text="anything"), 404, "memory_not_found")
    for bad in ("abc", "0", str(2**63)):
        error_of(api.http.patch(f"/api/memory/{bad}", json={"text": "x"}), 422,
                 "invalid_request")
    error_of(revise(api, 1, text="x", headers={HEADER: "no-such-chat"}), 404,
             "session_not_found")
