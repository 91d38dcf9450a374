"""Code blocks in an answer: each drawn with its language's name and its words coloured by
Pygments, on the server, so a reload draws what the live page drew (one renderer).

A block is `<div class="code-block">` holding a head (the language's name; the page's script
adds Copy there) and `<pre><code>`. The colours are classes (Pygments' short token names),
coloured by the stylesheet for the light and the dark theme: nothing inline, so the page's
Content-Security-Policy needs no exception. Pygments escapes every character of the code; the
language's name is escaped too; a language Pygments does not know is drawn uncoloured.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from markupsafe import escape

if TYPE_CHECKING:
    from markdown_it.token import Token
    from pygments.formatters import HtmlFormatter
    from pygments.lexer import Lexer

MAX_LANGUAGE = 40  # characters of a fence's language name shown
MAX_COLOURED = 200_000  # characters of one block coloured; a longer one is drawn plain
CLASS_SAFE = re.compile(r"[A-Za-z0-9_+#.-]+")  # a language name fit for a class attribute


def fence(_renderer: Any, tokens: list[Token], idx: int, _options: Any, _env: Any) -> str:
    """markdown-it's `fence` rule (bound to its renderer): a fenced block (```python)."""
    token = tokens[idx]
    from markdown_it.common.utils import unescapeAll

    info = unescapeAll(token.info).strip() if token.info else ""
    language = info.split(maxsplit=1)[0][:MAX_LANGUAGE] if info else ""
    return block(token.content, language)


def code_block(_renderer: Any, tokens: list[Token], idx: int, _options: Any, _env: Any) -> str:
    """markdown-it's `code_block` rule: an indented block, which names no language."""
    return block(tokens[idx].content, "")


def block(code: str, language: str) -> str:
    named = str(escape(language))
    head = (f'<div class="code-head"><span class="code-lang">{named}</span></div>' if language
            else '<div class="code-head"></div>')
    lexer = _lexer(language.lower()) if language and len(code) <= MAX_COLOURED else None
    body = _coloured(code, lexer) if lexer is not None else str(escape(code))
    kind = f' class="language-{language}"' if CLASS_SAFE.fullmatch(language) else ""
    return f'<div class="code-block">{head}<pre><code{kind}>{body}</code></pre></div>\n'


def _coloured(code: str, lexer: Lexer) -> str:
    from pygments import highlight

    return highlight(code, lexer, _formatter())


@functools.cache
def _lexer(name: str) -> Lexer | None:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@functools.cache
def _formatter() -> HtmlFormatter:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True)
