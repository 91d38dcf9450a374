"""A chat's title is checked like a folder name or a tag (one rule, `chats.checked_text`): no
NUL, no other control character, no text-direction mark. Every door that sets a title is
tried: `PATCH /api/sessions/{key}` (the API), `chats.update` (what every surface calls), and
`POST /api/sessions`'s `name` (a chat's name, which is its key). In-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hearth.sessions import chats
from tests.engine_harness import blocking
from tests.support.dashboard import bearer
from tests.support.store import migrated_store

HOSTILE_TITLES = [
    pytest.param("a\x00b", id="nul"),
    pytest.param("invoice\u202efdp.exe", id="right-to-left-override"),
    pytest.param("left\u2066isolate", id="direction-isolate"),
    pytest.param("bell\x07", id="bell"),
    pytest.param("esc\x1b[31mred", id="escape"),
    pytest.param("two\nlines", id="newline"),
    pytest.param("tab\there", id="tab"),
    pytest.param("del\x7f", id="delete"),
    pytest.param("next\x85line", id="c1-next-line"),
    pytest.param("para\u2029graph", id="paragraph-separator"),
]
FINE_TITLES = ["Trip to Lisbon 🇵🇹", "Ünïcödé — naïve café", "日本語のタイトル", "עברית רגילה",
               "family 👨\u200d👩\u200d👧 plans"]  # right-to-left text itself, and a ZWJ emoji


def _make(client: TestClient, **body: Any) -> Any:
    return client.post("/api/sessions", json=body, headers=bearer(client))


def _title(client: TestClient, key: str) -> Any:
    return client.get(f"/api/sessions/{key}", headers=bearer(client)).json()["session"]["title"]


@pytest.mark.parametrize("title", HOSTILE_TITLES)
def test_patch_refuses_a_title_with_a_control_or_direction_character(
        client: TestClient, title: str) -> None:
    """Before: `PATCH {"title": "invoice\\u202efdp.exe"}` (or with a NUL) answered 200 and kept
    the title as sent, so the chat list showed "invoiceexe.pdf"; folders and tags refused the
    same text with 422 invalid_folder / invalid_tags."""
    key = _make(client).json()["key"]
    assert client.patch(f"/api/sessions/{key}", json={"title": "Kept"},
                        headers=bearer(client)).status_code == 200
    answer = client.patch(f"/api/sessions/{key}", json={"title": title}, headers=bearer(client))
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_title"
    assert error["message"] == ("A title cannot hold control characters (a line break, a tab, "
                                "a text-direction mark).")
    assert _title(client, key) == "Kept"  # nothing changed


@pytest.mark.parametrize("title", HOSTILE_TITLES)
def test_every_surface_door_refuses_it_too(tmp_path: Path, title: str) -> None:
    """`chats.update` is what each surface calls to rename a chat; it refuses on its own, so no
    door can skip the check. Before: it stored whatever it was handed."""
    with migrated_store(tmp_path) as db:
        key = blocking(lambda: chats.open_chat(db)).session.key
        with pytest.raises(chats.ChatError) as refused:
            blocking(lambda: chats.update(db, key, title=title))
        assert refused.value.code == "invalid_title" and refused.value.status == 422
        assert blocking(lambda: chats.get_chat(db, key)).title is None


@pytest.mark.parametrize("name", ["a\x00b", "chat\u202eevil", "bell\x07", "two\nlines"])
def test_a_chat_name_with_one_is_refused_when_made(client: TestClient, name: str) -> None:
    answer = _make(client, name=name)
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_name"


@pytest.mark.parametrize("title", FINE_TITLES)
def test_ordinary_unicode_titles_are_kept_as_written(client: TestClient, title: str) -> None:
    key = _make(client).json()["key"]
    answer = client.patch(f"/api/sessions/{key}", json={"title": f"  {title} "},
                          headers=bearer(client))
    assert answer.status_code == 200, answer.text
    assert answer.json()["title"] == title == _title(client, key)


def test_a_title_too_long_is_refused_by_the_same_rule(tmp_path: Path) -> None:
    with migrated_store(tmp_path) as db:
        key = blocking(lambda: chats.open_chat(db)).session.key
        assert blocking(lambda: chats.update(db, key, title="t" * 200)).title == "t" * 200
        with pytest.raises(chats.ChatError, match="1 to 200 characters"):
            blocking(lambda: chats.update(db, key, title="t" * 201))
        with pytest.raises(chats.ChatError, match="1 to 200 characters"):
            blocking(lambda: chats.update(db, key, title="  \t "))
