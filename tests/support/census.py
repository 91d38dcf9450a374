"""The census tests' one reader of the source tree: `SRC` (src/hearth), `sources`, every
module under it parsed, by its path relative to `SRC`, and `found_by`, what one detector finds
in all of them (a census asserts it is empty, after proving the detector on a planted
violation)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "hearth"


@cache
def sources() -> dict[str, ast.Module]:
    """Each module of the gateway's source, parsed, by its path under `SRC`, in path order
(parsed once per test process; a detector reads the trees and changes nothing)."""
    return {str(path.relative_to(SRC)): ast.parse(path.read_text("utf-8"), str(path))
            for path in sorted(SRC.rglob("*.py"))}


def found_by(detector: Callable[[str, ast.Module], list[str]]) -> list[str]:
    """Every violation `detector` reports in the gateway's source, module by module."""
    return [found for name, tree in sources().items() for found in detector(name, tree)]
