"""grep and glob cannot hang the gateway: a linear-time engine, work off the event loop with a
time limit, Stop that ends the worker too, bounded walks and reads that say where they stopped.

From an outside security review: a catastrophic-backtracking pattern given to grep (a read,
so no approval is asked) blocked every request, Stop included, until the process was killed.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest

from hearth.engine.reads import queries
from hearth.privacy.principal import OWNER
from hearth.tools.base import ToolContext
from hearth.tools.search import Glob, Grep, SearchLimits
from hearth.tools.search_match import SLICE_BYTES
from tests.engine_harness import events, make_config, make_engine, new_chat, run
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.support.polling import loop_lags
from tests.support.tools import refusal, run as call

CATASTROPHIC = r"(a+)+$"
EVIL_LINE = "a" * 26 + "b"  # Python's re takes 2**26 steps on it: ~15 s, holding the GIL
SLOW = r"(a|b)*a(a|b){30}c"  # linear for RE2 but slow (~1 MB/s), and never matches


def slow_files(folder: Path, count: int, size: int = 4_000_000) -> None:
    """`count` files of random 'a'/'b' lines that SLOW takes seconds to search."""
    rng = random.Random(7)
    ab = bytes(b"ab"[byte & 1] for byte in range(256))
    noise = rng.randbytes(size).translate(ab)
    body = b"\n".join(noise[at:at + 80] for at in range(0, size, 80))
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (folder / f"slow{index}.txt").write_bytes(body)


def cpu_over(seconds: float) -> float:
    """CPU time this process (all its threads) used while the caller slept `seconds`."""
    begun = time.process_time()
    time.sleep(seconds)
    return time.process_time() - begun


# ---------------------------------------------------------------- the engine


def test_a_catastrophic_pattern_answers_at_once_and_correctly(ctx: ToolContext,
                                                             workspace: Path) -> None:
    """Before: Python's `re` ran `(a+)+$` over 'a'*26+'b' for ~15 s with the GIL held (each
    extra 'a' doubles it), so the whole gateway stood still; now RE2 answers in milliseconds."""
    (workspace / "evil.txt").write_text(f"{EVIL_LINE}\naaaa\n{EVIL_LINE}\n")
    began = time.monotonic()
    outcome = call(Grep(), {"pattern": CATASTROPHIC}, ctx)
    assert time.monotonic() - began < 1.0
    assert outcome.output == "evil.txt:2: aaaa"
    assert outcome.receipt == "Found 1 match for '(a+)+$' in 1 file."


def test_a_catastrophic_glob_answers_at_once(ctx: ToolContext, workspace: Path) -> None:
    """Before: the glob became a Python regex ('[^/]*a[^/]*a…b'), which backtracks
    polynomially in the name's length to the power of the stars: minutes on one long name."""
    (workspace / ("a" * 200)).write_text("")
    (workspace / "ab").write_text("")
    began = time.monotonic()
    outcome = call(Glob(), {"pattern": "*a" * 14 + "*b"}, ctx)
    assert time.monotonic() - began < 1.0
    assert outcome.output == "(no files match)"
    assert call(Glob(), {"pattern": "*a*b"}, ctx).output == "ab"
    began = time.monotonic()
    outcome = call(Grep(), {"pattern": "a", "glob": "*a" * 14 + "*b"}, ctx)
    assert time.monotonic() - began < 1.0 and outcome.output == "(no matches)"


def test_the_event_loop_keeps_answering_while_a_turn_greps(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """Before: the grep ran in a thread, but `re` holds the GIL for a whole match, so a timer
    on the event loop (every request, Stop included) waited for the ~7 s match to end."""
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))
    (tmp_path / "workspace" / "evil.txt").write_text((EVIL_LINE[1:] + "\n") * 2 + "aaa\n")
    model_server.push(Reply(tool_calls=[Call("grep", {"pattern": CATASTROPHIC})]),
                      Reply(text="searched"))

    async def body() -> tuple[float, dict[str, Any], list[Any]]:
        await engine.start()
        key = new_chat(engine)
        async with loop_lags() as lags:
            admitted = await engine.send(key, "find it", principal=OWNER)
            await engine.bus.wait_run(admitted.run_id, 60)
        view = await queries.run_status(engine.db, admitted.run_id)
        rows = events(engine, key)
        await engine.close()
        assert view is not None
        return max(lags), view, rows

    worst, view, rows = run(body())
    assert view["status"] == "complete"
    (result,) = [e.content for e in rows if e.kind == "tool_result"]
    assert result["output"] == "evil.txt:3: aaa"
    assert worst < 0.5, f"the event loop stalled for {worst:.2f} s"


