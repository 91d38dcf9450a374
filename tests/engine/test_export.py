"""`engine.operations.export.export_chat`: every message of a chat, however long (read a page at a
time), in order; Markdown that says each message, tool call and notice without letting the model's
arguments break the page; a chat that keeps nothing is never exported."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection

from hearth.engine.operations import export
from hearth.engine.runtime import Engine
from hearth.errors import Refusal
from hearth.sessions import chats
from hearth.store import transcript
from hearth.store.sessions import SessionRow
from tests.engine_harness import make_config, make_engine

COUNT = export.PAGE * 2 + 300  # three pages, the last one short


def _fill(conn: Connection, key: str) -> None:
    for n in range(COUNT):
        kind = "user" if n % 2 == 0 else "assistant"
        transcript.append(conn, key, kind, {"text": f"message {n}"})


def _talk(conn: Connection, key: str, arguments: Any) -> None:
    transcript.append(conn, key, "user", {"text": "Plan the trip to Lisbon please"})
    transcript.append(conn, key, "assistant", {"text": "A lone \udc00 from the model"})
    transcript.append(conn, key, "tool_call",
                      {"call_id": "c1", "name": "shell", "arguments": arguments})
    transcript.append(conn, key, "tool_result", {"call_id": "c1", "output": "SECRET OUTPUT"})
    transcript.append(conn, key, "notice", {"text": "It *stopped*\nhere_now"})
    transcript.append(conn, key, "assistant", {"text": "Here is the **plan**."})


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = make_engine(tmp_path, make_config(None))
    yield made
    made.db.close()


async def _chat(engine: Engine, mode: str = "persistent") -> str:
    return (await chats.open_chat(engine.db, memory_mode=mode)).session.key


def test_json_export_is_strict_json_whatever_the_model_sent(engine: Engine) -> None:
    async def body() -> bytes:
        key = await _chat(engine)
        await engine.db.writing(_talk, key, {"path": "\ud800", "n": float("nan")})
        return (await export.export_chat(engine.db, key, "json")).body

    loaded = json.loads(asyncio.run(body()), parse_constant=_refuse)
    call = next(m for m in loaded["messages"] if m["kind"] == "tool_call")
    assert call["content"]["arguments"] == {"path": "\ufffd", "n": None}


def _refuse(constant: str) -> None:
    raise AssertionError(f"{constant} is not JSON")


def test_every_message_of_a_long_chat_is_exported_in_order(engine: Engine) -> None:
    async def body() -> dict[str, Any]:
        key = await _chat(engine)
        await engine.db.writing(_fill, key)
        made = await export.export_chat(engine.db, key, "json")
        assert made.media_type == "application/json" and made.filename.endswith(".json")
        loaded: dict[str, Any] = json.loads(made.body)
        return loaded

    loaded = asyncio.run(body())
    messages = loaded["messages"]
    assert len(messages) == COUNT
    assert [m["index"] for m in messages] == list(range(1, COUNT + 1))
    assert messages[0]["text"] == "message 0" and messages[-1]["text"] == f"message {COUNT - 1}"
    assert loaded["session"]["message_count"] == COUNT


def test_markdown_says_messages_calls_and_notices(engine: Engine) -> None:
    nasty = {"command": "echo `x` ``y``\nrm -rf " + "z" * 5000, "n": float("nan")}

    async def body() -> tuple[str, str]:
        key = await _chat(engine)
        await engine.db.writing(_talk, key, nasty)
        made = await export.export_chat(engine.db, key, "markdown")
        assert made.media_type.startswith("text/markdown")
        return made.body.decode(), made.filename

    text, filename = asyncio.run(body())
    lines = text.splitlines()
    assert lines[0] == "# Plan the trip to Lisbon please"  # untitled: its first words
    assert filename == "Plan-the-trip-to-Lisbon-please.md"
    assert "## You (" in text and "## Assistant (" in text
    assert "Here is the **plan**." in text
    call = next(line for line in lines if line.startswith("- Tool call:"))
    assert "shell" in call and "echo" in call and "rm -rf" in call
    assert len(call) < export.SUMMARY_CHARS + 60  # 5,000 z's summarised
    assert " ```echo `x` ``y`` rm -rf zzz" in call  # fenced by more backticks than inside
    assert "*It \\*stopped\\* here\\_now*" in lines  # one italic line, its stars escaped
    assert "SECRET OUTPUT" not in text  # a tool's output is not part of the conversation
    assert "A lone \ufffd from the model" in text  # a lone surrogate cannot be UTF-8


def test_a_title_names_the_file_safely() -> None:
    row = SessionRow(key="chat-1-2", tab_id="t", title=' ../Trip: "Lisbon"/2025\r\n',
                           memory_mode="persistent", agent="default", model=None,
                           workspace_dir=None, origin="api", generation=0, writer_run_id=None,
                           last_seq=0, message_count=0, created_at=0.0, updated_at=0.0,
                           archived=False, trust="ask")
    assert export.file_name(row, []) == "Trip-Lisbon-2025"
    odd = dataclasses.replace(row, title="«»")
    assert export.file_name(odd, []) == "chat-1-2"  # nothing safe in it: the key
    heading = export.as_markdown(odd, [], datetime(2025, 1, 2, tzinfo=UTC)).splitlines()
    assert heading[0] == "# «»" and "2025-01-02" in heading[2]


@pytest.mark.parametrize("mode", ["incognito", "temporary"])
def test_a_chat_that_keeps_nothing_is_never_exported(engine: Engine, mode: str) -> None:
    async def body() -> Refusal:
        key = await _chat(engine, mode)
        await engine.db.writing(_talk, key, {"path": "a"})
        with pytest.raises(Refusal) as refused:
            await export.export_chat(engine.db, key, "markdown")
        return refused.value

    refused = asyncio.run(body())
    assert (refused.code, refused.status) == ("export_refused", 409)
    assert "exported" in refused.sentence and "Lisbon" not in refused.sentence


def test_an_unknown_chat_or_format_is_refused(engine: Engine) -> None:
    async def body() -> tuple[Refusal, Refusal]:
        with pytest.raises(Refusal) as missing:
            await export.export_chat(engine.db, "no-such-chat", "json")
        key = await _chat(engine)
        with pytest.raises(Refusal) as bad:
            await export.export_chat(engine.db, key, "pdf")
        return missing.value, bad.value

    missing, bad = asyncio.run(body())
    assert (missing.code, missing.status) == ("session_not_found", 404)
    assert (bad.code, bad.status) == ("invalid_format", 422)
