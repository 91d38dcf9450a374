"""The web_fetch tool: one page from the public web, as readable text.

This module owns what a fetch may reach and how it reaches it. Only http and https URLs
without credentials are fetched; every host is resolved first and refused when any of its
addresses is loopback, private, link-local, unspecified, multicast, reserved, carrier-grade
NAT or otherwise not public (unless the host is in `[tools] web_fetch_allow_hosts`). The
connection then goes to an address that was checked and to no other: the request is sent to
the IP itself with the original Host header, and for https the certificate is still verified
against the host name (httpx's `sni_hostname` extension), so DNS rebinding cannot slip past
the check. Redirects are followed by hand, each hop checked the same way. The body is read
within `[tools] web_fetch_max_bytes` (web_body.py: decoded by hand, a compression bomb
included, the rest left unread). It also owns the turning of HTML into text.
"""

from __future__ import annotations

import asyncio
import codecs
import ipaddress
import re
import socket
import ssl
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome, ToolRefused
from hearth.tools.files import size_words
from hearth.tools.web_body import ACCEPTED_ENCODINGS, UnreadableEncoding, read_capped

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

USER_AGENT = "Hearth/0.1 (web_fetch)"
MAX_REDIRECTS = 5
ERROR_EXCERPT_CHARS = 500
ALLOW_SETTING = "[tools] web_fetch_allow_hosts"
HTML_SECONDS = 5.0  # reading one page's HTML as text, in a worker thread
HTML_FEED_CHARS = 65536
_REDIRECTS = {301, 302, 303, 307, 308}
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
_NUMERIC_V4 = re.compile(r"[0-9a-fx.]+")


class _Blocked(Exception):
    """A URL or address this tool will not fetch; the reason is half a sentence."""


class _Unreachable(Exception):
    """The fetch could not be made (DNS, connection); the reason is half a sentence."""


# ---------------------------------------------------------------- the URL and its address


@dataclass(frozen=True)
class Target:
    """One URL to request, taken apart: where to connect and what to say in Host."""

    url: str
    scheme: str
    host: str  # ASCII, lower case, no brackets
    port: int
    host_header: str
    path: str  # path and query, never empty


def parse_target(url: str) -> Target:
    """The URL as a Target, or _Blocked for a scheme, credentials or host we do not take."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise _Blocked(f"it is not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise _Blocked("it has no scheme; web_fetch takes only http:// and https:// URLs")
    if scheme not in ("http", "https"):
        raise _Blocked(f"the {scheme}: scheme is not fetched; web_fetch takes only http and "
                       "https URLs")
    if parts.username is not None or parts.password is not None:
        raise _Blocked("it carries a user name or password, and web_fetch never sends "
                       "credentials")
    host = _ascii_host(parts.hostname or "")
    port = port or (443 if scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if parts.port is None else f"{shown}:{port}"
    path = parts.path or "/"
    path += f"?{parts.query}" if parts.query else ""
    clean = parts._replace(fragment="").geturl()
    return Target(clean, scheme, host, port, host_header, path)


def _ascii_host(hostname: str) -> str:
    if not hostname:
        raise _Blocked("it has no host")
    try:
        return hostname.rstrip(".").encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise _Blocked(f"{hostname!r} is not a valid host name") from None


def literal_address(host: str) -> IPAddress | None:
    """The address a host written as an IP literal stands for, in any form a resolver takes
    (2130706433, 0x7f.1, 0177.0.0.1, 127.1, ::ffff:127.0.0.1), or None for a name."""
    try:
        return ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        pass
    if _NUMERIC_V4.fullmatch(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def address_class(ip: IPAddress) -> str | None:
    """What kind of non-public address `ip` is ("a loopback address"), or None if public."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            inner = address_class(embedded)
            return f"an IPv4-mapped form of {embedded}, {inner}" if inner else None
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        metadata = " (the cloud metadata address)" if ip in _METADATA else ""
        return f"a link-local address{metadata}"
    if ip.is_multicast:
        return "a multicast address"
    if ip in _CGNAT:
        return "a carrier-grade NAT address"
    if ip.is_reserved:
        return "a reserved address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "a non-public address"
    return None


def _allowed(host: str, allow_hosts: tuple[str, ...]) -> bool:
    wanted = {h.strip().strip("[]").rstrip(".").lower() for h in allow_hosts}
    return host in wanted


