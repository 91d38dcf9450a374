"""Search across chats in the store: the FTS5 index kept by migration 0013's triggers (what
goes in, what never does, what leaves with a deleted chat, down to the index's own bytes),
the query made safe, the filters, the path, paging, and the LIKE scan other databases use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import Connection, text, update

from hearth.sessions import forget
from hearth.store import search, sessions, transcript
from hearth.store.db import MIGRATIONS, Database
from hearth.store.schema import sessions as sessions_table, transcript_events
from tests.support.search import HOSTILE

WORD = "quokkaplum"  # a word no generated text holds
def chat(db: Database, key: str, mode: str = "persistent", **filing: Any) -> str:
    with db.write() as conn:
        sessions.insert(conn, key=key, tab_id=f"tab-{key}", memory_mode=mode, chat_number=None,
                        title=filing.pop("title", None))
        if filing:
            conn.execute(update(sessions_table).where(sessions_table.c.key == key)
                         .values(**filing))
    return key


def say(db: Database, key: str, *texts: str, kind: str = "user") -> list[int]:
    with db.write() as conn:
        return [transcript.append(conn, key, kind, {"text": text}).seq for text in texts]


def found(db: Database, query: str, **filters: Any) -> list[tuple[str, int]]:
    with db.read() as conn:
        hits = search.search(conn, query, search.Filters(**filters), limit=50).hits
    return [(hit.session_key, hit.seq) for hit in hits]


def index_holds(db: Database, word: str) -> dict[str, bool]:
    """Whether the index's text (its content: the view of the indexed messages' text) or its
    segments (the bytes FTS5 keeps its words in) hold `word`; and checks that the index
    matches its content (FTS5's own integrity check, which raises if not)."""
    if db.dialect == "postgresql":
        return _postgres_index_holds(db, word)
    with db.read() as conn:
        texts = conn.exec_driver_sql("SELECT text FROM chat_search_text").scalars().all()
        blocks = conn.exec_driver_sql("SELECT block FROM chat_search_data").scalars().all()
    with db.write() as conn:
        conn.exec_driver_sql("INSERT INTO chat_search(chat_search, rank) "
                             "VALUES ('integrity-check', 1)")
    return {"text": any(word in str(t) for t in texts),
            "segments": any(word.encode() in bytes(b) for b in blocks if b)}


def _postgres_index_holds(db: Database, word: str) -> dict[str, bool]:
    """PostgreSQL's: whether a live row's words hold `word`, and whether any page of the
    index's table holds its bytes (live or dead rows alike: pageinspect reads the pages)."""
    with db.write() as conn:
        conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pageinspect")
        live = conn.execute(text(
            "SELECT count(*) FROM chat_search_messages "
            "WHERE words @@ to_tsquery('simple', hearth_fold(:w))"), {"w": word}).scalar_one()
        pages = conn.exec_driver_sql(
            "SELECT get_raw_page('chat_search_messages', b::int) FROM generate_series(0, "
            "pg_relation_size('chat_search_messages') / 8192 - 1) AS b").scalars().all()
    return {"text": live > 0, "segments": any(word.encode() in bytes(p) for p in pages)}


# ---------------------------------------------------------------- what is indexed


def test_words_said_in_a_kept_chat_are_found_with_a_marked_snippet(db: Database) -> None:
    key = chat(db, "kept")
    say(db, key, f"Tell me about the {WORD} tree in my garden.")
    say(db, key, f"The {WORD} grows best in full sun.", kind="assistant")
    say(db, key, "unrelated words")
    with db.read() as conn:
        hits = search.search(conn, WORD, search.Filters()).hits
    assert sorted((h.seq, h.kind) for h in hits) == [(1, "user"), (2, "assistant")]
    for hit in hits:
        assert f"{search.MARK_OPEN}{WORD}{search.MARK_CLOSE}" in hit.snippet
        assert hit.session_key == "kept" and hit.last_seq == 3 and not hit.off_path


def test_tool_calls_notices_and_other_kinds_are_not_indexed(db: Database) -> None:
    key = chat(db, "kept")
    with db.write() as conn:
        transcript.append(conn, key, "tool_call", {"name": "shell", "text": WORD})
        transcript.append(conn, key, "notice", {"text": WORD})
        transcript.append(conn, key, "assistant", {"text": 42})  # not text: left out, no error
        transcript.append(conn, key, "user", {"other": WORD})
    assert found(db, WORD) == []
    assert index_holds(db, WORD) == {"text": False, "segments": False}


@pytest.mark.parametrize("mode", ["incognito", "temporary", "unknown-mode"])
def test_a_restricted_chats_words_never_reach_the_index(db: Database, mode: str) -> None:
    secret = chat(db, "secret", mode)
    say(db, secret, f"my {WORD} is hidden")
    say(db, secret, f"noted: {WORD}", kind="assistant")
    assert found(db, WORD) == []
    assert index_holds(db, WORD) == {"text": False, "segments": False}
    kept = chat(db, "kept")  # positive control: the same word in a kept chat is found
    say(db, kept, f"my {WORD} is here")
    assert found(db, WORD) == [("kept", 1)]
    assert index_holds(db, WORD) == {"text": True, "segments": True}


def test_a_deleted_chat_leaves_the_results_and_the_index_bytes(db: Database,
                                                               tmp_path: Path) -> None:
    gone, kept = chat(db, "gone"), chat(db, "kept")
    say(db, gone, *(f"{WORD} number {n}" for n in range(30)))
    if db.dialect == "sqlite":  # merged into one segment, as a long-used index's old words are
        with db.write() as conn:
            conn.exec_driver_sql("INSERT INTO chat_search(chat_search) VALUES ('optimize')")
    say(db, kept, *(f"kept words number {n}" for n in range(30)))
    assert len(found(db, WORD)) == 30 and index_holds(db, WORD)["segments"]
    with db.read() as conn:
        row = sessions.get(conn, gone)
    assert row is not None
    done = forget.purge(db, row, tmp_path / "chats")  # the deletion's own purge
    assert done.row_removed
    db.truncate_wal()  # and what the deletion does next (PostgreSQL: VACUUM)
    assert found(db, WORD) == []
    assert index_holds(db, WORD) == {"text": False, "segments": False}
    with db.read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM chat_search_messages "
                                    "WHERE session_key = 'gone'").scalar() == 0
    assert len(found(db, "kept")) == 30  # the other chat is still there


