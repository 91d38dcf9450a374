"""Endings have one path: every code the engine can write is declared in `endings.CODES` and
listed in the docs' endings table (docs/troubleshooting.md), no ending is made with another
code, and recovery ends what it cannot resume through `endings.settle` like every other ending.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from hearth.engine.turn import endings
from hearth.engine.turn.recovery import UNKNOWN_AFTER_RESTART
from hearth.store import approvals, ledger, runs as run_store, sessions as session_store
from tests.engine_harness import make_config, make_engine, new_chat, run

ENDINGS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"
SRC = Path(__file__).resolve().parents[2] / "src" / "hearth"


def readme_ending_codes(text: str) -> set[str]:
    """The codes in the first column of the docs' table headed `| ending | outcome |`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if re.match(r"\|\s*ending\s*\|\s*outcome\s*\|", line))
    codes: set[str] = set()
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        codes |= set(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
    return codes


def test_the_readme_table_lists_every_code_the_engine_can_write() -> None:
    """Before: the table missed `stale`, `interrupted` and `internal_error`, three codes the
    engine writes (a message not run after its chat changed, a call the restart ended, a
    failure inside Hearth), and the codes were declared nowhere but in each constructor."""
    assert readme_ending_codes(ENDINGS_PAGE.read_text(encoding="utf-8")) == endings.CODES


def test_the_readme_parser_sees_a_missing_code() -> None:
    """Positive control: a table without one row is caught."""
    table = ("| ending | outcome | when |\n| --- | --- | --- |\n"
             "| `complete` | complete | answered |\n"
             "| `model_call_limit`, `tool_call_limit` | error | limits |\n\nafter\n")
    assert readme_ending_codes(table) == {"complete", "model_call_limit", "tool_call_limit"}
    assert readme_ending_codes(table) != endings.CODES


def test_an_ending_with_an_undeclared_code_cannot_be_made() -> None:
    with pytest.raises(ValueError, match="not an ending code"):
        endings.Ending("crashed", "error", "x")
    with pytest.raises(ValueError, match="not a final outcome"):
        endings.Ending("complete", "running", "x")


def test_no_module_but_endings_writes_a_run_ending_itself() -> None:
    """`runs.finish` (the store's write of an ending) is called from endings.py alone.
    Before: recovery.py called it with its own code and sentence."""
    callers = sorted(str(path.relative_to(SRC)) for path in SRC.rglob("*.py")
                     if re.search(r"\b(run_store|runs)\.finish\(", path.read_text("utf-8")))
    assert callers == ["engine/turn/endings.py"]


def test_recovery_ends_a_call_the_restart_cut_through_endings(tmp_path: Path) -> None:
    """A call an agent CLI asked for (a run of kind `mcp`) left running, waiting on the
    owner's approval, when the gateway died: the next start ends it `interrupted` with the
    sentence saying the call may or may not have happened, and, being settled like every
    ending, withdraws its approval and wakes whoever waits on the run. Before: recovery
    wrote the ending itself, so the approval stayed `pending` in /api/approvals for ever
    and a waiter on the run waited out its whole timeout."""
    engine = make_engine(tmp_path, make_config(None), [])
    key = new_chat(engine)
    with engine.db.write() as conn:
        session = session_store.get(conn, key)
        assert session is not None
        run_store.insert(conn, run_id="run_cli", session_key=key, tab_id=session.tab_id,
                         generation=session.generation, kind="mcp", principal="owner")
        run_store.mark_running(conn, "run_cli")
        ledger.record_requested(conn, run_id="run_cli", session_key=key, call_id="c1",
                                position=0, tool="write_file", arguments={}, effect="changes")
        asked = approvals.ask(conn, run_id="run_cli", session_key=key, call_id="c1",
                              agent="default", tool="write_file", arguments={},
                              effect="changes", target="x", principal="owner")

    async def body() -> float:
        waiter = asyncio.create_task(engine.bus.wait_run("run_cli", 10))
        await asyncio.sleep(0)
        began = asyncio.get_running_loop().time()
        await engine.start()
        try:
            await waiter
            return asyncio.get_running_loop().time() - began
        finally:
            await engine.close()

    waited = run(body())
    with engine.db.read() as conn:
        ended = run_store.get(conn, "run_cli")
        approval = approvals.get(conn, asked.id)
    assert ended is not None and approval is not None
    assert (ended.status, ended.ending, ended.sentence) == (
        "error", "interrupted", UNKNOWN_AFTER_RESTART)
    assert approval.status == "cancelled"
    assert waited < 5