async def checked_addresses(target: Target, allow_hosts: tuple[str, ...]) -> list[IPAddress]:
    """Every address the host stands for, all checked; _Blocked if any is not public."""
    literal = literal_address(target.host)
    if literal is not None:
        addresses = [literal]
    else:
        addresses = await _resolve(target.host, target.port)
    if _allowed(target.host, allow_hosts):
        return addresses
    for ip in addresses:
        kind = address_class(ip)
        if kind is None:
            continue
        if literal is None:
            raise _Blocked(f"{target.host} resolves to {ip}, {kind}; fetching it needs the "
                           f"host in {ALLOW_SETTING}")
        written = "" if str(ip) == target.host else f" the address {ip},"
        raise _Blocked(f"{target.host} is{written} {kind}; fetching it needs the host in "
                       f"{ALLOW_SETTING}")
    return addresses


async def _resolve(host: str, port: int) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise _Unreachable(f"the host {host} could not be resolved ({exc})") from None
    addresses: list[IPAddress] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise _Unreachable(f"the host {host} has no addresses")
    return addresses


# ---------------------------------------------------------------- one pinned request


@dataclass(frozen=True)
class Reply:
    """What one request answered: a redirect, an error, or a (possibly cut) body."""

    status: int
    location: str | None = None
    kind: str = "text"  # "html", "text", "sniff" (no declared type) or "other"
    content_type: str = ""
    charset: str | None = None
    body: bytes = b""
    cut: bool = False


def content_kind(content_type: str) -> str:
    """How a media type is read: "html", "text", "sniff" when none is given, else "other"."""
    if not content_type:
        return "sniff"
    if content_type in ("text/html", "application/xhtml+xml"):
        return "html"
    textual = ("application/json", "application/xml", "application/javascript",
               "application/x-ndjson")
    if content_type.startswith("text/") or content_type in textual:
        return "text"
    if content_type.endswith(("+json", "+xml")):
        return "text"
    return "other"


def _pinned_url(target: Target, ip: IPAddress) -> str:
    host = f"[{ip}]" if ip.version == 6 else str(ip)
    return f"{target.scheme}://{host}:{target.port}{target.path}"


async def pinned_get(target: Target, ip: IPAddress, web_max_bytes: int, timeout: float,
                     verify: ssl.SSLContext | bool) -> Reply:
    """GET `target` from the address `ip` (and no other), with the original Host header and,
    for https, SNI and certificate checks against the host name. Never cookies or credentials,
    never a proxy from the environment. A declared non-text type is refused unread."""
    headers = {"Host": target.host_header, "User-Agent": USER_AGENT,
               "Accept": "text/html, text/plain;q=0.9, application/json;q=0.9, */*;q=0.5",
               "Accept-Encoding": ACCEPTED_ENCODINGS}
    extensions: dict[str, Any] = {}
    if target.scheme == "https":
        extensions["sni_hostname"] = target.host
    async with (
        httpx.AsyncClient(trust_env=False, follow_redirects=False, verify=verify,
                          timeout=httpx.Timeout(timeout)) as client,
        client.stream("GET", _pinned_url(target, ip), headers=headers,
                      extensions=extensions) as response,
    ):
        status = response.status_code
        location = response.headers.get("location")
        if status in _REDIRECTS and location:
            return Reply(status, location=location)
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        kind = content_kind(media)
        if kind == "other" and status < 400:
            raise _Blocked(f"it is {media}, not text; web_fetch reads only web pages, plain "
                           "text and JSON")
        if kind == "other":
            return Reply(status, kind=kind, content_type=media)
        try:  # raw bytes, decoded here within the cap (httpx would inflate a bomb whole)
            body, cut = await read_capped(response.aiter_raw(),
                                          response.headers.get("content-encoding", ""),
                                          web_max_bytes)
        except UnreadableEncoding as exc:
            raise _Blocked(str(exc)) from None
        return Reply(status, None, kind, media, response.charset_encoding, body, cut)


# ---------------------------------------------------------------- HTML to text


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
    """The reply's body as text (HTML made readable); _Blocked for binary with no type."""
    kind = reply.kind
    if kind == "sniff":
        if looks_like_html(reply.body):
            kind = "html"
        elif b"\x00" in reply.body[:4096]:
            raise _Blocked("it has no content type and looks binary; web_fetch reads only "
                           "web pages, plain text and JSON")
    text = decode(reply.body, reply.charset)
    return html_to_text(text) if kind == "html" else text


# ---------------------------------------------------------------- the tool


