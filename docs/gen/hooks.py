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
    text = items_indented(lists_apart(markdown))
    return site_links(text, repository_path(page.file.src_uri))


LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
TOP_ITEM = re.compile(r"^(?:[-*+]|\d+[.)]) +")
TAB = 4  # Python-Markdown's indent of a list item's blocks (GitHub's is the marker's width)


def lists_apart(markdown: str) -> str:
    """A blank line before each list that starts right under a paragraph's line: GitHub reads
    such a list as a list, Python-Markdown (mkdocs) as more of the paragraph."""
    out: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        opened = re.match(r"^\s*(```|~~~)", line)
        if opened:
            fence = None if fence == opened.group(1) else fence or opened.group(1)
        previous = out[-1] if out else ""
        if (fence is None and LIST_ITEM.match(line) and previous.strip()
                and not LIST_ITEM.match(previous) and not previous.startswith((" ", "\t", "|"))):
            out.append("")
        out.append(line)
    return "\n".join(out)


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
    elif repo.startswith("docs/") and repo.endswith(".md") and (ROOT / repo).is_file():
        page = repo.removeprefix("docs/")
    else:
        return None
    here = where.removeprefix("docs/") if where.startswith("docs/") else {
        v: k for k, v in OUTSIDE.items()}[where]
    relative = posixpath.relpath(page, posixpath.dirname(here) or ".")
    return relative + hash_ + fragment


def items_indented(markdown: str) -> str:
    """The blocks inside a top-level list item (a code block under `1. `, a list under `- `)
    indented by four, as Python-Markdown wants them, where GitHub takes the marker's width."""
    out: list[str] = []
    width = 0  # the open item's marker width; 0: no item open
    fence: str | None = None  # a code block at the top level, left as it is
    for line in markdown.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        if fence is None and width and line.strip() and indent < width and not TOP_ITEM.match(
                line):
            width = 0  # the list ended
        opened = re.match(r"^(```|~~~)", line)
        if width == 0 and (fence or opened):
            if fence is None and opened:
                fence = opened.group(1)
            elif fence and line.strip() == fence:
                fence = None
            out.append(line)
            continue
        item = TOP_ITEM.match(line)
        if item:
            width = len(item.group(0))
        elif width and line.strip() and width < TAB:
            line = " " * (TAB - width) + line
        out.append(line)
    return "\n".join(out)
