"""The transcript's tree, over random histories: after any appends and head moves, the events
marked on the path are exactly the head's ancestors, and the session map, the message list and
the doors' address (`visible_at`) agree on every visible index."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hearth.engine.operations.chat_map import marks
from hearth.sessions import chats
from hearth.store import branches, sessions, transcript
from hearth.store.db import Database
from tests.support.store import migrated_store

KINDS = ("user", "assistant", "tool_call", "notice")
NUMBERS = itertools.count()
Op = tuple[str, int]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    """One store for the module's trees (the folder's `db` is one a test)."""
    with migrated_store(tmp_path_factory.mktemp("tree")) as database:
        yield database


def _play(conn: Any, key: str, ops: list[Op]) -> None:
    """Append events (a run per user message) or move the head to an earlier event."""
    made: list[str] = []
    run = "r0"
    for op, n in ops:
        if op == "move" and made:
            branches.move_head(conn, key, made[n % len(made)])
            continue
        kind = KINDS[n % len(KINDS)]
        run = f"r{len(made)}" if kind == "user" else run
        content: dict[str, Any] = ({"name": "read_file", "call_id": f"c{len(made)}"}
                                   if kind == "tool_call" else {"text": f"{kind} {len(made)}"})
        meta = {"ending": "model_error"} if kind == "notice" else {}
        made.append(transcript.append(conn, key, kind, content, meta=meta, run_id=run).event_id)


def _ancestors(conn: Any, key: str) -> set[str]:
    head = conn.exec_driver_sql("SELECT head_event_id FROM sessions WHERE key = ?",
                                (key,)).scalar_one()
    parents = {e.event_id: e.parent_event_id for e in _all(conn, key)}
    found: set[str] = set()
    while head is not None:
        found.add(head)
        head = parents[head]
    return found


def _all(conn: Any, key: str) -> list[transcript.EventRow]:
    rows = conn.exec_driver_sql(
        "SELECT session_key, seq, event_id, parent_event_id, idempotency_key, kind, content, "
        "meta, source_channel, run_id, created_at, off_path FROM transcript_events "
        "WHERE session_key = ? ORDER BY seq", (key,)).all()
    return [transcript.EventRow.of(r[:-1]) for r in rows]


ops = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "move"]),
                         st.integers(0, 50)), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=ops)
def test_the_path_the_map_and_the_doors_agree(db: Database, history: list[Op]) -> None:
    key = f"chat-{next(NUMBERS)}"
    with db.write() as conn:
        sessions.insert(conn, key=key, tab_id=key, memory_mode="persistent", chat_number=None)
        _play(conn, key, history)
    with db.read() as conn:
        on_path = {e.event_id for e in transcript.window(conn, key, 10_000)}
        assert on_path == _ancestors(conn, key)
        path = branches.path(conn, key)
        window = chats._window(conn, key, 3, None)  # a last page, as a client first reads
        addressed = {i: branches.visible_at(conn, key, i) for i in range(len(path) + 1)}
    for event_id, index in window.visible_indexes().items():
        assert addressed[index] is not None and addressed[index].event_id == event_id
    for mark in marks(path, {}):
        found = addressed[mark["visibleIndex"]] if mark["visibleIndex"] is not None else None
        if mark["kind"] == "user":
            assert found is not None and found.seq == mark["seq"]
        elif found is not None:  # a turn's marks jump to its last message (or its question)
            assert found.kind in branches.VISIBLE and found.seq <= max(
                e.seq for e in path if e.run_id == mark["run_id"])


def test_variants_are_siblings_and_choosing_one_brings_its_continuation(db: Database,
                                                                      tmp_path: Path) -> None:
    with db.write() as conn:
        sessions.insert(conn, key="v", tab_id="v", memory_mode="persistent", chat_number=None)
        ask = transcript.append(conn, "v", "user", {"text": "q"})
        first = transcript.append(conn, "v", "user", {"text": "a1"})  # (a user kind: kept)
        later = transcript.append(conn, "v", "user", {"text": "more"})
        branches.move_head(conn, "v", ask.event_id)
        second = transcript.append(conn, "v", "user", {"text": "a2"})
        found = branches.variants(conn, "v", [second])[second.event_id]
        assert (found.index, found.count) == (1, 2)
        assert branches.newest_leaf(conn, "v", first.event_id) == later.event_id
        branches.move_head(conn, "v", branches.newest_leaf(conn, "v", first.event_id))
        assert [e.content["text"] for e in transcript.window(conn, "v", 10)] == ["q", "a1", "more"]
        assert sessions.get(conn, "v").message_count == 3  # type: ignore[union-attr]


def test_a_summary_s_fingerprint_changes_when_the_head_leaves_what_it_summarized(
        db: Database) -> None:
    """A rewind or an edit under a summary makes it stale (the model reads the turns again);
    a branch begun after it leaves it as it was."""
    from hearth.store import summaries

    with db.write() as conn:
        sessions.insert(conn, key="f", tab_id="f", memory_mode="persistent", chat_number=None)
        events = [transcript.append(conn, "f", "user", {"text": str(i)}) for i in range(6)]
        made = summaries.fingerprint(conn, "f", 1, 4)
        branches.move_head(conn, "f", events[4].event_id)  # after the summarized range
        transcript.append(conn, "f", "user", {"text": "later"})
        assert summaries.fingerprint(conn, "f", 1, 4) == made
        branches.move_head(conn, "f", events[2].event_id)  # inside it
        transcript.append(conn, "f", "user", {"text": "edited"})
        assert summaries.fingerprint(conn, "f", 1, 4) != made
