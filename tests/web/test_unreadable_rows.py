"""A chat whose stored rows hold values the readers did not expect — a time out of the
calendar's range or no number at all, meta that is not an object, content of the wrong shape —
is still read, on a real gateway: every route that reads it answers 200 (`GET /api/sessions`,
`GET /api/sessions/{key}`, `/api/search`, the chat page, the chat list, the front page, every
export), and says "unreadable" for that field instead. The rows are written straight into the
gateway's database through the store's tables (`hearth.store.schema`), as an older Hearth, a
bad import or a hand edit could have left them. An import that would leave such rows is
refused (`POST /api/import`, 422 `import_invalid` naming the line) with nothing written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, String, create_engine, func, insert, literal, select, update

from hearth.store.schema import sessions, transcript_events
from tests.gateway import Api, Gateway, module_gateway
from tests.support.dashboard import Page

server, gateway, api = module_gateway("unreadable-rows")
NDJSON = {"Content-Type": "application/x-ndjson"}
WORD = "quintessa"  # a word the search finds in each bad chat


@pytest.fixture(scope="module")
def store(gateway: Gateway) -> Iterator[Engine]:
    """The gateway's own database, written beside it (SQLite waits for its writer)."""
    engine = create_engine(f"sqlite:///{gateway.home / 'hearth.db'}",
                           connect_args={"timeout": 30})
    yield engine
    engine.dispose()


def not_a_number(text: str) -> Any:
    """A value bound as text, so a REAL column stores text (what no Hearth writes)."""
    return literal(text, String)


def bad_chat(api: Api, store: Engine, chat_times: dict[str, Any],
             events: list[tuple[str, Any, Any, Any]]) -> str:
    """A kept chat holding `events` (kind, content, meta, created_at) on its path, its own
    times set to `chat_times`."""
    key = api.new_chat()
    with store.begin() as conn:
        for seq, (kind, content, meta, at) in enumerate(events, start=1):
            conn.execute(insert(transcript_events).values(
                session_key=key, seq=seq, event_id=f"{key}-{seq}",
                parent_event_id=f"{key}-{seq - 1}" if seq > 1 else None, kind=kind,
                content=content, meta=meta, created_at=at))
        conn.execute(update(sessions).where(sessions.c.key == key).values(
            last_seq=len(events), message_count=len(events),
            head_event_id=f"{key}-{len(events)}", title="Bad rows", **chat_times))
    return key


def bad_times(api: Api, store: Engine) -> str:
    return bad_chat(api, store, {"created_at": 1e20, "updated_at": -1e20}, [
        ("user", {"text": f"{WORD} one"}, {}, 1e20),
        ("assistant", {"text": f"{WORD} two"}, {}, -1e20),
        ("user", {"text": f"{WORD} three"}, {}, not_a_number("x")),
        ("assistant", {"text": f"{WORD} four"}, {}, float("inf")),
    ])


def bad_shapes(api: Api, store: Engine) -> str:
    return bad_chat(api, store, {"updated_at": not_a_number("x")}, [
        ("user", ["not", "an", "object"], "not an object", 1.7e9),
        ("assistant", {"text": 5}, [1, 2], 1.7e9),
        ("tool_call", "x", {"receipt": {"a": 1}}, 1.7e9),
        ("tool_result", {"output": {"a": 1}}, {"turn_telemetry": "x"}, 1.7e9),
        ("user", {"text": f"{WORD} said"}, {"prompt": "x", "steered": "x", "guest": ["x"]},
         1.7e9),
        ("assistant", {"text": f"{WORD} answered"},
         {"turn_telemetry": {"tokens_in": "many", "duration_ms": [1], "model": 5}}, 1.7e9),
        ("notice", 5, {"ending": {"a": 1}, "outcome": ["error"]}, 1.7e9),
    ])


def ok(response: Any) -> str:
    assert response.status_code == 200, (response.request.url, response.text[:2000])
    return str(response.text)


@pytest.mark.parametrize("make", [bad_times, bad_shapes])
def test_every_read_route_answers_200_and_the_page_says_unreadable(
        api: Api, gateway: Gateway, store: Engine, make: Any) -> None:
    """Fails before the change: `GET /api/sessions` (and every route after it) answered 500,
    `datetime.fromtimestamp` overflowing on 1e20, and content or meta that is not an object
    raised AttributeError in the chat page, the sidebar, the search and the exports."""
    key = make(api, store)
    page = Page(gateway)
    for path in ("/api/sessions", f"/api/sessions/{key}", f"/api/search?q={WORD}",
                 f"/api/sessions/{key}/export", f"/api/sessions/{key}/export?format=markdown",
                 f"/api/sessions/{key}/export?format=jsonl", "/api/export",
                 f"/api/sessions/{key}/map"):
        ok(api.http.get(path))
    for path in ("/chats", "/", f"/search?q={WORD}"):
        ok(page.http.get(path))
    assert "unreadable" in ok(page.http.get(f"/chats/{key}"))


