"""hearth/allocations.py: the gateway's live allocations by package, logged at shutdown only
when Python traces allocations (PYTHONTRACEMALLOC)."""

from __future__ import annotations

import logging
import tracemalloc

import pytest

from hearth import allocations


@pytest.mark.parametrize(("filename", "package"), [
    ("/venv/lib/python3.11/site-packages/sqlalchemy/sql/base.py", "sqlalchemy"),
    ("/venv/lib/python3.11/site-packages/typing_extensions.py", "typing_extensions"),
    ("/work/src/hearth/engine/turn/loop.py", "hearth/engine"),
    ("/work/src/hearth/config.py", "hearth/config"),
    ("<frozen importlib._bootstrap_external>", "<import>"),
    ("<frozen abc>", "stdlib/abc"),
    ("/usr/lib/python3.11/asyncio/tasks.py", "stdlib/asyncio"),
    ("/usr/lib/python3.11/typing.py", "stdlib/typing"),
])
def test_an_allocation_is_told_by_its_package(filename: str, package: str) -> None:
    assert allocations.package_of(filename) == package


def test_nothing_is_logged_unless_allocations_are_traced(
        caplog: pytest.LogCaptureFixture) -> None:
    assert not tracemalloc.is_tracing()
    with caplog.at_level(logging.INFO, logger="hearth.allocations"):
        allocations.log_top()
    assert caplog.records == []


def test_traced_allocations_are_logged_largest_first(caplog: pytest.LogCaptureFixture) -> None:
    tracemalloc.start()
    try:
        held = [bytearray(64) for _ in range(20_000)]  # ~1.6 MB made here, in tests/
        with caplog.at_level(logging.INFO, logger="hearth.allocations"):
            allocations.log_top(top=3)
    finally:
        tracemalloc.stop()
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0].startswith("memory at shutdown: ") and " MiB traced, " in lines[0]
    assert len(lines) == 4, lines
    assert lines[1].startswith("memory held by ") and "test_allocations.py" in lines[1], lines
    assert len(held) == 20_000
