"""What holds the gateway's memory: its live allocations by package, logged at shutdown.

Inert unless Python traces allocations: start the gateway with `PYTHONTRACEMALLOC=1` (Python's
own switch, on from the interpreter's first import) and, as it stops, it logs one line of its
resident memory and modules, then the packages whose allocations are largest (a library under
site-packages by its name, Hearth's own by its package, the standard library's as `stdlib/…`;
`<import>` is the code of every module imported, which tracemalloc cannot tell apart). Used to
find what keeps a gateway over its memory target (`bench/memory.py` reads these lines).
"""

from __future__ import annotations

import logging
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

log = logging.getLogger(__name__)

TOP = 15
MIB = 1024 * 1024


def package_of(filename: str) -> str:
    """Where an allocation was made, as the package it belongs to."""
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/hearth/" in filename:
        return "hearth/" + filename.rsplit("/hearth/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if filename.startswith("<frozen importlib"):
        return "<import>"
    if filename.startswith("<frozen "):
        return "stdlib/" + filename.removeprefix("<frozen ").removesuffix(">")
    if "/lib/python3" in filename:
        tail = filename.split("/lib/python3", 1)[1].split("/", 2)
        return "stdlib/" + (tail[1].removesuffix(".py") if len(tail) > 1 else "?")
    return filename


def by_package(snapshot: tracemalloc.Snapshot) -> Counter[str]:
    """Bytes allocated and still live, summed by package."""
    sizes: Counter[str] = Counter()
    for stat in snapshot.statistics("filename"):
        sizes[package_of(stat.traceback[0].filename)] += stat.size
    return sizes


def resident_mib() -> float:
    """The process's resident memory now (Linux; 0.0 where /proc has none)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def log_top(top: int = TOP) -> None:
    """Log the largest live allocations by package, when allocations are traced."""
    if not tracemalloc.is_tracing():
        return
    sizes = by_package(tracemalloc.take_snapshot())
    log.info("memory at shutdown: %.1f MiB resident, %.1f MiB traced, %d modules",
             resident_mib(), sum(sizes.values()) / MIB, len(sys.modules))
    for package, size in sizes.most_common(top):
        log.info("memory held by %s: %.2f MiB", package, size / MIB)