def test_a_chat_no_longer_persistent_leaves_the_index(db: Database) -> None:
    key = chat(db, "changed")
    say(db, key, f"a {WORD} here")
    assert found(db, WORD) == [("changed", 1)]
    with db.write() as conn:  # no code path does this today; the trigger holds if one does
        conn.execute(update(sessions_table).where(sessions_table.c.key == key)
                     .values(memory_mode="incognito"))
    if db.dialect == "postgresql":  # its rows are dead at once; their bytes go at a VACUUM
        db.truncate_wal()
    assert found(db, WORD) == []
    assert index_holds(db, WORD) == {"text": False, "segments": False}
    say(db, key, f"another {WORD}")
    assert found(db, WORD) == []


def test_a_message_whose_text_changes_is_indexed_as_it_reads_now(db: Database) -> None:
    key = chat(db, "kept")
    say(db, key, f"the old {WORD}", "other words")
    with db.write() as conn:  # nothing changes a text today; the index holds if it does
        conn.execute(update(transcript_events)
                     .where(transcript_events.c.session_key == key, transcript_events.c.seq == 1)
                     .values(content={"text": "a brand new sentence"}))
    assert found(db, WORD) == [] and found(db, "brand new") == [("kept", 1)]
    assert index_holds(db, WORD) == {"text": False, "segments": True}  # until a merge
    with db.write() as conn:
        conn.execute(update(transcript_events)
                     .where(transcript_events.c.session_key == key, transcript_events.c.seq == 1)
                     .values(content={"name": "no text any more"}))
    assert found(db, "brand") == []
    index_holds(db, "brand")  # the integrity check passes


def test_the_highlight_marks_are_taken_out_of_indexed_text(db: Database) -> None:
    key = chat(db, "kept")
    say(db, key, f"{search.MARK_CLOSE}odd {search.MARK_OPEN}{WORD} text{search.MARK_CLOSE}")
    with db.read() as conn:
        [hit] = search.search(conn, WORD, search.Filters()).hits
    assert hit.snippet == f"odd {search.MARK_OPEN}{WORD}{search.MARK_CLOSE} text"


# ---------------------------------------------------------------- the query


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(db: Database, query: str) -> None:
    key = chat(db, "kept")
    say(db, key, 'a OR b NEAR(c d) "quoted" -minus * col:word ^start', "plain words here")
    with db.read() as conn:
        for fn in (search.search, search.scan):
            assert isinstance(fn(conn, query, search.Filters()), search.Found)


def test_only_punctuation_finds_nothing_and_operators_are_plain_words(db: Database) -> None:
    key = chat(db, "kept")
    say(db, key, "cats OR dogs", "cats and birds", "dogs alone")
    assert found(db, "!!! ... ---") == []
    assert found(db, '"') == []
    assert found(db, "cats OR dogs") == [("kept", 1)]  # OR is a word to find, not an operator
    assert found(db, "NEAR(cats") == []  # "near" is required too, and is in no message


