"""Folders, tags and pinned chats: the store and `sessions.chats` (filing, the filters, pinned
first, exact paging, the folders and tags in use, validation, restricted chats refused), the
API (`PATCH /api/sessions/{key}`, `GET /api/sessions?folder=&tag=`) and the chat list page
(the filing nav, the Pinned group, the per-chat forms, CSRF, escaping). In-process."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from hearth.errors import Refusal
from hearth.privacy.reach import RestrictedSession
from hearth.store import sessions as session_store
from hearth.store.db import Database
from hearth.store.schema import sessions as sessions_table
from tests.engine_harness import blocking_chats
from tests.support.dashboard import bearer, main_of, sign_in

HOSTILE = '<script>alert(1)</script>'
SENTENCE = re.compile(r"^[A-Za-z].{10,}\.$")  # a sentence a person can read and act on


# --- the store and sessions.chats -------------------------------------------------------


def new_chat(db: Database, mode: str = "persistent") -> str:
    return blocking_chats.open_chat(db, memory_mode=mode).session.key


def stamp(db: Database, key: str, updated_at: float) -> None:
    """Give a chat a chosen place by recency (ties included)."""
    with db.write() as conn:
        conn.execute(update(sessions_table).where(sessions_table.c.key == key)
                     .values(updated_at=updated_at))


def listed(db: Database, **filters: Any) -> list[str]:
    rows, _ = blocking_chats.list_chats(db, limit=200, query=None, cursor=None, **filters)
    return [row.key for row in rows]


def test_pinning_puts_a_chat_first_and_unpinning_puts_it_back(db: Database) -> None:
    keys = [new_chat(db) for _ in range(3)]
    for i, key in enumerate(keys):
        stamp(db, key, 1000.0 + i)
    assert listed(db) == keys[::-1]  # newest first
    pinned = blocking_chats.update(db, keys[0], filing={"pinned": True})
    assert pinned.pinned and pinned.updated_at == 1000.0  # filing is not activity
    assert listed(db) == [keys[0], keys[2], keys[1]]
    blocking_chats.update(db, keys[0], filing={"pinned": False})
    assert listed(db) == keys[::-1]


def test_the_folder_and_tag_filters_keep_only_those_chats(db: Database) -> None:
    work, home, loose = (new_chat(db) for _ in range(3))
    blocking_chats.update(db, work, filing={"folder": "Work", "tags": ["Urgent", "q3"]})
    blocking_chats.update(db, home, filing={"folder": "Home", "tags": ["urgent"]})
    assert listed(db, folder="Work") == [work]
    assert listed(db, folder=" Home ") == [home]
    assert listed(db, folder="work") == []  # a folder is named as it was written
    assert set(listed(db, tag="URGENT")) == {work, home}  # tags match whatever the case
    assert listed(db, tag="q3") == [work]
    assert listed(db, folder="Home", tag="q3") == []
    assert listed(db, tag="urg") == []  # a whole tag, not a piece of one
    assert set(listed(db)) == {work, home, loose}


def test_the_filing_index_counts_the_listed_chats_only(db: Database) -> None:
    a, b, c = (new_chat(db) for _ in range(3))
    blocking_chats.update(db, a, filing={"folder": "Work", "tags": ["x", "y"]})
    blocking_chats.update(db, b, filing={"folder": "Work", "tags": ["y"]})
    blocking_chats.update(db, c, filing={"folder": "archive"})
    hidden = new_chat(db, "incognito")
    with db.write() as conn:  # planted past the refusal: the index must still leave it out
        session_store.set_filing(conn, hidden, folder="Secret", tags=["secret"])
    index = blocking_chats.filing_index(db)
    assert index.folders == [("archive", 1), ("Work", 2)]
    assert index.tags == [("x", 1), ("y", 2)]


def test_labels_are_trimmed_tags_lower_cased_and_deduplicated(db: Database) -> None:
    key = new_chat(db)
    row = blocking_chats.update(db, key, filing={"folder": "  Projects  ",
                                        "tags": [" Alpha ", "alpha", "BETA", "beta "]})
    assert row.folder == "Projects" and row.tags == ("alpha", "beta")
    edge = blocking_chats.update(db, key, filing={"folder": "f" * 60,
                                                  "tags": [f"t{i}" for i in range(20)]})
    assert edge.folder == "f" * 60 and len(edge.tags) == 20  # the limits themselves are fine
    assert blocking_chats.update(db, key, filing={"folder": None, "tags": []}).folder is None
    assert blocking_chats.get_chat(db, key).tags == ()


BAD_FILINGS = [
    pytest.param({"folder": "f" * 61}, "invalid_folder", id="folder-too-long"),
    pytest.param({"folder": "   "}, "invalid_folder", id="folder-blank"),
    pytest.param({"folder": "a\x07b"}, "invalid_folder", id="folder-bell"),
    pytest.param({"folder": "a\nb"}, "invalid_folder", id="folder-newline"),
    pytest.param({"folder": "a\u202eb"}, "invalid_folder", id="folder-direction-override"),
    pytest.param({"folder": 5}, "invalid_folder", id="folder-not-text"),
    pytest.param({"tags": [f"t{i}" for i in range(21)]}, "invalid_tags", id="21-tags"),
    pytest.param({"tags": ["t" * 61]}, "invalid_tags", id="tag-too-long"),
    pytest.param({"tags": ["a\tb"]}, "invalid_tags", id="tag-tab"),
    pytest.param({"tags": ["a,b"]}, "invalid_tags", id="tag-comma"),
    pytest.param({"tags": [""]}, "invalid_tags", id="tag-empty"),
    pytest.param({"tags": [3]}, "invalid_tags", id="tag-not-text"),
    pytest.param({"tags": "work"}, "invalid_tags", id="tags-not-a-list"),
    pytest.param({"pinned": "yes"}, "invalid_pinned", id="pinned-not-bool"),
    pytest.param({"colour": "red"}, "invalid_request", id="unknown-field"),
]


@pytest.mark.parametrize(("filing", "code"), BAD_FILINGS)
def test_a_bad_filing_is_refused_with_a_sentence_and_changes_nothing(
        db: Database, filing: dict[str, Any], code: str) -> None:
    key = new_chat(db)
    blocking_chats.update(db, key, filing={"folder": "Kept", "tags": ["kept"]})
    with pytest.raises(Refusal) as refused:
        blocking_chats.update(db, key, title="renamed", filing={"pinned": True, **filing})
    assert refused.value.status == 422 and refused.value.code == code
    assert SENTENCE.match(refused.value.sentence), refused.value.sentence
    row = blocking_chats.get_chat(db, key)
    assert (row.folder, row.tags, row.pinned, row.title) == ("Kept", ("kept",), False, None)


@pytest.mark.parametrize("mode", ["incognito", "temporary", "mystery"])
def test_a_restricted_chat_is_never_filed(db: Database, mode: str) -> None:
    if mode == "mystery":  # a mode this build cannot read is treated as Temporary
        with db.write() as conn:
            session_store.insert(conn, key="odd", tab_id="t", memory_mode=mode, chat_number=None)
        key = "odd"
    else:
        key = new_chat(db, mode)
    for filing in ({"pinned": True}, {"folder": "Work"}, {"tags": ["x"]}):
        with pytest.raises(RestrictedSession) as refused:
            blocking_chats.update(db, key, filing=filing)
        assert refused.value.status == 403 and "keeps nothing" in refused.value.sentence
    row = blocking_chats.get_chat(db, key)
    assert (row.folder, row.tags, row.pinned) == (None, (), False)
    assert key not in listed(db)


def _mixed_chats(db: Database) -> list[str]:
    """Twelve chats, five pinned, with runs of equal `updated_at` across the groups; in the
    order the list must give them: pinned first, then newest, then key, all descending."""
    keys = [new_chat(db) for _ in range(12)]
    for i, key in enumerate(keys):
        stamp(db, key, 500.0 + i // 3)  # ties, three chats to a stamp
        if i % 5 in (0, 2):
            blocking_chats.update(db, key, filing={"pinned": True})
    rows = [blocking_chats.get_chat(db, key) for key in keys]
    rows.sort(key=lambda r: (r.pinned, r.updated_at, r.key), reverse=True)
    assert sum(r.pinned for r in rows) == 5
    return [r.key for r in rows]


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 7])
def test_paging_through_pinned_and_unpinned_chats_is_exact(db: Database, limit: int) -> None:
    expected = _mixed_chats(db)
    seen: list[str] = []
    cursor = None
    for _page in range(20):
        rows, cursor = blocking_chats.list_chats(db, limit=limit, query=None, cursor=cursor)
        assert len(rows) <= limit
        seen += [row.key for row in rows]
        if cursor is None:
            break
    assert seen == expected  # every chat once, in order: no duplicate, no gap


def test_paging_a_tag_filter_is_exact(db: Database) -> None:
    expected = _mixed_chats(db)
    tagged = expected[::2]
    for key in tagged:
        blocking_chats.update(db, key, filing={"tags": ["even"]})
    seen: list[str] = []
    cursor = None
    for _page in range(20):
        rows, cursor = blocking_chats.list_chats(db, limit=2, query=None, cursor=cursor, tag="even")
        seen += [row.key for row in rows]
        if cursor is None:
            break
    assert seen == tagged


def test_a_cursor_from_before_pinning_reads_on_and_a_forged_one_is_refused(
        db: Database) -> None:
    import base64
    import json

    keys = [new_chat(db) for _ in range(3)]
    for i, key in enumerate(keys):
        stamp(db, key, 100.0 + i)
    legacy = base64.urlsafe_b64encode(json.dumps([102.0, keys[2]]).encode()).decode()
    rows, _ = blocking_chats.list_chats(db, limit=10, query=None, cursor=legacy)
    assert [r.key for r in rows] == [keys[1], keys[0]]
    for forged in ([7, 102.0, keys[2]], [1, 102.0, keys[2]], [True, "102", keys[2]],
                   [True, 102.0, 3], [True, float("nan"), keys[2]], [False, 10**400, "k"]):
        raw = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode()
        with pytest.raises(Refusal) as refused:
            blocking_chats.list_chats(db, limit=10, query=None, cursor=raw)
        assert refused.value.code == "invalid_cursor", forged


# --- the API and the page -----------------------------------------------------------------


def _make(client: TestClient, **body: Any) -> str:
    answer = client.post("/api/sessions", json=body, headers=bearer(client))
    assert answer.status_code == 201
    return str(answer.json()["key"])


def _patch(client: TestClient, key: str, body: Any) -> Any:
    return client.patch(f"/api/sessions/{key}", json=body, headers=bearer(client))


def _listed(client: TestClient, **params: str) -> list[str]:
    answer = client.get("/api/sessions", params=params, headers=bearer(client))
    assert answer.status_code == 200
    return [s["key"] for s in answer.json()["sessions"]]


def test_patch_files_a_chat_and_the_api_filters_by_folder_and_tag(client: TestClient) -> None:
    first, second = _make(client), _make(client)
    answer = _patch(client, first, {"folder": " Work ", "tags": ["Q3", "q3", "plans"],
                                    "pinned": True})
    assert answer.status_code == 200
    view = answer.json()
    assert (view["folder"], view["tags"], view["pinned"]) == ("Work", ["q3", "plans"], True)
    assert _listed(client) == [first, second]  # pinned first though older
    assert _listed(client, folder="Work") == [first]
    assert _listed(client, tag="PLANS") == [first]
    assert _listed(client, tag="nothing") == []
    kept = _patch(client, first, {"title": "Renamed"}).json()  # a partial change keeps the rest
    assert (kept["title"], kept["folder"], kept["tags"], kept["pinned"]) == (
        "Renamed", "Work", ["q3", "plans"], True)
    cleared = _patch(client, first, {"folder": None, "tags": [], "pinned": False}).json()
    assert (cleared["folder"], cleared["tags"], cleared["pinned"]) == (None, [], False)
    assert _listed(client, folder="Work") == []
    session = client.get(f"/api/sessions/{second}", headers=bearer(client)).json()["session"]
    assert (session["folder"], session["tags"], session["pinned"]) == (None, [], False)


@pytest.mark.parametrize("body", [
    pytest.param({"folder": "f" * 61}, id="folder-too-long"),
    pytest.param({"folder": "a\u0000b"}, id="folder-nul"),
    pytest.param({"tags": ["a\nb"]}, id="tag-newline"),
    pytest.param({"tags": [f"t{i}" for i in range(21)]}, id="21-tags"),
    pytest.param({"tags": "work"}, id="tags-text"),
    pytest.param({"tags": [1]}, id="tag-number"),
    pytest.param({"tags": None}, id="tags-null"),
    pytest.param({"pinned": "true"}, id="pinned-text"),
    pytest.param({"pinned": 1}, id="pinned-number"),
    pytest.param({"pinned": None}, id="pinned-null"),
    pytest.param({"folder": 5}, id="folder-number"),
    pytest.param({"folder": ["a"]}, id="folder-list"),
])
def test_patch_refuses_a_bad_filing_with_422_and_a_sentence(client: TestClient,
                                                             body: dict[str, Any]) -> None:
    key = _make(client)
    answer = _patch(client, key, {"title": "Changed?", **body})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"].startswith("invalid_") and len(error["message"]) > 10
    session = client.get(f"/api/sessions/{key}", headers=bearer(client)).json()["session"]
    assert session["title"] is None and session["folder"] is None  # nothing changed


def test_patch_keeps_its_other_answers(client: TestClient) -> None:
    key = _make(client)
    fixed = _patch(client, key, {"memory_mode": "temporary", "folder": "Work"})
    assert fixed.status_code == 409 and fixed.json()["error"]["code"] == "memory_mode_fixed"
    same = _patch(client, key, {"memory_mode": "persistent", "pinned": True})
    assert same.status_code == 200 and same.json()["pinned"] is True
    assert _patch(client, key, {"memory_mode": "persistent"}).status_code == 200
    empty = _patch(client, key, {})
    assert empty.status_code == 422 and "folder" in empty.json()["error"]["message"]
    assert _patch(client, "no-such-chat", {"pinned": True}).status_code == 404
    assert _patch(client, key, {"trust": "trusted"}).json()["trust"] == "trusted"
    assert _patch(client, key, {"shade": "blue"}).status_code == 422


@pytest.mark.parametrize("mode", ["incognito", "temporary"])
def test_patch_refuses_to_file_a_restricted_chat(client: TestClient, mode: str) -> None:
    key = _make(client, memory_mode=mode)
    answer = _patch(client, key, {"folder": "Work", "title": "Also renamed?"})
    assert answer.status_code == 403
    error = answer.json()["error"]
    assert error["code"] == "restricted_session" and "keeps nothing" in error["message"]
    session = client.get(f"/api/sessions/{key}", headers=bearer(client)).json()["session"]
    assert session["folder"] is None and session["title"] != "Also renamed?"
    assert _patch(client, key, {"title": "Renamed"}).status_code == 200  # renaming still is


def test_deleting_a_filed_chat_leaves_no_folder_or_tag_behind(client: TestClient) -> None:
    key = _make(client)
    _patch(client, key, {"folder": "Gone", "tags": ["gone"], "pinned": True})
    assert client.delete(f"/api/sessions/{key}", headers=bearer(client)).status_code == 200
    engine = client.app.state.engine  # type: ignore[attr-defined]
    index = blocking_chats.filing_index(engine.db)
    assert index.folders == [] and index.tags == []
    assert _listed(client, folder="Gone") == [] and _listed(client, tag="gone") == []


def _organize(client: TestClient, key: str, csrf: str | None, **fields: str) -> Any:
    data = dict(fields)
    if csrf is not None:
        data["csrf"] = csrf
    return client.post(f"/chats/{key}/organize", data=data)


def test_the_list_page_shows_pinned_first_with_the_folders_and_tags(
        client: TestClient) -> None:
    csrf = sign_in(client)
    older, newer = _make(client, name="older-chat"), _make(client, name="newer-chat")
    _patch(client, older, {"folder": "Work", "tags": ["alpha"], "pinned": True})
    _patch(client, newer, {"tags": ["beta"]})
    page = main_of(client.get("/chats").text)
    assert page.index("/chats/older-chat") < page.index("/chats/newer-chat")
    assert page.index('class="pill">Pinned<') < page.index("/chats/newer-chat")
    assert '<a href="/chats?folder=Work">Work</a>' in page  # the filters and the row link to it
    assert '<a href="/chats?tag=alpha">#alpha</a>' in page
    assert '<a href="/chats?tag=beta">#beta</a>' in page
    assert '<a href="/chats" aria-current="page">All chats</a>' in page
    assert 'value="alpha"' in page and 'value="Work"' in page  # the row's form holds them
    assert ">Unpin<" in page and ">Pin<" in page and csrf in page
    in_work = main_of(client.get("/chats", params={"folder": "Work"}).text)
    assert '<a href="/chats?folder=Work" aria-current="page">Work <' in in_work
    assert "/chats/older-chat" in in_work and "/chats/newer-chat" not in in_work
    assert 'aria-current="page">All chats' not in in_work
    tagged = main_of(client.get("/chats", params={"tag": "BETA"}).text)
    assert '<a href="/chats?tag=beta" aria-current="page">#beta <' in tagged
    assert "/chats/newer-chat" in tagged and "/chats/older-chat" not in tagged


def test_the_forms_pin_and_file_a_chat_and_go_back_to_the_view(client: TestClient) -> None:
    csrf = sign_in(client)
    key = _make(client)
    pinned = _organize(client, key, csrf, pinned="1", back="folder=Work&next=//evil.example")
    assert pinned.status_code == 303 and pinned.headers["location"] == "/chats?folder=Work"
    filed = _organize(client, key, csrf, folder="  Work ", tags="Alpha, beta, , alpha",
                      back="")
    assert filed.status_code == 303 and filed.headers["location"] == "/chats"
    engine = client.app.state.engine  # type: ignore[attr-defined]
    row = blocking_chats.get_chat(engine.db, key)
    assert (row.folder, row.tags, row.pinned) == ("Work", ("alpha", "beta"), True)
    cleared = _organize(client, key, csrf, folder="", tags="", pinned="0",
                        back="https://evil.example/")
    assert cleared.status_code == 303 and cleared.headers["location"] == "/chats"
    row = blocking_chats.get_chat(engine.db, key)
    assert (row.folder, row.tags, row.pinned) == (None, (), False)


@pytest.mark.parametrize(("fields", "words"), [
    pytest.param({"folder": "f" * 61}, "1 to 60 characters", id="folder-too-long"),
    pytest.param({"tags": ",".join(f"t{i}" for i in range(21))}, "at most 20", id="21-tags"),
    pytest.param({"folder": "a\x07b"}, "control characters", id="folder-bell"),
    pytest.param({"pinned": "maybe"}, "true or false", id="pinned-odd"),
    pytest.param({}, "Nothing to change", id="nothing"),
])
def test_a_bad_form_value_shows_the_list_again_with_the_sentence(
        client: TestClient, fields: dict[str, str], words: str) -> None:
    csrf = sign_in(client)
    key = _make(client, name="the-chat")
    answer = _organize(client, key, csrf, back="q=the", **fields)
    assert answer.status_code == 422 and answer.headers["content-type"].startswith("text/html")
    assert 'role="alert"' in answer.text and words in answer.text
    assert "/chats/the-chat" in answer.text and 'value="the"' in answer.text  # the same view


def test_filing_a_restricted_chat_from_a_form_is_refused_on_the_page(
        client: TestClient) -> None:
    csrf = sign_in(client)
    key = _make(client, memory_mode="incognito")
    answer = _organize(client, key, csrf, pinned="1")
    assert answer.status_code == 403 and "keeps nothing" in answer.text
    missing = _organize(client, "no-such-chat", csrf, pinned="1")
    assert missing.status_code == 404 and "There is no chat" in missing.text


def test_the_organize_form_needs_the_csrf_token(client: TestClient) -> None:
    csrf = sign_in(client)
    key = _make(client)
    refused = _organize(client, key, None, pinned="1")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    forged = _organize(client, key, "0" * len(csrf), pinned="1")
    assert forged.status_code == 403
    engine = client.app.state.engine  # type: ignore[attr-defined]
    assert blocking_chats.get_chat(engine.db, key).pinned is False
    assert _organize(client, key, csrf, pinned="1").status_code == 303
    assert blocking_chats.get_chat(engine.db, key).pinned is True


def test_hostile_folder_and_tag_names_are_escaped_on_the_page(client: TestClient) -> None:
    csrf = sign_in(client)
    key = _make(client)
    hostile_tag = '"><img src=x onerror=alert(2)>'
    filed = _organize(client, key, csrf, folder=HOSTILE, tags=hostile_tag)
    assert filed.status_code == 303
    listed = (client.get("/chats", params=view).text
              for view in ({}, {"folder": HOSTILE}, {"tag": hostile_tag}))
    for page in listed:
        assert "<script>alert" not in page and "<img" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    tagged = client.get("/chats", params={"tag": hostile_tag}).text
    assert f"/chats/{key}" in tagged  # the filter still finds it


class _Controls(HTMLParser):
    """Every form control on a page, every label's `for`, and every id."""

    def __init__(self) -> None:
        super().__init__()
        self.controls: list[dict[str, str | None]] = []
        self.labelled: set[str] = set()
        self.ids: list[str] = []
        self.buttons: list[str] = []
        self._button: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.append(str(found["id"]))
        if tag == "label" and found.get("for"):
            self.labelled.add(str(found["for"]))
        if tag in ("input", "textarea", "select") and found.get("type") != "hidden":
            self.controls.append(found)
        if tag == "button":
            self._button = []

    def handle_data(self, data: str) -> None:
        if self._button is not None:
            self._button.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "button" and self._button is not None:
            self.buttons.append("".join(self._button).strip())
            self._button = None


def test_every_control_on_the_list_is_labelled(client: TestClient) -> None:
    sign_in(client)
    for _ in range(3):
        key = _make(client)
    _patch(client, key, {"pinned": True, "folder": "Work", "tags": ["a"]})
    parser = _Controls()
    parser.feed(client.get("/chats").text)
    assert len(parser.controls) >= 7  # search + a folder and a tags field per chat
    for control in parser.controls:
        assert control.get("id") in parser.labelled, control
    assert len(parser.ids) == len(set(parser.ids)), "an id is used twice"
    pins = [b for b in parser.buttons if b.startswith(("Pin ", "Unpin "))]
    assert len(pins) == 3 and len(set(pins)) == 3  # each names its chat