def test_stop_ends_a_running_grep_and_its_worker(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """Before: Stop cancelled the awaiting task, but the worker thread searched on to the end
    (here ~145 s of CPU for nobody, a thread of the shared pool held, and the engine's loop
    could not close until it was done), as no flag told it to stop."""
    engine = make_engine(tmp_path, make_config(model_server.openai_base_url))
    slow_files(tmp_path / "workspace", 4)  # ~12 s of searching, or more
    model_server.push(Reply(tool_calls=[Call("grep", {"pattern": SLOW})]))

    async def body() -> tuple[float, float, float, dict[str, Any]]:
        await engine.start()
        key = new_chat(engine)
        admitted = await engine.send(key, "search slowly", principal=OWNER)
        await asyncio.sleep(1.0)
        busy = await asyncio.to_thread(cpu_over, 1.0)  # the positive control: it searches
        begun = time.monotonic()
        assert await engine.stop(key) == admitted.run_id
        await engine.bus.wait_run(admitted.run_id, 5)
        took = time.monotonic() - begun
        view = await queries.run_status(engine.db, admitted.run_id)
        await asyncio.sleep(0.5)  # a slice in progress ends (SLICE_BYTES at ~1 MB/s)
        idle = await asyncio.to_thread(cpu_over, 1.0)
        await engine.close()
        assert view is not None
        return took, busy, idle, view

    began = time.monotonic()
    took, busy, idle, view = run(body())
    assert busy > 0.15, f"the grep was not running when stopped ({busy:.2f} s of CPU)"
    assert took < 1.0 and view["status"] == "stopped"
    assert idle < 0.08, f"the stopped grep's worker still used {idle:.2f} s of CPU a second"
    assert time.monotonic() - began < 15  # nothing left running for the loop to wait on


def test_a_grep_that_overruns_its_time_says_what_it_searched(ctx: ToolContext,
                                                             workspace: Path) -> None:
    """Before: no time limit; a slow search ran as long as it took."""
    slow_files(workspace, 3)
    began = time.monotonic()
    outcome = call(Grep(SearchLimits(seconds=0.5)), {"pattern": SLOW}, ctx)
    assert time.monotonic() - began < 2.0
    assert outcome.output.splitlines() == [
        "(no matches)",
        "[Stopped after 0.5 seconds, having searched 0 files; the other 3 files found were "
        "not searched. Give a narrower path or a glob filter to search them.]",
    ]
    assert outcome.receipt.endswith("; searched only 0 files.")


# ---------------------------------------------------------------- bounds


def test_the_walk_is_bounded_and_says_where_it_stopped(ctx: ToolContext,
                                                       workspace: Path) -> None:
    """Before: glob and grep walked every file under the folder, however many there were."""
    for index in range(25):
        (workspace / f"f{index:02d}.txt").write_text("needle\n")
    limits = SearchLimits(max_files=10)
    grepped = call(Grep(limits), {"pattern": "needle"}, ctx)
    lines = grepped.output.splitlines()
    assert lines[:10] == [f"f{index:02d}.txt:1: needle" for index in range(10)]
    assert lines[10:] == [
        "[Went through the first 10 files only; the rest of the folder was not searched. "
        "Give a narrower path or a glob filter to search them.]"]
    assert grepped.receipt == ("Found 10 matches for 'needle' in 10 files; searched only "
                               "10 files.")
    globbed = call(Glob(limits), {"pattern": "*.txt"}, ctx)
    assert globbed.output.splitlines()[-1] == (
        "[Looked at the first 10 files only; the rest were not looked at. Give a narrower "
        "path to list them.]")
    assert len(globbed.output.splitlines()) == 11
    assert globbed.receipt.endswith("; looked at only the first 10 files.")
    whole = call(Grep(SearchLimits(max_files=25)), {"pattern": "needle"}, ctx)
    assert "[" not in whole.output  # exactly at the bound: nothing was left out


def test_the_bytes_read_are_bounded_and_said(ctx: ToolContext, workspace: Path) -> None:
    """Before: grep read every file under 5 MB whole, with no bound on the total."""
    for index in range(10):
        (workspace / f"f{index}.txt").write_text("needle\n" + "x" * 50_000 + "\n")
    outcome = call(Grep(SearchLimits(max_total_bytes=100_000)), {"pattern": "needle"}, ctx)
    assert outcome.output.splitlines() == [
        "f0.txt:1: needle", "f1.txt:1: needle",
        "[Stopped after reading 97.7 KB from 2 files; the other 8 files found were not "
        "searched. Give a narrower path or a glob filter to search them.]"]


def test_a_file_over_the_per_file_cap_is_skipped_unread(ctx: ToolContext,
                                                       workspace: Path) -> None:
    """The per-file cap (now a limit that can be set) holds: a larger file is skipped and said.
    It is read in chunks, never past the cap, whatever its size was when the walk saw it.
    Before: the size was checked, then the file read whole however large it had grown since."""
    limits = SearchLimits(max_file_bytes=1000)
    (workspace / "small.txt").write_text("needle\n")
    (workspace / "big.txt").write_text("needle\n" + "x" * 2000)
    outcome = call(Grep(limits), {"pattern": "needle"}, ctx)
    assert outcome.output.splitlines() == [
        "small.txt:1: needle", "[skipped 1 binary, unreadable or oversized file(s)]"]


# ---------------------------------------------------------------- what RE2 cannot do


@pytest.mark.parametrize(("pattern", "words"), [
    (r"(\w+) \1", "uses a backreference (such as \\1)"),
    (r"(?P<w>\w+) (?P=w)", "uses a backreference"),
    (r"(?<=def )\w+", "uses a lookahead or lookbehind"),
    (r"foo(?!bar)", "uses a lookahead or lookbehind"),
    (r"(?>a+)b", "no atomic groups or possessive repeats"),
])
def test_what_re2_cannot_do_is_refused_with_what_to_do_instead(
        ctx: ToolContext, pattern: str, words: str) -> None:
    """Before: Python's `re` took these (and a backreference can backtrack exponentially)."""
    sentence = refusal(Grep(), {"pattern": pattern}, ctx)
    assert sentence.startswith(f"Refused {pattern!r}: ") and words in sentence
    assert "RE2" in sentence and sentence.endswith(".")


# ---------------------------------------------------------------- lines, as before


def reference(text: str, pattern: str, flags: int = 0) -> list[str]:
    """What the old grep answered: each line searched on its own by Python's `re`."""
    regex = re.compile(pattern, flags)
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if regex.search(line):
            found.append(f"big.txt:{number}: {line}")
    return found[:200]


@pytest.mark.parametrize("pattern", [
    r"^ab", r"ba$", r"\Ab", r"a\Z", r"^$", r"\bab\b", r"a\s+b", r"^[^a]*$", r"c.*c",
    r"^(ab|ba)+$", r"x",
])
def test_lines_match_as_they_did_with_pythons_re(ctx: ToolContext, workspace: Path,
                                                 pattern: str) -> None:
    """Matching whole slices (never across a line end) answers what searching each line with
    Python's `re` did, across slice boundaries, CRLF endings, blank lines and a last line with
    no line end included (but no phantom empty line after the last line end)."""
    rng = random.Random(pattern)
    lines = ["".join(rng.choice("ab  c") for _ in range(rng.randrange(0, 40)))
             for _ in range(3 * SLICE_BYTES // 20)]
    ending = "\n" if len(pattern) % 2 else ""  # a last line with no line end, for some
    text = "\r\n".join(lines[:50]) + "\n" + "\n".join(lines[50:]) + ending
    (workspace / "big.txt").write_text(text, newline="")
    got = call(Grep(), {"pattern": pattern}, ctx).output.splitlines()
    expected = reference(text.removesuffix("\n"), pattern)
    assert [line for line in got if not line.startswith("[")] == (expected or ["(no matches)"])
    shouted = call(Grep(), {"pattern": pattern.upper(), "ignore_case": True}, ctx)
    upper = reference(text.removesuffix("\n"), pattern.upper(), re.IGNORECASE)
    assert [x for x in shouted.output.splitlines() if not x.startswith("[")] == (
        upper or ["(no matches)"])