def test_accents_case_phrases_and_prefixes(db: Database) -> None:
    key = chat(db, "kept")
    say(db, key, "Un café crème, s'il vous plaît", "the deployment script failed",
        "script the deployment")
    assert found(db, "cafe") == [("kept", 1)]
    assert found(db, "CAFÉ CREME") == [("kept", 1)]
    assert sorted(found(db, "deployment script")) == [("kept", 2), ("kept", 3)]
    assert found(db, '"deployment script"') == [("kept", 2)]  # a phrase keeps its order
    assert sorted(found(db, "deploy*")) == [("kept", 2), ("kept", 3)]
    assert found(db, "deploy") == []  # whole words unless asked
    assert found(db, "de*") == []  # a prefix needs three letters; "de" is a word here


def test_ranked_by_relevance_then_newest(db: Database) -> None:
    key = chat(db, "kept")
    diluted = f"{WORD} once among many other words that dilute it a great deal"
    say(db, key, diluted, f"{WORD} {WORD} {WORD}", diluted)  # the same rank: newest first
    assert found(db, WORD) == [("kept", 2), ("kept", 3), ("kept", 1)]


# ---------------------------------------------------------------- filters and the path


def test_archived_chats_are_left_out_unless_asked(db: Database) -> None:
    say(db, chat(db, "shelved", archived=True), f"{WORD} in the archive")
    say(db, chat(db, "kept"), f"{WORD} in view")
    assert found(db, WORD) == [("kept", 1)]
    assert found(db, WORD, archived=True) == [("shelved", 1)]


def test_folder_tag_and_pinned_each_narrow(db: Database) -> None:
    say(db, chat(db, "plain"), WORD)
    say(db, chat(db, "filed", folder="Work"), WORD)
    say(db, chat(db, "tagged", tags=["garden", "home"]), WORD)
    say(db, chat(db, "pinned", pinned=True), WORD)
    assert len(found(db, WORD)) == 4
    assert found(db, WORD, folder="Work") == [("filed", 1)]
    assert found(db, WORD, tag="home") == [("tagged", 1)]
    assert found(db, WORD, pinned=True) == [("pinned", 1)]
    assert sorted(found(db, WORD, pinned=False)) == [("filed", 1), ("plain", 1), ("tagged", 1)]
    assert found(db, WORD, folder="Elsewhere") == []


def test_a_date_range_narrows_to_the_messages_said_in_it(db: Database) -> None:
    key = chat(db, "kept")
    seqs = say(db, key, *(f"{WORD} day {day}" for day in range(10)))
    day = 86_400.0
    with db.write() as conn:  # said one a day, from day 0 on; the index keeps its copy
        for n, seq in enumerate(seqs):
            conn.execute(update(transcript_events).where(transcript_events.c.session_key == key,
                                                         transcript_events.c.seq == seq)
                         .values(created_at=n * day + 10))
            conn.execute(text("UPDATE chat_search_messages SET created_at = :at "
                              "WHERE session_key = :key AND seq = :seq"),
                         {"at": n * day + 10, "key": key, "seq": seq})
    assert sorted(s for _, s in found(db, WORD, since=3 * day)) == seqs[3:]
    assert sorted(s for _, s in found(db, WORD, until=3 * day)) == seqs[:3]
    assert sorted(s for _, s in found(db, WORD, since=2 * day, until=5 * day)) == seqs[2:5]
    assert found(db, WORD, since=20 * day) == []
    assert found(db, WORD, until=0) == []


def test_a_message_off_the_path_is_not_found_unless_asked(db: Database) -> None:
    key = chat(db, "kept")
    say(db, key, f"{WORD} question")
    say(db, key, f"{WORD} first answer", kind="assistant")
    say(db, key, f"{WORD} second answer", kind="assistant")
    with db.write() as conn:  # the first answer becomes an earlier variant
        conn.execute(update(transcript_events)
                     .where(transcript_events.c.session_key == key, transcript_events.c.seq == 2)
                     .values(off_path=True))
    assert sorted(found(db, WORD)) == [("kept", 1), ("kept", 3)]
    with db.read() as conn:
        every = search.search(conn, WORD, search.Filters(off_path=True)).hits
    assert sorted((h.seq, h.off_path) for h in every) == [(1, False), (2, True), (3, False)]
    with db.write() as conn:  # and back on the path
        conn.execute(update(transcript_events)
                     .where(transcript_events.c.session_key == key, transcript_events.c.seq == 2)
                     .values(off_path=False))
    assert sorted(found(db, WORD)) == [("kept", 1), ("kept", 2), ("kept", 3)]


# ---------------------------------------------------------------- paging


