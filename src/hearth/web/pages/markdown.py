"""Markdown for the dashboard, rendered on the server and safe by construction.

CommonMark (plus tables) with raw HTML off: any tag in the text is shown as text, never
parsed. Links and images go through markdown-it's link check, which refuses `javascript:`,
`vbscript:`, `file:` and `data:` URLs (but for a few image types); a refused link stays plain
text. The page's Content-Security-Policy is the second line: no inline script runs, and
images load only from the gateway itself. Code blocks are drawn by `web.pages.code`
(the language's name, Pygments' colours).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from markupsafe import Markup

from hearth.web.pages import code

if TYPE_CHECKING:
    from markdown_it import MarkdownIt


@functools.cache
def _parser() -> MarkdownIt:
    """The one parser, made at the first text rendered (markdown-it is not imported before)."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    parser.add_render_rule("fence", code.fence)
    parser.add_render_rule("code_block", code.code_block)
    return parser


def render(text: str) -> Markup:
    """The text as safe HTML."""
    return Markup(_parser().render(text))  # noqa: S704 - html is off, so the output is escaped
