"""The store on its own: migrations, transcript appends and reads, runs, naming, the token."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, event, inspect, select, text

from hearth.home import Home
from hearth.sessions.naming import next_chat_name
from hearth.store import runs, sessions, transcript
from hearth.store.db import MIGRATIONS, Database
from hearth.store.errors import AlreadyAppended, SessionNotFound, WriterClaimLost
from hearth.store.schema import metadata, sessions as sessions_table
from tests.support.store import migrated_store

TABLES = {"sessions", "transcript_events", "runs", "tool_calls", "audit"}


def head_revision() -> str:
    """The newest migration (0001 when the store was first written; later ones build on it)."""
    script = ScriptDirectory(str(MIGRATIONS))
    heads = script.get_heads()
    assert len(heads) == 1, f"the migrations must have one head, not {heads}"
    assert "0001" in {rev.revision for rev in script.walk_revisions()}
    return heads[0]


def make_session(db: Database, key: str = "s1", chat_number: int | None = None) -> None:
    with db.write() as conn:
        sessions.insert(conn, key=key, tab_id=f"tab-{key}", memory_mode="persistent",
                        chat_number=chat_number)


def append(db: Database, key: str, body: str, **kwargs: Any) -> transcript.EventRow:
    with db.write() as conn:
        return transcript.append(conn, key, "user", {"text": body}, **kwargs)


def events_of(db: Database, key: str) -> list[transcript.EventRow]:
    with db.read() as conn:
        return transcript.window(conn, key, limit=10_000)


def session_of(db: Database, key: str) -> sessions.SessionRow:
    with db.read() as conn:
        row = sessions.get(conn, key)
    assert row is not None
    return row


# ---------------------------------------------------------------- migrations


def test_upgrade_creates_the_tables_at_head_in_wal_mode(tmp_path: Path) -> None:
    with migrated_store(tmp_path, template=False) as db:  # Alembic from nothing, not a copy
        assert TABLES <= set(inspect(db.engine).get_table_names())
        with db.read() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.execute(text("SELECT version_num FROM alembic_version")
                                ).scalars().all() == [head_revision()]


def test_upgrade_is_idempotent_and_keeps_data(db: Database) -> None:
    make_session(db, "kept")
    append(db, "kept", "hello")
    db.upgrade()
    db.upgrade()
    assert [e.content["text"] for e in events_of(db, "kept")] == ["hello"]
    with db.read() as conn:
        assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1


# Tables the migrations make that the metadata does not describe: SQLite's FTS5 indexes with
# their shadow tables, kept by triggers (memory_fts*, migration 0004; chat_search*, migration
# 0013, with chat_search_messages, the message each of its rows is). Left out of the
# comparison by Alembic's own filter, so any other difference still fails.
OUTSIDE_METADATA = ("memory_fts", "chat_search")


def _described(name: str | None, type_: str, _parents: object) -> bool:
    return not (type_ == "table" and (name or "").startswith(OUTSIDE_METADATA))


def test_migrations_build_exactly_the_schema_the_code_uses(tmp_path: Path) -> None:
    with migrated_store(tmp_path, template=False) as db, db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_name": _described})
        diff = compare_metadata(context, metadata)
    assert diff == []


# ---------------------------------------------------------------- transcript.append


def test_append_numbers_chains_and_counts(db: Database) -> None:
    make_session(db)
    made = [append(db, "s1", f"m{i}") for i in range(5)]
    assert [e.seq for e in made] == [1, 2, 3, 4, 5]
    assert made[0].parent_event_id is None
    for earlier, later in zip(made, made[1:], strict=False):
        assert later.parent_event_id == earlier.event_id
    stored = events_of(db, "s1")
    assert [(e.seq, e.event_id, e.parent_event_id) for e in stored] == [
        (e.seq, e.event_id, e.parent_event_id) for e in made]
    row = session_of(db, "s1")
    assert (row.last_seq, row.message_count) == (5, 5)
    with db.read() as conn:
        head = conn.execute(select(sessions_table.c.head_event_id)
                            .where(sessions_table.c.key == "s1")).scalar()
    assert head == made[-1].event_id


def test_sequences_are_per_session(db: Database) -> None:
    make_session(db, "a")
    make_session(db, "b")
    append(db, "a", "a1")
    append(db, "b", "b1")
    append(db, "a", "a2")
    assert [e.seq for e in events_of(db, "a")] == [1, 2]
    assert [e.content["text"] for e in events_of(db, "a")] == ["a1", "a2"]
    assert [e.seq for e in events_of(db, "b")] == [1]
    assert session_of(db, "b").message_count == 1


def test_append_to_an_unknown_session_raises(db: Database) -> None:
    with pytest.raises(SessionNotFound), db.write() as conn:
        transcript.append(conn, "nobody", "user", {"text": "x"})
    with db.read() as conn:
        assert conn.execute(text("SELECT count(*) FROM transcript_events")).scalar() == 0


def test_the_same_idempotency_key_twice_is_refused_and_changes_nothing(db: Database) -> None:
    make_session(db)
    first = append(db, "s1", "once", idempotency_key="k1")
    with db.write() as conn:  # the refusal commits: it must not have written anything itself
        with pytest.raises(AlreadyAppended):
            transcript.append(conn, "s1", "user", {"text": "twice"}, idempotency_key="k1")
    stored = events_of(db, "s1")
    assert [(e.event_id, e.content["text"]) for e in stored] == [(first.event_id, "once")]
    row = session_of(db, "s1")
    assert (row.last_seq, row.message_count) == (1, 1)
    # another key is fine, and the same key in another session too
    assert append(db, "s1", "other", idempotency_key="k2").seq == 2
    make_session(db, "s2")
    assert append(db, "s2", "elsewhere", idempotency_key="k1").seq == 1


def test_the_writer_claim_is_checked_inside_append(db: Database) -> None:
    make_session(db)
    with db.write() as conn:
        assert sessions.claim_writer(conn, "s1", "run-a")
        assert not sessions.claim_writer(conn, "s1", "run-b")
    with db.write() as conn:  # committed on purpose: a refused append must write nothing
        with pytest.raises(WriterClaimLost):
            transcript.append(conn, "s1", "assistant", {"text": "intruder"}, writer="run-b")
    assert events_of(db, "s1") == []
    assert session_of(db, "s1").last_seq == 0

    held = append(db, "s1", "owner", writer="run-a", run_id="run-a")
    assert held.seq == 1 and held.run_id == "run-a"

    with db.write() as conn:
        sessions.release_writer(conn, "s1", "run-b")  # not the holder: changes nothing
    assert session_of(db, "s1").writer_run_id == "run-a"
    with db.write() as conn:
        sessions.release_writer(conn, "s1", "run-a")
    assert session_of(db, "s1").writer_run_id is None
    with db.write() as conn:
        with pytest.raises(WriterClaimLost):
            transcript.append(conn, "s1", "assistant", {"text": "late"}, writer="run-a")
    assert [e.content["text"] for e in events_of(db, "s1")] == ["owner"]
    assert session_of(db, "s1").message_count == 1


# ---------------------------------------------------------------- reads


def test_window_and_after_return_the_right_slices(db: Database) -> None:
    make_session(db)
    make_session(db, "noise")
    for i in range(1, 11):
        append(db, "s1", f"m{i}")
        append(db, "noise", f"n{i}")
    with db.read() as conn:
        def seqs(rows: list[transcript.EventRow]) -> list[int]:
            assert all(r.session_key == "s1" for r in rows)
            return [r.seq for r in rows]

        assert seqs(transcript.window(conn, "s1", limit=3)) == [8, 9, 10]
        assert seqs(transcript.window(conn, "s1", limit=3, before=5)) == [2, 3, 4]
        assert seqs(transcript.window(conn, "s1", limit=10, before=3)) == [1, 2]
        assert seqs(transcript.window(conn, "s1", limit=50)) == list(range(1, 11))
        assert transcript.window(conn, "s1", limit=5, before=1) == []
        assert [r.content["text"] for r in transcript.window(conn, "s1", limit=2)] == [
            "m9", "m10"]
        assert seqs(transcript.after(conn, "s1", 7)) == [8, 9, 10]
        assert seqs(transcript.after(conn, "s1", 0, limit=4)) == [1, 2, 3, 4]
        assert transcript.after(conn, "s1", 10) == []


# What a plan's lines say, by engine: a full scan, a sort of its own, a lookup by an index.
# PostgreSQL is asked with enable_seqscan off: it then scans a table only where no index
# could serve (on tables this small it would scan them anyway). It may sort what an index
# found (a bitmap lookup, then a sort of those rows alone), a cost bounded by the answer, so
# its sorts are not counted.
PLAN_WORDS = {"sqlite": ("SCAN", "TEMP B-TREE", "SEARCH"),
              "postgresql": ("Seq Scan", None, "Index")}


def _plans(conn: Connection, captured: list[tuple[str, Any]]) -> dict[str, list[str]]:
    sqlite = conn.dialect.name == "sqlite"
    if not sqlite:  # its statistics first: without them it guesses one row and sorts it
        conn.exec_driver_sql("ANALYZE")
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
    plans = {}
    for statement, parameters in captured:
        if statement.lstrip().split()[0].upper() not in ("SELECT", "UPDATE", "INSERT"):
            continue
        explain = "EXPLAIN QUERY PLAN" if sqlite else "EXPLAIN"
        rows = conn.exec_driver_sql(f"{explain} {statement}", parameters).all()
        plans[statement] = [str(row[-1]).strip().removeprefix("->").strip() for row in rows]
    return plans


def test_append_and_window_use_keys_not_scans(db: Database) -> None:
    make_session(db)
    make_session(db, "other")
    for i in range(200):
        append(db, "s1", f"m{i}", idempotency_key=f"k{i}")
        append(db, "other", f"o{i}")
    with db.write() as conn:
        assert sessions.claim_writer(conn, "s1", "run-a")

    captured: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any,
                _context: Any, _executemany: bool) -> None:
        captured.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", capture)
    try:
        with db.write() as conn:
            transcript.append(conn, "s1", "assistant", {"text": "new"}, writer="run-a",
                              idempotency_key="fresh")
        appended = list(captured)
        captured.clear()
        with db.read() as conn:
            transcript.window(conn, "s1", limit=20, before=150)
            transcript.window(conn, "s1", limit=20)
            transcript.after(conn, "s1", 180)
        reads = list(captured)
    finally:
        event.remove(db.engine, "before_cursor_execute", capture)

    with db.read() as conn:
        append_plans = _plans(conn, appended)
        read_plans = _plans(conn, reads)
    verbs = sorted(s.lstrip().split()[0].upper() for s in append_plans)
    assert verbs == ["INSERT", "SELECT", "UPDATE"], verbs  # a fixed few, whatever the length
    assert len(read_plans) == 3
    scan, sort, lookup = PLAN_WORDS[db.dialect]
    for statement, details in {**append_plans, **read_plans}.items():
        assert not any(d.startswith(scan) for d in details), (statement[:60], details)
        assert sort is None or not any(sort in d for d in details), (statement[:60], details)
        if not statement.lstrip().upper().startswith("INSERT"):
            assert any(lookup in d for d in details), (statement[:60], details)


# ---------------------------------------------------------------- runs


def new_run(db: Database, key: str) -> runs.RunRow:
    run_id = runs.new_run_id()
    with db.write() as conn:
        runs.insert(conn, run_id=run_id, session_key=key, tab_id=f"tab-{key}", generation=0,
                    principal="owner")
    return get_run(db, run_id)


def get_run(db: Database, run_id: str) -> runs.RunRow:
    with db.read() as conn:
        row = runs.get(conn, run_id)
    assert row is not None
    return row


def next_up(db: Database, key: str) -> str | None:
    with db.read() as conn:
        row = runs.next_admitted(conn, key)
    return row.run_id if row else None


def test_runs_are_admitted_and_queue_fifo_per_session(db: Database) -> None:
    make_session(db, "a")
    make_session(db, "b")
    first = new_run(db, "a")
    other = new_run(db, "b")
    second = new_run(db, "a")
    assert first.status == "admitted" and first.ending is None and not first.ended
    assert first.id < second.id
    assert next_up(db, "a") == first.run_id
    assert next_up(db, "b") == other.run_id
    with db.write() as conn:
        assert runs.mark_running(conn, first.run_id)
    assert next_up(db, "a") == second.run_id
    with db.read() as conn:
        current = runs.current(conn, "a")
        assert current is not None and current.run_id == first.run_id
        assert runs.any_active(conn, "a") and not runs.any_active(conn, "nobody")


def test_mark_running_only_from_admitted(db: Database) -> None:
    make_session(db)
    run = new_run(db, "s1")
    with db.write() as conn:
        assert runs.mark_running(conn, run.run_id)
        assert not runs.mark_running(conn, run.run_id)
    running = get_run(db, run.run_id)
    assert running.status == "running" and running.started_at is not None
    ended = new_run(db, "s1")
    with db.write() as conn:
        assert runs.finish(conn, ended.run_id, status="stopped", ending="stopped", sentence="s")
        assert not runs.mark_running(conn, ended.run_id)
        assert not runs.mark_running(conn, "run_nothing")
    assert get_run(db, ended.run_id).status == "stopped"


def test_a_run_is_finished_once(db: Database) -> None:
    make_session(db)
    run = new_run(db, "s1")
    with db.write() as conn:
        assert runs.mark_running(conn, run.run_id)
        assert runs.finish(conn, run.run_id, status="complete", ending="complete",
                           sentence="The agent answered.")
        assert not runs.finish(conn, run.run_id, status="error", ending="internal_error",
                               sentence="Something else.")
    done = get_run(db, run.run_id)
    assert (done.status, done.ending, done.sentence) == (
        "complete", "complete", "The agent answered.")
    assert done.ended and done.ended_at is not None
    waiting = new_run(db, "s1")
    with db.write() as conn, pytest.raises(ValueError):
        runs.finish(conn, waiting.run_id, status="running", ending="x", sentence="x")
    assert get_run(db, waiting.run_id).status == "admitted"


def test_sessions_with_admitted_are_ordered_by_their_oldest_waiting_run(db: Database) -> None:
    for key in ("a", "b", "c"):
        make_session(db, key)
    a1 = new_run(db, "a")
    new_run(db, "b")
    new_run(db, "a")
    c1 = new_run(db, "c")
    with db.read() as conn:
        assert runs.sessions_with_admitted(conn) == ["a", "b", "c"]
    with db.write() as conn:
        assert runs.mark_running(conn, a1.run_id)  # a's oldest *waiting* run is now its 2nd
        assert runs.finish(conn, c1.run_id, status="abandoned", ending="x", sentence="x")
    with db.read() as conn:
        assert runs.sessions_with_admitted(conn) == ["b", "a"]


# ---------------------------------------------------------------- naming


def test_the_first_chat_is_chat_1(db: Database) -> None:
    with db.write() as conn:
        assert next_chat_name(conn, second=1764450000) == ("chat-1-1764450000", 1)


def test_numbers_carry_on_past_the_highest_kept(db: Database) -> None:
    make_session(db, "chat-3-100", chat_number=3)
    make_session(db, "chat-41-100", chat_number=41)
    make_session(db, "named-by-hand")
    with db.write() as conn:
        assert next_chat_name(conn, second=200) == ("chat-42-200", 42)


def test_a_name_already_held_is_stepped_past(db: Database) -> None:
    make_session(db, "chat-4-90", chat_number=4)
    make_session(db, "chat-5-100", chat_number=None)  # named by hand, counted by nobody
    with db.write() as conn:
        assert next_chat_name(conn, second=100) == ("chat-6-100", 6)
        assert next_chat_name(conn, second=101) == ("chat-5-101", 5)


# ---------------------------------------------------------------- the CLI and the home


def _cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HEARTH_", "OPENAI_", "ANTHROPIC_"))}
    env["HEARTH_HOME"] = str(home)
    return env


def test_hearth_db_upgrade_makes_the_database_and_can_run_again(tmp_path: Path) -> None:
    home = tmp_path / "cli-home"
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "hearth", "db", "upgrade"],
                              env=_cli_env(home), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "up to date" in done.stdout
    assert (home / "hearth.db").is_file()
    database = Database(f"sqlite:///{home / 'hearth.db'}")
    try:
        assert TABLES <= set(inspect(database.engine).get_table_names())
        with database.read() as conn:
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            assert version == head_revision()
    finally:
        database.close()


def test_the_token_is_made_private_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEARTH_TOKEN", raising=False)
    home = Home(tmp_path / "tok")
    assert home.token(create=False) is None
    first = home.token()
    assert first and len(first) >= 32
    assert stat.S_IMODE(home.token_file.stat().st_mode) == 0o600
    assert home.token() == first
    assert Home(tmp_path / "tok").token(create=False) == first


def test_hearth_token_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Home(tmp_path / "tok")
    monkeypatch.delenv("HEARTH_TOKEN", raising=False)
    from_file = home.token()
    monkeypatch.setenv("HEARTH_TOKEN", "from-the-environment")
    assert home.token() == "from-the-environment"
    assert home.token_file.read_text().strip() == from_file


def test_an_empty_token_file_never_gives_an_empty_token(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEARTH_TOKEN", raising=False)
    home = Home(tmp_path / "tok")
    home.root.mkdir(parents=True)
    home.token_file.write_text("")
    token = home.token()
    assert token, "an empty bearer token would let an empty credential through"
    assert home.token() == token


def test_promises_are_synced_and_bookkeeping_is_not(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path}/sync.db")
    db.upgrade()
    with db.write() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
    with db.write(durable=False) as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
    with db.write() as conn:  # the same pooled connection goes back to FULL
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
    relaxed = Database(f"sqlite:///{tmp_path}/relaxed.db", synchronous="NORMAL")
    relaxed.upgrade()
    with relaxed.write() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1
