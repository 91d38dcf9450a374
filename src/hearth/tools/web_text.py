"""Turning a fetched body into readable text: HTML made plain, with a time limit.

Owns `page_text` (a reply's body as text in its charset; HTML sniffed when no type is given,
binary with no type refused) and `html_to_text`: an HTMLParser subclass that keeps the title
apart, drops scripts and styles and puts blocks on their own lines. The stdlib parser is
quadratic on some malformed input, so a page is fed a piece at a time and reading stops, with
a note, after `HTML_SECONDS`; the tool runs this in a worker thread, off the event loop.
"""

from __future__ import annotations

import codecs
import re
import time
from html.parser import HTMLParser

from hearth.tools.web_reach import Blocked, Reply

HTML_SECONDS = 5.0  # reading one page's HTML as text, in a worker thread
HTML_FEED_CHARS = 65536


class _TextMaker(HTMLParser):
    """Readable text from HTML: title apart, no scripts or styles, blocks on their own lines."""

    SKIP = frozenset({"script", "style", "noscript", "head", "template", "svg", "iframe",
                      "object"})
    BLOCKS = frozenset({"p", "div", "section", "article", "header", "footer", "nav", "main",
                        "aside", "blockquote", "pre", "table", "tr", "ul", "ol", "dl", "dt",
                        "dd", "form", "fieldset", "figure", "figcaption", "address",
                        "details", "summary", "hr", "br", "body", "html", "td", "th"})
    PARAGRAPHS = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre",
                            "table", "ul", "ol", "dl"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.out: list[str] = []
        self._skipping: list[str] = []
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self.title and set(self._skipping) <= {"head"}:
            self._in_title = True  # the page's own title, not an SVG's
        elif tag == "body" and "head" in self._skipping:  # a head left open ends here
            del self._skipping[self._skipping.index("head"):]
        if tag in self.SKIP:
            self._skipping.append(tag)
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "li":
            self.out.append("\n- ")
        elif tag in self.BLOCKS and not (self.out and self.out[-1] == "\n- "):
            self.out.append("\n\n" if tag in self.PARAGRAPHS else "\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.BLOCKS:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self._skipping:
            cut = len(self._skipping) - 1 - self._skipping[::-1].index(tag)
            del self._skipping[cut:]
        elif tag in self.PARAGRAPHS or re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n")
        elif tag in self.BLOCKS or tag == "li":
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._skipping:
            self.out.append(data)


def html_to_text(html: str, seconds: float = HTML_SECONDS) -> str:
    """The page's title first, then its text with block breaks kept and whitespace collapsed.

    The stdlib's parser is quadratic on some malformed input ('<!' a million times: over a
    minute), so the page is fed a piece at a time and reading stops, with a note, once it has
    taken `seconds`; a large unparsable remainder is left out rather than forced through."""
    maker = _TextMaker()
    deadline = time.monotonic() + seconds
    note = ""
    for at in range(0, len(html), HTML_FEED_CHARS):
        if time.monotonic() > deadline:
            note = (f"[the rest of the page was left out: it could not be read as HTML "
                    f"within {seconds:g} seconds]")
            break
        maker.feed(html[at:at + HTML_FEED_CHARS])
    if not note and len(maker.rawdata) > HTML_FEED_CHARS:
        note = "[the rest of the page was left out: it is not well-formed HTML]"
    if not note:
        maker.close()
    title = " ".join("".join(maker.title).split())
    body = tidy_lines("".join(maker.out))
    text = f"{title}\n\n{body}".strip() if title else body
    return f"{text}\n{note}" if note else text


def tidy_lines(text: str) -> str:
    """Whitespace collapsed within lines; at most one blank line in a row; no empty bullets."""
    lines: list[str] = []
    for raw in text.split("\n"):
        line = " ".join(raw.split())
        if line in ("-", "#", "##", "###", "####", "#####", "######"):
            continue
        if line or (lines and lines[-1]):
            lines.append(line)
    return "\n".join(lines).strip()


def looks_like_html(body: bytes) -> bool:
    head = body[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or any(
        mark in head for mark in (b"<html", b"<head", b"<body"))


def decode(body: bytes, charset: str | None) -> str:
    """The body as text in its declared charset, else UTF-8; bad bytes become U+FFFD."""
    encoding = "utf-8"
    if charset:
        try:
            encoding = codecs.lookup(charset).name
        except LookupError:
            pass
    return body.decode(encoding, errors="replace")


def page_text(reply: Reply) -> str:
    """The reply's body as text (HTML made readable); Blocked for binary with no type."""
    kind = reply.kind
    if kind == "sniff":
        if looks_like_html(reply.body):
            kind = "html"
        elif b"\x00" in reply.body[:4096]:
            raise Blocked("it has no content type and looks binary; web_fetch reads only "
                           "web pages, plain text and JSON")
    text = decode(reply.body, reply.charset)
    return html_to_text(text) if kind == "html" else text
