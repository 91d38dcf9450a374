"""The generated parts of the documentation, each a page (or a section of one) under docs/ and
the function that makes it, and the two things done with them: compare, write."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from docs.gen import cli_reference, config_reference, http_reference, module_map

DOCS = Path(__file__).resolve().parents[1]
PACKAGE = DOCS.parent / "src" / "hearth"


def _architecture() -> str:
    text = (DOCS / module_map.PAGE).read_text(encoding="utf-8")
    return module_map.rewrite(text, module_map.render(PACKAGE))


# page -> the whole text it should hold
PARTS: dict[str, Callable[[], str]] = {
    config_reference.PAGE: config_reference.render,
    cli_reference.PAGE: cli_reference.render,
    http_reference.PAGE: http_reference.render,
    module_map.PAGE: _architecture,
}


def made() -> dict[str, str]:
    return {page: make() for page, make in PARTS.items()}


def stale() -> list[str]:
    """The pages whose committed text is not what the code makes now."""
    return [page for page, text in made().items() if _current(page) != text]


def write_all() -> list[str]:
    """Write every part that changed; the pages written."""
    written = []
    for page, text in made().items():
        if _current(page) != text:
            (DOCS / page).parent.mkdir(parents=True, exist_ok=True)
            (DOCS / page).write_text(text, encoding="utf-8")
            written.append(page)
    return written


def _current(page: str) -> str | None:
    path = DOCS / page
    return path.read_text(encoding="utf-8") if path.is_file() else None
