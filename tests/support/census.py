"""The census tests' one reader of the source tree: `SRC` (src/hearth) and `sources`, every
module under it parsed, by its path relative to `SRC`."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "hearth"


def sources() -> dict[str, ast.Module]:
    """Each module of the gateway's source, parsed, by its path under `SRC`, in path order."""
    return {str(path.relative_to(SRC)): ast.parse(path.read_text("utf-8"), str(path))
            for path in sorted(SRC.rglob("*.py"))}
