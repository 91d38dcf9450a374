"""The site's mkdocs hooks: README.md is its home page and CONTRIBUTING.md a page, read where
they are (the repository's root, outside docs/), and every relative link is made a link of the
site.

The Markdown files are written to be read in the repository (on a forge, or in a clone), so
their links are the repository's: `docs/models.md` from the README, `../README.md` from a page.
On the site, a link to one of its pages leads there; a link to another file of the repository
(`.ci/run`, `bench/README.md`) has no page to lead to and is kept as its text.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
# the site's pages that are files outside docs/: the page's name -> the file it is
OUTSIDE = {"index.md": "README.md", "contributing.md": "CONTRIBUTING.md"}
FENCE = re.compile(r"^([ \t]*)(```|~~~)[^\n]*\n.*?^[ \t]*\2[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
WEB = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def on_files(files: Files, config: Any) -> Files:
    """The README and CONTRIBUTING join the site's files as pages."""
    for page, source in OUTSIDE.items():
        text = (ROOT / source).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    return site_links(markdown, repository_path(page.file.src_uri))


def repository_path(src_uri: str) -> str:
    """Where a page of the site is in the repository."""
    return OUTSIDE.get(src_uri, f"docs/{src_uri}")


def site_links(markdown: str, where: str) -> str:
    """The text with each relative link outside code made the site's (see the module)."""
    def one(match: re.Match[str]) -> str:
        target = site_target(match.group(2), where)
        return match.group(1) if target is None else f"[{match.group(1)}]({target})"

    def prose(text: str) -> str:
        """Links outside code spans changed (a span in a link's text stays in it)."""
        spans: list[str] = []

        def hold(found: re.Match[str]) -> str:
            spans.append(found.group(0))
            return f"\0{len(spans) - 1}\0"

        changed = LINK.sub(one, CODE_SPAN.sub(hold, text))
        return re.sub(r"\0(\d+)\0", lambda found: spans[int(found.group(1))], changed)

    return _outside(FENCE, markdown, prose)


def _outside(pattern: re.Pattern[str], text: str, change: Callable[[str], str]) -> str:
    """The text with `change` applied to what lies between the matches of `pattern`."""
    out, last = [], 0
    for found in pattern.finditer(text):
        out += [change(text[last:found.start()]), found.group(0)]
        last = found.end()
    return "".join([*out, change(text[last:])])


def site_target(target: str, where: str) -> str | None:
    """A link's target on the site: the same for a web address or an anchor of the page, a
    page's for a page of the site, None (no link) for another file of the repository."""
    if WEB.match(target) or target.startswith("#"):
        return target
    path, hash_, fragment = target.partition("#")
    repo = posixpath.normpath(posixpath.join(posixpath.dirname(where), path))
    pages = {source: page for page, source in OUTSIDE.items()}
    if repo in pages:
        page = pages[repo]
    elif repo.startswith("docs/") and repo.endswith(".md"):
        page = repo.removeprefix("docs/")
    else:
        return None
    here = where.removeprefix("docs/") if where.startswith("docs/") else {
        v: k for k, v in OUTSIDE.items()}[where]
    relative = posixpath.relpath(page, posixpath.dirname(here) or ".")
    return relative + hash_ + fragment
