"""Memory: the store and its recall, the documents, what a turn is fed, and the locks at the
store that hold a restricted chat's work to its mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DatabaseError

from hearth.memory.service import Memory
from hearth.models import guard
from hearth.models.types import ModelRequest
from hearth.privacy import reach
from hearth.privacy.scope import answered_by, as_work_of
from hearth.privacy.stores import changes_memory
from hearth.store import memory as store, recall as recall_store
from hearth.store.db import Database
from tests.engine_harness import blocking, make_config, make_engine, new_chat, run, turn
from tests.fakes.model_server import Reply, ScriptedModelServer

# the database's own refusal: SQLite's authorizer, or PostgreSQL's role (migration 0021)
REFUSED = "not authorized|prohibited|permission denied"
INSERT = ("INSERT INTO memory_items(kind, text, fingerprint, written_by, created_at, "
          "updated_at) VALUES ('fact', 'planted', 'f', 'test', 1, 1)")


@pytest.fixture
def memory(db: Database, tmp_path: Path) -> Memory:
    kept = Memory(db, tmp_path / "workspace" / "memory")
    kept.start()
    return kept


def _rows(db: Database) -> int:
    with db.read() as conn:
        return store.count(conn)


# ---------------------------------------------------------------- the store and recall


def test_recall_ranks_by_keywords_and_counts_what_it_recalled(memory: Memory) -> None:
    cat = memory.remember(kind="fact", words="The owner's cat is called Miso",
                          written_by="test", filed_under="chat-1").item
    memory.remember(kind="preference", words="Prefers tea over coffee in the morning",
                    written_by="test", filed_under="chat-1")
    hits = memory.recall("what is my cat called?")
    assert [h.item.id for h in hits] == [cat.id]
    again = memory.recall("cat")
    assert again[0].item.recall_count == 1 and again[0].item.last_recalled_at is not None
    assert memory.recall("the and of") == []  # stopwords alone recall nothing


def test_an_item_said_again_is_kept_once_and_filed_under_no_one_chat(memory: Memory) -> None:
    first = memory.remember(kind="fact", words="Lives in  Lisbon", written_by="a",
                            filed_under="chat-1")
    same = memory.remember(kind="fact", words="lives in lisbon", written_by="b",
                           filed_under="chat-1")
    assert same.created is False and same.item.filed_under == "chat-1"
    shared = memory.remember(kind="fact", words="Lives in Lisbon", written_by="c",
                             filed_under="chat-2")
    assert shared.item.id == first.item.id and shared.item.filed_under is None
    assert memory.forget_chat("chat-1") == []  # another chat stands behind it: it stays


def test_forgetting_a_chat_takes_its_items_and_their_history_lines(memory: Memory) -> None:
    mine = memory.remember(kind="lesson", words="Run the tests before committing",
                           written_by="test", filed_under="chat-9").item
    history = "".join(p.read_text() for p in memory.documents.history.glob("*.md"))
    assert f"memory:{mine.id}" in history
    gone = memory.forget_chat("chat-9")
    assert [i.id for i in gone] == [mine.id]
    assert memory.recall("tests committing") == []
    history = "".join(p.read_text() for p in memory.documents.history.glob("*.md"))
    assert f"memory:{mine.id}" not in history


def test_the_documents_are_indexed_and_fed_to_a_persistent_turn(memory: Memory) -> None:
    (memory.folder / "projects.md").write_text(
        "# Projects\n\nHearth: a gateway written in Python with SQLite.\n")
    (memory.folder / "preferences.md").write_text("# Preferences\n\nAnswers in British English.\n")
    fed = memory.context_for("how is the gateway project going?")
    assert fed.block is not None and "British English" in fed.block  # standing document
    assert "gateway written in Python" in fed.block  # recalled passage of projects.md
    assert fed.sentence.startswith(f"Injected {len(fed.block):,} chars of memory")
    assert "preferences.md" in fed.sentence


def test_an_injected_document_edited_by_hand_is_read_fresh_by_the_next_turn(
        memory: Memory) -> None:
    """Its text is kept between turns by its signature, so the next turn after an edit (the
    same size, even) reads the edit, and an unchanged file is not read again."""
    doc = memory.folder / "preferences.md"
    doc.write_text("# Preferences\n\nAnswers in British English.\n")
    assert "British English" in (memory.context_for("hello").block or "")
    doc.write_text("# Preferences\n\nAnswers in Scottish Gaelic.\n")  # the same length
    assert "Scottish Gaelic" in (memory.context_for("hello").block or "")
    doc.unlink()
    assert "Scottish Gaelic" not in (memory.context_for("hello").block or "")


def test_a_history_file_is_indexed_when_the_gateway_writes_it_and_a_hand_edit_within_the_rescan(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn does not scan the history folder (a file a day) unless the gateway wrote to it
    or HISTORY_RESCAN_SECONDS passed since the last scan (here: since `start`)."""
    day = memory.folder / "history" / "2026-01-02.md"
    day.write_text("# 2026-01-02\n\nThe greenhouse door sticks in the rain.\n")
    assert "greenhouse door" not in (memory.context_for("greenhouse door").block or "")
    memory.remember(kind="fact", words="The gate latch is new", written_by="test",
                    filed_under=None)  # the gateway wrote the history: scanned again
    assert "greenhouse door" in (memory.context_for("greenhouse door").block or "")
    day.write_text("# 2026-01-02\n\nThe porch light flickers at dusk.\n")
    assert "porch light" not in (memory.context_for("porch light").block or "")  # not yet
    monkeypatch.setattr("hearth.memory.service.HISTORY_RESCAN_SECONDS", 0.0)
    assert "porch light" in (memory.context_for("porch light").block or "")


