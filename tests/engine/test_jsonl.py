"""`engine.operations.jsonl` and `engine.operations.importing`: a chat exported as JSON Lines with
its whole variant tree, imported back as a new chat, exports to the same bytes but for keys, ids and
times; what the gateway holds secret is never written; a restricted chat is never exported nor
imported; a file that breaks any rule is refused whole, naming its line, with nothing written."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, func, select

from hearth.engine.operations import export, importing, jsonl
from hearth.engine.operations.importing import ImportInvalid
from hearth.engine.runtime import Engine
from hearth.errors import Refusal
from hearth.masking import REDACTED
from hearth.sessions import chats
from hearth.store import branches, runs as run_store, sessions as session_store, transcript
from hearth.store.schema import audit, runs, sessions, transcript_events
from tests.engine_harness import make_config, make_engine

KEY_SHAPED = "sk-" + "a1b2c3d4" * 4  # a key's shape: masked wherever the gateway writes it
IDS = ("event_id", "parent_event_id", "head_event_id", "run_id")
TIMES = ("created_at", "updated_at", "ended_at", "exported_at")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = make_engine(tmp_path, make_config("http://127.0.0.1:9/v1"))  # a model "fake"
    yield made
    made.db.close()


def run(engine: Engine, work: Any) -> Any:
    return asyncio.run(work)


def tree(conn: Connection, key: str) -> dict[str, str]:
    """A filed chat whose first answer was answered again (the first kept off the path, a
    variant of the second), then a turn that failed: the event ids by name."""
    tab = session_store.get(conn, key).tab_id  # type: ignore[union-attr]
    r1, r2, r3 = (f"{key}-{n}" for n in ("r1", "r2", "r3"))  # a run's id is its own
    for run_id in (r1, r2, r3):
        run_store.insert(conn, run_id=run_id, session_key=key, tab_id=tab, generation=0,
                         principal="owner")

    def add(name: str, kind: str, content: dict[str, Any], run_id: str,
            meta: dict[str, Any] | None = None) -> None:
        ids[name] = transcript.append(conn, key, kind, content, meta=meta, run_id=run_id,
                                      source_channel="web").event_id

    ids: dict[str, str] = {}
    add("ask", "user", {"text": "Plan the trip to Lisbon"}, r1)
    add("call", "tool_call", {"call_id": "c1", "name": "shell",
                              "arguments": {"command": "cat .env"}}, r1)
    add("result", "tool_result", {"call_id": "c1", "name": "shell",
                                  "output": f"OPENAI_API_KEY={KEY_SHAPED}", "is_error": False},
        r1, {"receipt": "Ran cat .env."})
    add("first", "assistant", {"text": "Answer one"}, r1, {"finish_reason": "stop"})
    branches.move_head(conn, key, ids["ask"])  # answered again: the first is a variant
    add("second", "assistant", {"text": "Answer two"}, r2, {"finish_reason": "stop"})
    add("thanks", "user", {"text": f"Thanks, my key is {KEY_SHAPED}"}, r3)
    add("notice", "notice", {"text": "The model call failed."}, r3,
        {"ending": "model_error", "outcome": "error"})
    for run_id, status in ((r1, "complete"), (r2, "complete"), (r3, "error")):
        run_store.finish(conn, run_id, status=status, ending=status, sentence=f"{status}.")
    session_store.update_fields(conn, key, title="Lisbon: the plan", model="fake")
    session_store.set_filing(conn, key, folder="Travel", tags=["trip", "2025"], pinned=True)
    return ids


async def kept_chat(engine: Engine, mode: str = "persistent") -> tuple[str, dict[str, str]]:
    key = (await chats.open_chat(engine.db, memory_mode=mode)).session.key
    return key, await engine.db.writing(tree, key)


async def exported(engine: Engine, key: str) -> bytes:
    return (await export.export_chat(engine.db, key, "jsonl")).body


def normalized(body: bytes) -> bytes:
    """The file with each key, id and time replaced by a name in order of appearance: two
    files equal under this hold the same chats, trees and words."""
    names: dict[str, str] = {}
    lines = []
    for raw in body.decode().split("\n")[:-1]:
        value = json.loads(raw)
        for name in IDS:
            if value.get(name) is not None:
                value[name] = names.setdefault(value[name], f"id{len(names)}")
        for name in TIMES:
            if value.get(name) is not None:
                value[name] = "T"
        if value.get("type") == "chat":
            value["key"] = "KEY"
        lines.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode()


def counts(conn: Connection) -> tuple[int, int, int]:
    return tuple(int(conn.execute(select(func.count()).select_from(table)).scalar_one())
                 for table in (sessions, transcript_events, runs))  # type: ignore[return-value]


def test_export_import_export_is_the_same_file_but_for_keys_ids_and_times(
        engine: Engine) -> None:
    async def body() -> tuple[bytes, bytes, str, str]:
        key, _ = await kept_chat(engine)
        first = await exported(engine, key)
        made = await importing.import_file(engine.db, engine.choices(), first)
        again = await exported(engine, made.imported[0].key)
        return first, again, key, made.imported[0].key

    first, again, key, copy = run(engine, body())
    assert copy != key
    assert normalized(first) == normalized(again)
    assert first != again  # a new key, new ids, an import time
    lines = [json.loads(line) for line in first.decode().splitlines()]
    assert lines[0]["hearth_export"] == 1 and lines[0]["chats"] == 1
    chat = lines[1]
    assert (chat["type"], chat["title"], chat["folder"], chat["tags"], chat["pinned"]) == (
        "chat", "Lisbon: the plan", "Travel", ["trip", "2025"], True)
    assert chat["memory_mode"] == "persistent" and chat["events"] == 7
    assert [line["type"] for line in lines[2:]] == ["run"] * 3 + ["event"] * 7


def test_the_variant_tree_survives_the_import(engine: Engine) -> None:
    async def body() -> tuple[chats.ChatWindow, chats.ChatWindow, list[Any], list[Any]]:
        key, _ = await kept_chat(engine)
        made = await importing.import_file(engine.db, engine.choices(), await exported(engine, key))
        copy = made.imported[0].key
        windows = [await chats.read_chat(engine.db, k, limit=100, before=None)
                   for k in (key, copy)]
        trees = [await engine.db.reading(_all_events, k) for k in (key, copy)]
        return windows[0], windows[1], trees[0], trees[1]

    kept, imported, kept_tree, imported_tree = run(engine, body())
    texts = [[e.content.get("text") for e in w.events] for w in (kept, imported)]
    assert texts[0] == texts[1] == ["Plan the trip to Lisbon", "Answer two",
                                    f"Thanks, my key is {KEY_SHAPED}", "The model call failed."]
    answer = imported.events[1]
    assert imported.variants[answer.event_id].count == 2  # Answer one is a variant of it
    assert imported.variants[answer.event_id].index == 1
    assert imported.session.message_count == 4 and imported.session.last_seq == 7
    assert [off for *_, off in kept_tree] == [off for *_, off in imported_tree] == [
        False, True, True, True, False, False, False]
    # the same shape: each event's parent is the event at the same place in the other
    for tree_ in (kept_tree, imported_tree):
        place = {event_id: n for n, (event_id, _, _) in enumerate(tree_)}
        assert [place.get(parent) for _, parent, _ in tree_] == [None, 0, 1, 2, 0, 4, 5]
    assert not set(e for e, _, _ in kept_tree) & set(e for e, _, _ in imported_tree)


def _all_events(conn: Connection, key: str) -> list[tuple[str, str | None, bool]]:
    t = transcript_events
    rows = conn.execute(select(t.c.event_id, t.c.parent_event_id, t.c.off_path)
                        .where(t.c.session_key == key).order_by(t.c.seq))
    return [(e, p, bool(off)) for e, p, off in rows]


def test_no_secret_is_written_but_the_words_are_their_own(engine: Engine) -> None:
    async def body() -> bytes:
        key, _ = await kept_chat(engine)
        return await exported(engine, key)

    lines = [json.loads(line) for line in run(engine, body()).decode().splitlines()]
    result = next(line for line in lines if line.get("kind") == "tool_result")
    assert KEY_SHAPED not in result["content"]["output"]
    assert REDACTED in result["content"]["output"]
    thanks = next(line for line in lines if line.get("kind") == "user"
                  and "Thanks" in line["content"]["text"])
    assert thanks["content"]["text"].endswith(KEY_SHAPED)  # the owner's words, as written


def test_an_import_makes_new_chats_and_leaves_the_kept_one_as_it_was(engine: Engine) -> None:
    async def body() -> tuple[bytes, bytes, list[str], tuple[int, ...], tuple[int, ...]]:
        key, _ = await kept_chat(engine)
        file = await exported(engine, key)
        before = await engine.db.reading(counts)
        made = [await importing.import_file(engine.db, engine.choices(), file)
                for _ in range(2)]
        after = await engine.db.reading(counts)
        return file, await exported(engine, key), [m.imported[0].key for m in made], \
            before, after

    file, again, keys, before, after = run(engine, body())
    assert len(set(keys)) == 2 and all(k.startswith("chat-") for k in keys)
    assert again.split(b"\n")[1:] == file.split(b"\n")[1:]  # the kept chat: not touched
    assert after == (before[0] + 2, before[1] + 14, before[2] + 6)


def test_what_is_not_set_up_here_gives_way_and_the_answer_says_so(engine: Engine) -> None:
    async def body() -> tuple[importing.Imported, chats.SessionRow]:
        key, _ = await kept_chat(engine)
        await engine.db.writing(session_store.update_fields, key, model="gone-model",
                                agent="gone-agent")
        made = await importing.import_file(engine.db, engine.choices(), await exported(engine, key))
        return made.imported[0], await chats.get_chat(engine.db, made.imported[0].key)

    imported, row = run(engine, body())
    assert row.model is None and row.agent == "default" and row.trust == "ask"
    assert row.origin == "import" and row.memory_mode == "persistent"
    assert row.title == "Lisbon: the plan" and row.folder == "Travel" and row.pinned
    assert imported.notes == (
        "Its agent 'gone-agent' is not set up here: it has the default agent.",
        "Its model 'gone-model' is not set up here: it runs on the chat chain.")


def test_the_import_is_audited_without_its_words(engine: Engine) -> None:
    async def body() -> list[Any]:
        key, _ = await kept_chat(engine)
        await importing.import_file(engine.db, engine.choices(), await exported(engine, key))
        rows = await engine.db.reading(lambda conn: list(conn.execute(
            select(audit.c.action, audit.c.detail).where(audit.c.action == "chat.import"))))
        return rows

    rows = run(engine, body())
    assert len(rows) == 1 and rows[0][1]["events"] == 7
    assert "Lisbon" not in json.dumps(rows[0][1])


@pytest.mark.parametrize("mode", ["incognito", "temporary"])
def test_a_chat_that_keeps_nothing_is_never_exported(engine: Engine, mode: str) -> None:
    async def body() -> tuple[Refusal, bytes]:
        kept, _ = await kept_chat(engine)
        key, _ = await kept_chat(engine, mode)
        with pytest.raises(Refusal) as refused:
            await exported(engine, key)
        everything = b"".join([line async for line in jsonl.everything(engine.db)])
        assert kept.encode() in everything
        return refused.value, everything

    refused, everything = run(engine, body())
    assert (refused.code, refused.status) == ("export_refused", 409)
    header = json.loads(everything.split(b"\n")[0])
    assert header["chats"] == 1 and everything.count(b'{"type":"chat"') == 1


def test_a_long_chat_is_exported_whole_in_order(engine: Engine) -> None:
    count = jsonl.PAGE * 2 + 7

    def fill(conn: Connection, key: str) -> None:
        for n in range(count):
            transcript.append(conn, key, "user" if n % 2 == 0 else "assistant",
                              {"text": f"message {n}"})

    async def body() -> tuple[bytes, bytes]:
        key = (await chats.open_chat(engine.db)).session.key
        await engine.db.writing(fill, key)
        file = await exported(engine, key)
        made = await importing.import_file(engine.db, engine.choices(), file)
        return file, await exported(engine, made.imported[0].key)

    file, again = run(engine, body())
    events = [json.loads(line) for line in file.decode().splitlines()[2:]]
    assert [e["content"]["text"] for e in events] == [f"message {n}" for n in range(count)]
    assert all(e["run_id"] is None and not e["off_path"] for e in events)
    assert normalized(file) == normalized(again)


# ------------------------------------------------------------------ refusals (no store needed)


def body_of(values: list[Any]) -> bytes:
    return "".join((v if isinstance(v, str) else json.dumps(v)) + "\n"
                   for v in values).encode()


AT = 1_735_689_600.0  # 2025-01-01 UTC: an import takes times from 2000-01-01 to a day from now


def good_file() -> list[Any]:
    """A header, a chat, its run and four events (an answer and its variant)."""
    return [
        {"hearth_export": 1, "chats": 1},
        {"type": "chat", "key": "c", "title": "T", "memory_mode": "persistent",
         "created_at": "2025-01-02T03:04:05+00:00", "head_event_id": "e4", "events": 4},
        {"type": "run", "run_id": "r", "kind": "chat", "status": "complete",
         "created_at": AT + 1.0},
        {"type": "event", "event_id": "e1", "parent_event_id": None, "kind": "user",
         "content": {"text": "hi"}, "run_id": "r", "created_at": AT + 1.0},
        {"type": "event", "event_id": "e2", "parent_event_id": "e1", "kind": "assistant",
         "content": {"text": "one"}, "run_id": "r", "created_at": AT + 2.0},
        {"type": "event", "event_id": "e3", "parent_event_id": "e1", "kind": "assistant",
         "content": {"text": "two"}, "created_at": AT + 3.0},
        {"type": "event", "event_id": "e4", "parent_event_id": "e3", "kind": "user",
         "content": {"text": "more"}, "created_at": AT + 4.0},
    ]


def test_a_good_file_parses() -> None:
    parsed = importing.parse(body_of(good_file()))
    assert len(parsed) == 1 and [e.event_id for e in parsed[0].events] == ["e1", "e2", "e3", "e4"]
    assert importing._path(parsed[0]) == {"e1", "e3", "e4"}


def _broken(line: int, value: Any) -> list[Any]:
    file = good_file()
    file[line - 1] = value
    return file


def _event(**changes: Any) -> dict[str, Any]:
    base = dict(good_file()[5])
    base.update(changes)
    return base


BROKEN = {
    "not JSON": (5, _broken(5, '{"type": "event", "event_id": "e2",'), "not valid JSON"),
    "a parent that is not there": (6, _broken(6, _event(parent_event_id="nowhere")),
                                   "no earlier event"),
    "a parent that comes later": (5, _broken(5, _event(event_id="e2", parent_event_id="e3")),
                                  "no earlier event"),
    "an id used twice": (6, _broken(6, _event(event_id="e2")), "already"),
    "a kind there is not": (6, _broken(6, _event(kind="thought")), "its kind"),
    "content of another shape": (6, _broken(6, _event(content={"words": "x"})), "text"),
    "a time that is not one": (6, _broken(6, _event(created_at="yesterday")), "time"),
    "a run nobody declared": (6, _broken(6, _event(run_id="ghost")), "no run line"),
    "a run still running": (3, _broken(3, {**good_file()[2], "status": "running"}), "status"),
    "a head that is not there": (2, _broken(2, {**good_file()[1], "head_event_id": "zz"}),
                                 "head_event_id"),
    "a restricted chat": (2, _broken(2, {**good_file()[1], "memory_mode": "incognito"}),
                          "never imported"),
    "a title with a line break": (2, _broken(2, {**good_file()[1], "title": "a\nb"}), "title"),
    "a line of no known type": (4, _broken(4, {"type": "comment"}), "type"),
    "an array": (4, _broken(4, "[1, 2]"), "not a JSON object"),
    "a header of another version": (1, _broken(1, {"hearth_export": 2, "chats": 1}),
                                    "version 2"),
    "no header": (1, good_file()[1:], "not a Hearth export"),
    "fewer chats than the header says": (1, _broken(1, {"hearth_export": 1, "chats": 2}),
                                         "holds 2 chats"),
    "fewer events than the chat says": (2, good_file()[:-1], "cut short"),
    "NaN": (6, _broken(6, '{"type": "event", "event_id": "e3", "created_at": NaN}'),
            "not valid JSON"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_a_broken_file_is_refused_naming_its_line(name: str) -> None:
    line, file, words = BROKEN[name]
    with pytest.raises(ImportInvalid) as refused:
        importing.parse(body_of(file))
    assert (refused.value.code, refused.value.status) == ("import_invalid", 422)
    assert refused.value.sentence.startswith(f"Line {line}: "), refused.value.sentence
    assert words in refused.value.sentence and "Nothing was imported" in refused.value.sentence
    assert refused.value.details == {"line": line}


def test_a_refusal_never_quotes_a_message() -> None:
    file = _broken(6, _event(content={"text": 5, "secret": "my diary"}))
    with pytest.raises(ImportInvalid) as refused:
        importing.parse(body_of(file))
    assert "diary" not in refused.value.sentence


def test_a_part_of_a_longer_file_names_the_file_s_lines() -> None:
    file = _broken(5, "not json")
    with pytest.raises(ImportInvalid) as refused:
        importing.parse(body_of(file), line_offset=100)
    assert refused.value.sentence.startswith("Line 105: ")
    with pytest.raises(ImportInvalid) as header:
        importing.parse(body_of(_broken(1, {"hearth_export": 9, "chats": 1})), line_offset=100)
    assert header.value.sentence.startswith("Line 1: ")


def test_unusual_but_sound_files_parse() -> None:
    file = good_file()
    file[1] = {**file[1], "head_event_id": None, "events": None}  # rewound to the start
    parsed = importing.parse(b"\xef\xbb\xbf" + body_of(file).replace(b"\n", b"\r\n") + b"\n\n")
    assert importing._path(parsed[0]) == set()
    empty = importing.parse(body_of([{"hearth_export": 1, "chats": 0}]))
    assert empty == []


def test_a_bad_file_writes_nothing(engine: Engine) -> None:
    async def body() -> tuple[tuple[int, ...], tuple[int, ...], str]:
        key, _ = await kept_chat(engine)
        file = (await exported(engine, key)).split(b"\n")
        file[4] = b'{"type": "event",'  # line 5
        before = await engine.db.reading(counts)
        with pytest.raises(ImportInvalid) as refused:
            await importing.import_file(engine.db, engine.choices(), b"\n".join(file))
        return before, await engine.db.reading(counts), refused.value.sentence

    before, after, sentence = run(engine, body())
    assert sentence.startswith("Line 5: ") and before == after


def test_of_two_chats_a_bad_second_writes_not_even_the_first(engine: Engine) -> None:
    async def body() -> tuple[tuple[int, ...], tuple[int, ...], str]:
        first, _ = await kept_chat(engine)
        second, _ = await kept_chat(engine)
        file = b"".join([line async for line in jsonl.everything(engine.db)])
        lines = file.split(b"\n")
        assert lines[0].startswith(b'{"hearth_export":1,"chats":2')
        last = json.loads(lines[-2])
        last["parent_event_id"] = "nowhere"
        lines[-2] = json.dumps(last).encode()
        before = await engine.db.reading(counts)
        with pytest.raises(ImportInvalid) as refused:
            await importing.import_file(engine.db, engine.choices(), b"\n".join(lines))
        return before, await engine.db.reading(counts), refused.value.sentence

    before, after, sentence = run(engine, body())
    assert before == after
    assert sentence.startswith("Line 23: ") and "no earlier event" in sentence
