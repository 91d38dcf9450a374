"""Markdown as Telegram shows it: the answer's Markdown rendered to Telegram's HTML subset.

Telegram's HTML knows b, i, s, u, code, pre, a and blockquote, and nothing of headings,
lists or tables. So headings become bold lines, list items "•" or "1." lines, a rule a line
of dashes, a table its rows with " | " between cells, an image its alt text and address, and
raw HTML in the Markdown is shown as the text it is. Every text is escaped (`&`, `<`, `>`), a
link keeps only an http(s), mailto or tg address (any other is shown as its text). `to_plain`
is the fallback when Telegram still refuses what this made: the Markdown as written.
"""

from __future__ import annotations

from html import escape

from markdown_it import MarkdownIt
from markdown_it.token import Token

_PARSER = MarkdownIt("commonmark").enable(["strikethrough", "table"])
_INLINE_TAGS = {"strong": "b", "em": "i", "s": "s"}
_SAFE_SCHEMES = ("http://", "https://", "mailto:", "tg://")


def to_html(markdown: str) -> str:
    """The Markdown as Telegram HTML (trailing blank lines trimmed)."""
    tokens = _PARSER.parse(markdown)
    return _blocks(tokens).strip("\n")


def _blocks(tokens: list[Token]) -> str:
    out: list[str] = []
    lists: list[list[int]] = []  # per open list: [next number] ([-1] for bullets)
    for token in tokens:
        kind = token.type
        if kind == "heading_open":
            out.append("<b>")
        elif kind == "heading_close":
            out.append("</b>\n\n")
        elif kind == "paragraph_close":
            out.append("\n" if lists else "\n\n")
        elif kind in ("bullet_list_open", "ordered_list_open"):
            lists.append([int(token.attrGet("start") or 1) if kind == "ordered_list_open"
                          else -1])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
            out.append("\n" if not lists else "")
        elif kind == "list_item_open":
            out.append(_bullet(lists))
        elif kind == "blockquote_open":
            out.append("<blockquote>")
        elif kind == "blockquote_close":
            out[-1] = out[-1].rstrip("\n") if out else ""
            out.append("</blockquote>\n\n")
        elif kind in ("fence", "code_block"):
            out.append(_code(token))
        elif kind == "hr":
            out.append("——————\n\n")
        elif kind == "html_block":
            out.append(escape(token.content, quote=False) + "\n")
        elif kind == "inline":
            out.append(_inline(token.children or []))
        elif kind in ("tr_close",):
            out.append("\n")
        elif kind in ("th_open", "td_open") and out and not out[-1].endswith("\n"):
            out.append(" | ")
        elif kind == "table_close":
            out.append("\n")
    return "".join(out)


def _bullet(lists: list[list[int]]) -> str:
    indent = "  " * (len(lists) - 1)
    current = lists[-1] if lists else [-1]
    if current[0] < 0:
        return f"{indent}• "
    number = current[0]
    current[0] += 1
    return f"{indent}{number}. "


def _code(token: Token) -> str:
    language = (token.info or "").split()[0] if token.info else ""
    body = escape(token.content.rstrip("\n"), quote=False)
    if language:
        return f'<pre><code class="language-{escape(language)}">{body}</code></pre>\n\n'
    return f"<pre>{body}</pre>\n\n"


def _inline(children: list[Token]) -> str:
    out: list[str] = []
    links: list[bool] = []  # per open link: whether it became an <a>
    for child in children:
        kind = child.type
        if kind == "text":
            out.append(escape(child.content, quote=False))
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "code_inline":
            out.append(f"<code>{escape(child.content, quote=False)}</code>")
        elif kind.endswith("_open") and kind[:-5] in _INLINE_TAGS:
            out.append(f"<{_INLINE_TAGS[kind[:-5]]}>")
        elif kind.endswith("_close") and kind[:-6] in _INLINE_TAGS:
            out.append(f"</{_INLINE_TAGS[kind[:-6]]}>")
        elif kind == "link_open":
            href = str(child.attrGet("href") or "")
            safe = href.lower().startswith(_SAFE_SCHEMES)
            links.append(safe)
            if safe:
                out.append(f'<a href="{escape(href, quote=True)}">')
        elif kind == "link_close":
            if links.pop():
                out.append("</a>")
        elif kind == "image":
            src = str(child.attrGet("src") or "")
            out.append(escape(f"{child.content} ({src})".strip(), quote=False))
        elif kind == "html_inline":
            out.append(escape(child.content, quote=False))
    return "".join(out)


def to_plain(markdown: str) -> str:
    return markdown