class WebFetch:
    name = "web_fetch"
    description = (
        "Fetch a web page (http or https) and return its text: HTML is turned into readable "
        "text with the title first; plain text and JSON come back as they are."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The http:// or https:// URL to fetch"},
            "max_chars": {"type": "integer",
                          "description": "At most this many characters of text back"},
        },
        "required": ["url"],
    }
    effect: Effect = "external"
    placed: Placed = "remote"
    parallel_safe = True

    def __init__(self, verify: ssl.SSLContext | None = None) -> None:
        """`verify`: the TLS context to check certificates with (default: the system's)."""
        self._verify: ssl.SSLContext | bool = verify if verify is not None else True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        url = str(args["url"]).strip()
        limit = self._char_limit(args, ctx)
        try:
            async with asyncio.timeout(ctx.web.timeout_seconds):
                target, reply, hops = await self._follow(url, ctx)
        except (TimeoutError, httpx.TimeoutException):
            return _failed(url, f"it took longer than {ctx.web.timeout_seconds:g} seconds")
        except _Unreachable as exc:
            return _failed(url, str(exc))
        except httpx.HTTPError as exc:
            return _failed(url, f"the connection failed ({type(exc).__name__}: {exc})")
        except httpx.InvalidURL as exc:
            raise ToolRefused(f"Refused {url}: it is not a valid URL ({exc}).") from None
        # Turning HTML into text is CPU work (bounded by HTML_SECONDS): off the event loop.
        if reply.status >= 300:
            return await asyncio.to_thread(_http_error, target, reply)
        return await asyncio.to_thread(self._page, target, reply, hops, limit)

    def _char_limit(self, args: dict[str, Any], ctx: ToolContext) -> int:
        asked = args.get("max_chars")
        if asked is None:
            return ctx.output_chars
        if not isinstance(asked, int) or isinstance(asked, bool) or asked < 1:
            raise ToolRefused("Refused: max_chars must be a whole number of at least 1.")
        return min(asked, ctx.output_chars)

    async def _follow(self, url: str, ctx: ToolContext) -> tuple[Target, Reply, int]:
        """Fetch `url`, following at most MAX_REDIRECTS redirects, every hop checked."""
        current, came_from = url, None
        for hops in range(MAX_REDIRECTS + 1):
            try:
                target = parse_target(current)
                addresses = await checked_addresses(target, ctx.web.allow_hosts)
                reply = await self._get(target, addresses, ctx)
            except _Blocked as exc:
                where = current if came_from is None else (
                    f"the redirect from {came_from} to {current}")
                raise ToolRefused(f"Refused {where}: {exc}.") from None
            if reply.location is None:
                return target, reply, hops
            came_from, current = target.url, urljoin(target.url, reply.location)
        raise ToolRefused(f"Refused {url}: it redirected more than {MAX_REDIRECTS} times "
                          f"(the last hop was to {current}).")

    async def _get(self, target: Target, addresses: list[IPAddress],
                   ctx: ToolContext) -> Reply:
        """The first checked address that takes the connection answers."""
        failure: httpx.ConnectError | None = None
        for ip in addresses:
            try:
                return await pinned_get(target, ip, ctx.web.max_bytes,
                                        ctx.web.timeout_seconds, self._verify)
            except httpx.ConnectError as exc:
                failure = exc
        assert failure is not None
        raise failure

    def _page(self, target: Target, reply: Reply, hops: int, limit: int) -> ToolOutcome:
        try:
            text = page_text(reply)
        except _Blocked as exc:
            raise ToolRefused(f"Refused {target.url}: {exc}.") from None
        notes = []
        if reply.cut:
            notes.append(f"(cut at {size_words(len(reply.body))}; the rest of the page was "
                         "not read)")
        if len(text) > limit:
            text = text[:limit]
            notes.append(f"[cut at {limit} characters]")
        output = "\n".join([text, *notes]) if notes else text
        extra = "".join([
            f", after {hops} redirect{'s' if hops != 1 else ''}" if hops else "",
            f", cut at {size_words(len(reply.body))}" if reply.cut else "",
        ])
        receipt = (f"Fetched {size_words(len(reply.body))} of text from {target.url} "
                   f"(HTTP {reply.status}{extra}).")
        return ToolOutcome(output=output, receipt=receipt)


def _http_error(target: Target, reply: Reply) -> ToolOutcome:
    head = f"HTTP {reply.status} from {target.url}"
    excerpt = ""
    if reply.kind != "other" and reply.body:
        try:
            excerpt = page_text(reply)[:ERROR_EXCERPT_CHARS].strip()
        except _Blocked:
            excerpt = ""
    output = f"{head}\n\n{excerpt}" if excerpt else head
    return ToolOutcome(output=output, receipt=f"Got {head}.", ok=False)


def _failed(url: str, reason: str) -> ToolOutcome:
    sentence = f"Could not fetch {url}: {reason}."
    return ToolOutcome(output=sentence, receipt=sentence, ok=False)