def test_a_turn_with_nothing_to_read_says_so(memory: Memory) -> None:
    fed = memory.context_for("hello there")
    assert fed.block is None and fed.sentence.startswith("Read no memory")


# ---------------------------------------------------------------- the locks at the store


def test_the_statement_screen_knows_a_memory_change() -> None:
    assert changes_memory("INSERT INTO memory_items (kind) VALUES (1)")
    assert changes_memory('update "memory_items" SET text = 1')
    assert changes_memory("DELETE FROM memory_fts_data")
    assert changes_memory("INSERT OR REPLACE INTO memory_items VALUES (1)")
    assert not changes_memory("SELECT * FROM memory_items")
    assert not changes_memory("INSERT INTO transcript_events (seq) VALUES (1)")


@pytest.mark.parametrize("mode", ["incognito", "temporary", "from-a-later-version"])
def test_restricted_work_changes_no_memory_table_by_any_statement(
        db: Database, memory: Memory, mode: str) -> None:
    memory.remember(kind="fact", words="kept before", written_by="t", filed_under=None)
    before = _rows(db)
    with as_work_of("chat-1", mode):
        with pytest.raises(reach.RestrictedSession), db.write() as conn:
            conn.exec_driver_sql(INSERT)  # the screen, through SQLAlchemy
        for sql in (f"WITH x AS (SELECT 1) {INSERT}", "UPDATE memory_items SET text = 'x'",
                    "DELETE FROM memory_items"):  # below SQLAlchemy: the authorizer, the role
            with pytest.raises(Exception, match=REFUSED), db.write() as conn:
                raw = conn.connection.dbapi_connection
                assert raw is not None
                raw.execute(sql)
        with pytest.raises(reach.RestrictedSession):
            memory.remember(kind="fact", words="not kept", written_by="t", filed_under=None)
    assert _rows(db) == before


@pytest.mark.parametrize("mode", ["incognito", "temporary"])
def test_restricted_work_makes_no_grant_or_job_at_the_store(
        db: Database, mode: str) -> None:
    grant = ("INSERT INTO grants(agent, tool, created_at) VALUES ('default', 'shell', 1)")
    with as_work_of("chat-1", mode):
        with pytest.raises(reach.RestrictedSession, match="outlast"), db.write() as conn:
            conn.exec_driver_sql(grant)
        with db.write() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None
            with pytest.raises(Exception, match=REFUSED):
                raw.execute(f"WITH x AS (SELECT 1) {grant}")
    with db.write() as conn:  # the positive control: the owner's answer makes one
        conn.exec_driver_sql(grant)


def test_a_statement_prepared_before_is_still_refused_inside_a_restricted_scope(
        db: Database) -> None:
    """SQLite asks the authorizer only when it prepares a statement; the cached statement
    must be prepared again when the scope changes, or it would slip through."""
    with db.write() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        raw.execute(INSERT)  # prepared and cached in the gateway's own scope
    with as_work_of("chat-1", "incognito"), db.write() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        with pytest.raises(Exception, match=REFUSED):
            raw.execute(INSERT)
    with db.write() as conn:  # and the gateway's own work may change memory again after
        raw = conn.connection.dbapi_connection
        assert raw is not None
        raw.execute(INSERT)


def test_incognito_reads_leave_no_mark_and_temporary_reads_nothing(
        db: Database, memory: Memory) -> None:
    item = memory.remember(kind="fact", words="The boat is moored at Ribeira",
                           written_by="t", filed_under=None).item
    with as_work_of("chat-1", "incognito"):
        assert [h.item.id for h in memory.recall("boat moored")] == [item.id]
    with db.read() as conn:
        kept = store.get(conn, item.id)
    assert kept is not None and kept.recall_count == 0 and kept.last_recalled_at is None
    with as_work_of("chat-2", "temporary"):
        with pytest.raises(reach.RestrictedSession):
            memory.recall("boat")
        with pytest.raises(DatabaseError, match=REFUSED), db.read() as conn:
            recall_store.recall(conn, "boat", limit=5)  # the store itself reads nothing for it
        assert memory.context_for("boat").block is None


