"""What the read-only sandbox adds to a read command: p50 and p95 per command through the
shell tool (`Shell.run`), placed on the host, in the writable sandbox and in the read-only
sandbox (the placement that lets a read run without asking).

Each command is run `--runs` times per placement, placements interleaved (ABC order) so all
see the same noise. The figure is the whole tool call: building the command line, starting
bwrap (mount namespace, tmpfs mounts, binds), bash, the command, and reading its output.

A benchmark, not a test: it prints figures and ratios and exits 0 whatever they are.

    .venv/bin/python bench/shell_placement.py [--runs 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hearth.tools.base import ToolContext  # noqa: E402
from hearth.tools.sandbox import Placement, bwrap_problem  # noqa: E402
from hearth.tools.shell import Shell  # noqa: E402

COMMANDS = ["ls -la", "cat notes.txt", "grep -rn TODO .", "git status --short"]


async def _timed(shell: Shell, command: str, ctx: ToolContext, writable: bool) -> float:
    # `; :` is no reader to the screen: the same command, placed as an approved change
    args = {"command": f"{command}; :" if writable else command}
    started = time.perf_counter()
    outcome = await shell.run(args, ctx)
    elapsed = time.perf_counter() - started
    assert "[exit code" in outcome.output, outcome.output
    assert shell.classify(args, ctx) == ("changes" if writable or not ctx.placement.sandboxed
                                         else "reads")
    return elapsed


async def measure(runs: int, workspace: Path) -> dict[str, dict[str, list[float]]]:
    shell = Shell()
    contexts = {
        "host": (ToolContext(workspace=workspace, session_key="b", run_id="b",
                             placement=Placement("off")), False),
        "sandbox, writable": (ToolContext(workspace=workspace, session_key="b", run_id="b",
                                          placement=Placement("bwrap")), True),
        "sandbox, read-only": (ToolContext(workspace=workspace, session_key="b", run_id="b",
                                           placement=Placement("bwrap")), False),
    }
    times: dict[str, dict[str, list[float]]] = {c: {p: [] for p in contexts} for c in COMMANDS}
    for _ in range(runs):
        for command in COMMANDS:
            for place, (ctx, writable) in contexts.items():
                times[command][place].append(await _timed(shell, command, ctx, writable))
    return times


def _workspace() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="hearth-bench-shell-", dir="/var/tmp"))
    (folder / "notes.txt").write_text("TODO: one\nnothing\n" * 200)
    for i in range(50):
        (folder / f"file{i}.txt").write_text(f"line {i}\n" * 20)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    runs = parser.parse_args().runs
    problem = bwrap_problem()
    if problem:
        print(f"bwrap cannot run here ({problem}); nothing to compare")
        return
    workspace = _workspace()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    times = asyncio.run(measure(runs, workspace))
    print(f"shell tool call, ms per command ({runs} runs each, interleaved)")
    print(f"{'command':<22}{'placement':<22}{'p50':>8}{'p95':>8}{'vs host':>10}")
    for command, by_place in times.items():
        host = statistics.median(by_place["host"])
        for place, samples in by_place.items():
            p50 = statistics.median(samples)
            p95 = statistics.quantiles(samples, n=20)[18]
            print(f"{command:<22}{place:<22}{p50 * 1000:>8.2f}{p95 * 1000:>8.2f}"
                  f"{p50 / host:>9.2f}x")
    every = {p: [t for c in times.values() for t in c[p]] for p in next(iter(times.values()))}
    host = statistics.median(every["host"])
    read_only = statistics.median(every["sandbox, read-only"])
    print(f"\nall commands: host p50 {host * 1000:.2f} ms, read-only sandbox p50 "
          f"{read_only * 1000:.2f} ms: the sandbox adds {(read_only - host) * 1000:.2f} ms "
          f"({read_only / host:.2f}x)")


if __name__ == "__main__":
    main()
