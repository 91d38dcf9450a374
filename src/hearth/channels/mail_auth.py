"""Who vouched for an email: the `Authentication-Results` headers (RFC 8601) written by the one
receiving mail server the owner names (`authserv_id`), read by their grammar, and whether what
that server found proves the mail's From address.

Proof is a pass, in a header of the named server, of one of: DKIM whose signing domain
(`header.d`, else the domain of `header.i`) is aligned with the From domain; SPF whose
`smtp.mailfrom` domain is aligned with it; DMARC for the From domain itself (`header.from`).
Aligned means the same domain or one a subdomain of the other (mail.example.org and
example.org): RFC 7489 §3.1's relaxed alignment short of the public-suffix list, so
a.example.org and b.example.org, which DMARC would align, do not. Every other header is
ignored: anyone can write one, and RFC 8601 §5 has the receiving server remove, on the way in,
those claiming its own id. Only the plain form such a server writes counts: the id first, a
bare token equal to `authserv_id` (no comment before it, no quotes), so a spelling the server's
remover might not take for its own is not taken for it here either.

Pure functions, linear in the header's length; a header that does not parse proves nothing,
and a result that does not parse is left out. Comments are read (and dropped) as the grammar
has them: nested, with quoted pairs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

KEYWORD = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?")
VERSION = re.compile(r"[0-9]{1,9}")
SPECIALS = ";=/"
MAX_HEADER = 16_384  # a receiving server's own header is a few hundred characters


@dataclass(frozen=True)
class Token:
    text: str
    quoted: bool = False  # a quoted-string (its quotes and escapes taken off)


@dataclass(frozen=True)
class Result:
    """One `method=result ptype.property=value …` of a header."""

    method: str  # lower-cased: dkim, spf, dmarc, …
    result: str  # lower-cased: pass, fail, none, …
    properties: dict[str, str]  # "header.d" → "example.org" (names lower-cased)


@dataclass(frozen=True)
class Results:
    """One Authentication-Results header: who wrote it, and what it found."""

    authserv_id: str
    results: tuple[Result, ...]


def proving(headers: Iterable[str], authserv_id: str | None, sender: str) -> str | None:
    """The method ("dkim", "spf", "dmarc") by which the server `authserv_id` vouched, in its
    own headers, for the From address `sender`; None when nothing proves it."""
    domain = sender.rpartition("@")[2]
    if not authserv_id or not domain:
        return None
    for value in headers:
        read = parse_results(value)
        if read is None or read.authserv_id != authserv_id:
            continue
        for result in read.results:
            if result.result == "pass" and _vouches(result, domain):
                return result.method
    return None


def _vouches(result: Result, domain: str) -> bool:
    said = result.properties
    if result.method == "dkim":
        signer = said.get("header.d") or said.get("header.i", "").rpartition("@")[2]
        return aligned(signer, domain)
    if result.method == "spf":
        return aligned(said.get("smtp.mailfrom", "").rpartition("@")[2], domain)
    if result.method == "dmarc":
        return _domain(said.get("header.from", "")) == _domain(domain) != ""
    return False


def aligned(domain: str, from_domain: str) -> bool:
    """`domain` and `from_domain` are one, or one is a subdomain of the other."""
    a, b = _domain(domain), _domain(from_domain)
    if "." not in a or "." not in b:
        return False
    return a == b or a.endswith("." + b) or b.endswith("." + a)


def _domain(text: str) -> str:
    name = text.strip().lower().rstrip(".")
    return name if re.fullmatch(r"[a-z0-9_.-]{1,253}", name) and ".." not in name else ""


# -- the grammar ----------------------------------------------------------------------------

def parse_results(value: str) -> Results | None:
    """One header's value as RFC 8601 §2.2 has it; None when it does not parse or does not
    start with a bare authserv-id."""
    if len(value) > MAX_HEADER or not value.strip() or value.lstrip()[0] in '("':
        return None
    tokens = _tokens(value)
    if tokens is None:
        return None
    groups = _split(tokens)
    head = groups[0]
    if not head or head[0].quoted or head[0].text in SPECIALS:
        return None
    if len(head) > 2 or (len(head) == 2 and not VERSION.fullmatch(head[1].text)):
        return None
    rest = [group for group in groups[1:] if group]
    if [[t.text.lower() for t in group] for group in rest] == [["none"]]:
        rest = []  # no-result: the server checked nothing
    found = (_result(group) for group in rest)
    return Results(head[0].text, tuple(r for r in found if r is not None))


def _result(tokens: list[Token]) -> Result | None:
    """`method[/version]=result` then `name=value` pairs (reason=, ptype.property=)."""
    words = [t.text for t in tokens]
    at = 1
    if len(words) >= 3 and words[1] == "/" and VERSION.fullmatch(words[2]):
        at = 3
    if len(words) < at + 2 or words[at] != "=" or not _keyword(tokens[0], tokens[at + 1]):
        return None
    properties: dict[str, str] = {}
    pairs = tokens[at + 2:]
    if len(pairs) % 3:
        return None
    for i in range(0, len(pairs), 3):
        name, equals, value = pairs[i:i + 3]
        if name.quoted or equals.text != "=" or (not value.quoted and value.text in SPECIALS):
            return None
        key = name.text.lower()
        if key != "reason" and not _property(key):
            return None
        if key in properties:
            return None  # said twice: which one the server meant is not known
        properties[key] = value.text
    return Result(words[0].lower(), words[at + 1].lower(), properties)


def _keyword(*tokens: Token) -> bool:
    return all(not t.quoted and KEYWORD.fullmatch(t.text) for t in tokens)


def _property(key: str) -> bool:
    ptype, dot, name = key.partition(".")
    return bool(dot) and bool(KEYWORD.fullmatch(ptype)) and bool(KEYWORD.fullmatch(name))


def _split(tokens: list[Token]) -> list[list[Token]]:
    groups: list[list[Token]] = [[]]
    for token in tokens:
        if token.text == ";" and not token.quoted:
            groups.append([])
        else:
            groups[-1].append(token)
    return groups


def _tokens(text: str) -> list[Token] | None:
    """Words, quoted strings and the specials `;`, `=`, `/`, with comments and folding white
    space dropped; None for an unclosed comment or quoted string."""
    tokens: list[Token] = []
    word: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char in "(\"" or char.isspace() or char in SPECIALS:
            if word:
                tokens.append(Token("".join(word)))
                word = []
        if char == "(":
            i = _past_comment(text, i)
        elif char == '"':
            quoted, i = _quoted(text, i)
            if quoted is None:
                return None
            tokens.append(quoted)
        else:
            if char in SPECIALS:
                tokens.append(Token(char))
            elif not char.isspace():
                word.append(char)
            i += 1
        if i < 0:
            return None
    if word:
        tokens.append(Token("".join(word)))
    return tokens


def _past_comment(text: str, i: int) -> int:
    """The index just past the comment opening at `i` (comments nest); -1 if it never ends."""
    depth = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        i += 1
        if depth == 0:
            return i
    return -1


def _quoted(text: str, i: int) -> tuple[Token | None, int]:
    """The quoted string opening at `i`, and the index past it (None if it never ends)."""
    kept: list[str] = []
    i += 1
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            kept.append(text[i + 1])
            i += 2
        elif char == '"':
            return Token("".join(kept), quoted=True), i + 1
        else:
            kept.append(char)
            i += 1
    return None, i