def test_a_persistent_chat_is_not_held_positive_control(db: Database, memory: Memory) -> None:
    with as_work_of("chat-1", "persistent"):
        kept = memory.remember(kind="fact", words="Persistent chats keep memory",
                               written_by="t", filed_under="chat-1")
        with db.write() as conn:
            conn.exec_driver_sql(INSERT)
    assert kept.created and _rows(db) >= 2


# ---------------------------------------------------------------- model reach


class _Named:
    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.model_name = model_id
        self.provider = "test"
        self.called = 0

    def stream(self, request: ModelRequest) -> object:
        self.called += 1
        return iter(())


def test_restricted_work_reaches_only_its_own_turns_model() -> None:
    own, other = _Named("own"), _Named("other")
    request = ModelRequest(messages=[], tools=[])
    with as_work_of("chat-1", "incognito"):
        with pytest.raises(reach.OtherModelRefused, match="not told which model"):
            guard.stream(own, request, purpose="turn")  # type: ignore[arg-type]
        with answered_by("own"):
            guard.stream(own, request, purpose="turn")  # type: ignore[arg-type]
            with pytest.raises(reach.OtherModelRefused, match="was not asked"):
                guard.stream(other, request, purpose="turn")  # type: ignore[arg-type]
    with as_work_of("chat-2", "persistent"):
        guard.stream(other, request, purpose="turn")  # type: ignore[arg-type]
    assert (own.called, other.called) == (1, 1)


# ---------------------------------------------------------------- a turn is fed


def test_a_turn_says_what_memory_fed_it(tmp_path: Path,
                                        model_server: ScriptedModelServer) -> None:
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))
    model_server.push(Reply(text="Miso, of course."), Reply(text="I cannot say."))

    async def body() -> tuple[dict[str, object], dict[str, object]]:
        await engine.start()
        await asyncio.to_thread(engine.memory.remember, kind="fact",
                                words="The owner's cat is called Miso", written_by="test",
                                filed_under=None)
        kept = new_chat(engine)
        temporary = engine_chat(engine, "temporary")
        await turn(engine, kept, "What is my cat called?")
        await turn(engine, temporary, "What is my cat called?")
        metas = _final_meta(engine, kept), _final_meta(engine, temporary)
        await engine.close()  # (a temporary chat is forgotten as the engine closes)
        return metas

    kept_meta, temporary_meta = run(body())
    first, second = model_server.calls()
    assert "Miso" in str(first.messages[0]) and "Miso" not in str(second.messages)
    assert str(kept_meta["context_fed"]).startswith("Injected")
    assert str(temporary_meta["context_fed"]).startswith("Read no memory. This chat is "
                                                         "Temporary")


def engine_chat(engine: object, mode: str) -> str:
    from hearth.sessions import chats

    db = engine.db  # type: ignore[attr-defined]
    return blocking(lambda: chats.open_chat(db, memory_mode=mode, trust="trusted")).session.key


def _final_meta(engine: object, key: str) -> dict[str, object]:
    from tests.engine_harness import events

    answers = [e for e in events(engine, key) if e.kind == "assistant"]  # type: ignore[arg-type]
    return dict(answers[-1].meta)


def role_leaks(db: Database) -> list[str]:
    """PostgreSQL: each right a restricted role holds that it must not (migration 0021): a
    change to a memory table or a lasting one, or for a role that reads no memory, a read."""
    must_not = {"hearth_incognito": ({"INSERT", "UPDATE", "DELETE"}, True),
                "hearth_sealed": ({"SELECT", "INSERT", "UPDATE", "DELETE"}, True),
                "hearth_memoryless": ({"SELECT", "INSERT", "UPDATE", "DELETE"}, False)}
    found = []
    with db.read() as conn:
        tables = conn.exec_driver_sql("SELECT tablename FROM pg_tables WHERE schemaname = "
                                      "'public'").scalars().all()
        for role, (rights, lasting_too) in must_not.items():
            for table in tables:
                memory = table.startswith("memory_")
                lasting = lasting_too and table in ("grants", "jobs")
                for right in rights if memory else ({"INSERT", "UPDATE", "DELETE"}
                                                    if lasting else set()):
                    if conn.execute(text("SELECT has_table_privilege(:r, :t, :p)"),
                                    {"r": role, "t": table, "p": right}).scalar():
                        found.append(f"{role} {right} {table}")
    return sorted(found)


def test_census_the_restricted_roles_hold_no_right_they_must_not(db: Database) -> None:
    if db.dialect != "postgresql":
        pytest.skip("the roles are PostgreSQL's (SQLite's authorizer holds the line there)")
    assert role_leaks(db) == []
    with db.write() as conn:  # the positive control: a later memory table that forgot
        conn.exec_driver_sql("CREATE TABLE memory_planted (id integer)")
    assert "hearth_incognito INSERT memory_planted" in role_leaks(db)