def test_pages_walk_every_hit_once_across_windows(db: Database) -> None:
    key = chat(db, "kept")
    total = search.WINDOW * 2 + 37
    with db.write() as conn:
        for n in range(total):
            transcript.append(conn, key, "user", {"text": f"{WORD} {'extra ' * (n % 7)}{n}"})
    seen: list[int] = []
    cursor = None
    with db.read() as conn:
        for _ in range(100):
            page = search.search(conn, WORD, search.Filters(), limit=50, cursor=cursor)
            seen += [hit.seq for hit in page.hits]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    assert sorted(seen) == list(range(1, total + 1))


def test_a_cursor_not_handed_out_is_refused(db: Database) -> None:
    with db.read() as conn:
        for bad in ("x", "1", "1.2.3", "-1.0", "1.-2", "1.2 "):
            with pytest.raises(search.BadCursor):
                search.search(conn, WORD, search.Filters(), cursor=bad)


# ---------------------------------------------------------------- the LIKE scan


def test_the_scan_finds_what_the_index_finds_newest_first(db: Database) -> None:
    say(db, chat(db, "kept", folder="Work"), f"the {WORD} deployment", "nothing here",
        f"deployment of {WORD} <script>")
    say(db, chat(db, "secret", "incognito"), f"{WORD} deployment")
    say(db, chat(db, "shelved", archived=True), f"{WORD} deployment")
    with db.read() as conn:
        page = search.scan(conn, f"{WORD.upper()} deployment", search.Filters(), limit=1)
        assert [(h.session_key, h.seq) for h in page.hits] == [("kept", 3)]
        opened, closed = search.MARK_OPEN, search.MARK_CLOSE
        assert page.hits[0].snippet == (f"{opened}deployment{closed} of {opened}{WORD}{closed} "
                                        "<script>")
        more = search.scan(conn, f"{WORD} deployment", search.Filters(), limit=1,
                           cursor=page.next_cursor)
        assert [(h.session_key, h.seq) for h in more.hits] == [("kept", 1)]
        assert more.next_cursor is None
        assert search.scan(conn, "100%", search.Filters()).hits == []  # % is no wildcard
        assert search.scan(conn, WORD, search.Filters(folder="Other")).hits == []


# ---------------------------------------------------------------- the migration


def _alembic(db: Database, action: str, revision: str) -> None:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.connect() as conn:
        cfg.attributes["connection"] = conn
        getattr(command, action)(cfg, revision)
        conn.commit()


def _search_objects(conn: Connection) -> list[str]:
    """The index's tables, views and triggers (each engine's own)."""
    if conn.dialect.name == "postgresql":
        return sorted([*conn.exec_driver_sql(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'chat_search%%'").scalars(),
            *conn.exec_driver_sql(
            "SELECT tgname FROM pg_trigger WHERE tgname LIKE 'chat_search%%'").scalars()])
    return sorted(conn.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE name LIKE 'chat_search%'").scalars())


def test_the_upgrade_indexes_what_was_kept_and_the_downgrade_removes_it(db: Database) -> None:
    _alembic(db, "downgrade", "0012")
    with db.read() as conn:
        assert _search_objects(conn) == []
    say(db, chat(db, "old"), f"an old {WORD}")
    say(db, "old", f"the answer {WORD}", kind="assistant")
    say(db, chat(db, "old-secret", "incognito"), f"a secret {WORD}")
    _alembic(db, "upgrade", "head")
    assert sorted(found(db, WORD)) == [("old", 1), ("old", 2)]
    assert index_holds(db, "secret") == {"text": False, "segments": False}
    say(db, "old", f"a new {WORD}")  # the triggers are live after the upgrade
    assert len(found(db, WORD)) == 3
    with db.read() as conn:
        added = "chat_search_event_added" if db.dialect == "sqlite" else "chat_search_event"
        assert added in _search_objects(conn)
    _alembic(db, "downgrade", "0012")
    with db.read() as conn:
        assert _search_objects(conn) == []
    say(db, "old", "appending still works without the index")


# ---------------------------------------------------------------- the agent's chat_search


def test_the_agents_search_reads_any_word_begun_newest_first(db: Database) -> None:
    say(db, chat(db, "asking"), f"{WORD} in the asking chat")
    say(db, chat(db, "kept"), f"the {WORD}s grew", "deployment notes", "nothing")
    say(db, chat(db, "secret", "incognito"), f"{WORD} deployment")
    with db.read() as conn:
        rows = search.newest_with_any(conn, [WORD, "deploy"], "asking", 10)
        assert [(r.session_key, r.seq, r.text) for r in rows] == [
            ("kept", 2, "deployment notes"), ("kept", 1, f"the {WORD}s grew")]
        assert {r.memory_mode for r in rows} == {"persistent"}
        assert search.newest_with_any(conn, ['"', "a OR b"], None, 10) == []
        assert search.newest_with_any(conn, [], None, 10) == []