def test_a_time_that_cannot_be_read_is_null_and_named(api: Api, gateway: Gateway,
                                                      store: Engine) -> None:
    """Fails before the change: the routes answered 500 instead of a view."""
    key = bad_times(api, store)
    with store.connect() as conn:  # SQLite keeps text bound to a REAL column as text
        stored = conn.execute(select(func.typeof(transcript_events.c.created_at))
                              .where(transcript_events.c.session_key == key)
                              .order_by(transcript_events.c.seq)).scalars().all()
    assert stored == ["real", "real", "text", "real"]  # what no Hearth writes
    listed = next(s for s in api.http.get("/api/sessions").json()["sessions"]
                  if s["key"] == key)
    assert (listed["created_at"], listed["updated_at"]) == (None, None)
    assert listed["unreadable"] == ["created_at", "updated_at"]
    messages = api.messages(key)
    assert [m["created_at"] for m in messages] == [None] * 4
    assert all(m["unreadable"] == ["created_at"] for m in messages)
    assert [m["text"] for m in messages] == [f"{WORD} one", f"{WORD} two", f"{WORD} three",
                                             f"{WORD} four"]  # the words are still read
    found = api.http.get("/api/search", params={"q": WORD}).json()["results"]
    assert {r["created_at"] for r in found if r["key"] == key} == {None}
    markdown = ok(api.http.get(f"/api/sessions/{key}/export", params={"format": "markdown"}))
    assert "started unreadable" in markdown and "## You (unreadable)" in markdown
    page = Page(gateway)
    assert ok(page.http.get(f"/chats/{key}")).count('class="stamp unreadable"') == 4
    assert ">unreadable</time>" in ok(page.http.get("/chats"))  # the list's "last changed"


def test_content_and_meta_of_the_wrong_shape_read_as_unreadable(api: Api, gateway: Gateway,
                                                                store: Engine) -> None:
    """Fails before the change: `GET /api/sessions/{key}` served them, but the chat page,
    the sidebar (on every page) and the exports raised on them."""
    key = bad_shapes(api, store)
    messages = api.messages(key)
    assert [m["text"] for m in messages[:4]] == ["unreadable"] * 4
    assert messages[0]["unreadable"] == ["content", "meta"]
    assert (messages[0]["content"], messages[0]["meta"]) == ({}, {})
    assert messages[1]["unreadable"] == ["content", "meta"]
    assert messages[4]["text"] == f"{WORD} said" and "unreadable" not in messages[4]
    html = ok(Page(gateway).http.get(f"/chats/{key}"))
    assert '<div class="text">unreadable</div>' in html and f"{WORD} answered" in html
    lines = [json.loads(line) for line in ok(api.http.get(
        f"/api/sessions/{key}/export", params={"format": "jsonl"})).splitlines()]
    assert [line["meta"] for line in lines if line.get("kind") == "user"][1] == {
        "steered": "x", "guest": ["x"]}  # what only the model reads is never exported


def test_an_import_that_would_leave_such_rows_is_refused_whole(api: Api) -> None:
    """Fails before the change: a time of 1e20 and a meta.prompt were imported (201), and
    the chat made answered 500 on every read."""
    chats_before = len(api.http.get("/api/sessions").json()["sessions"])
    header = {"hearth_export": 1, "chats": 1}
    chat = {"type": "chat", "key": "c", "title": "T", "created_at": "2025-01-02T03:04:05"}
    for event, words in (({"created_at": 1e20}, "a time is from 2000-01-01"),
                         ({"meta": {"prompt": {"name": "p", "sent": "obey me"}}},
                          "meta.prompt"),
                         ({"meta": {"secret_key": 1}}, "no Hearth export writes")):
        line = {"type": "event", "event_id": "e1", "kind": "user",
                "content": {"text": "hi"}, "created_at": 1.7e9, **event}
        body = "".join(json.dumps(v) + "\n" for v in (header, chat, line)).encode()
        answer = api.http.post("/api/import", content=body, headers=NDJSON)
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["code"] == "import_invalid" and error["message"].startswith("Line 3: ")
        assert words in error["message"] and "obey" not in error["message"]
    assert len(api.http.get("/api/sessions").json()["sessions"]) == chats_before
