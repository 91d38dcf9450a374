"""Where web_fetch may connect, and one request made there: the SSRF guard.

This module owns what a fetch may reach and how it reaches it. Only http and https URLs
without credentials are fetched; every host is resolved first and refused when any of its
addresses is loopback, private, link-local, unspecified, multicast, reserved, carrier-grade
NAT or otherwise not public (unless the host is in `[tools] web_fetch_allow_hosts`). The
connection then goes to an address that was checked and to no other (`pinned_get`): the
request is sent to the IP itself with the original Host header, and for https the certificate
is still verified against the host name (httpx's `sni_hostname` extension), so DNS rebinding
cannot slip past the check. Redirects are not followed here: the tool (web.py) follows them by
hand, each hop checked again through this module. The body is read within
`[tools] web_fetch_max_bytes` (web_body.py: decoded by hand, a compression bomb included, the
rest left unread).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hearth.tools.web_body import ACCEPTED_ENCODINGS, UnreadableEncoding, read_capped

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

USER_AGENT = "Hearth/0.1 (web_fetch)"
ALLOW_SETTING = "[tools] web_fetch_allow_hosts"
_REDIRECTS = {301, 302, 303, 307, 308}
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
_NUMERIC_V4 = re.compile(r"[0-9a-fx.]+")


class Blocked(Exception):
    """A URL or address this tool will not fetch; the reason is half a sentence."""


class Unreachable(Exception):
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
    """The URL as a Target, or Blocked for a scheme, credentials or host we do not take."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise Blocked(f"it is not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise Blocked("it has no scheme; web_fetch takes only http:// and https:// URLs")
    if scheme not in ("http", "https"):
        raise Blocked(f"the {scheme}: scheme is not fetched; web_fetch takes only http and "
                       "https URLs")
    if parts.username is not None or parts.password is not None:
        raise Blocked("it carries a user name or password, and web_fetch never sends "
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
        raise Blocked("it has no host")
    try:
        return hostname.rstrip(".").encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise Blocked(f"{hostname!r} is not a valid host name") from None


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
    """Every address the host stands for, all checked; Blocked if any is not public."""
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
            raise Blocked(f"{target.host} resolves to {ip}, {kind}; fetching it needs the "
                           f"host in {ALLOW_SETTING}")
        written = "" if str(ip) == target.host else f" the address {ip},"
        raise Blocked(f"{target.host} is{written} {kind}; fetching it needs the host in "
                       f"{ALLOW_SETTING}")
    return addresses


async def _resolve(host: str, port: int) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise Unreachable(f"the host {host} could not be resolved ({exc})") from None
    addresses: list[IPAddress] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise Unreachable(f"the host {host} has no addresses")
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
                     verify: ssl.SSLContext | bool, any_type: bool = False) -> Reply:
    """GET `target` from the address `ip` (and no other), with the original Host header and,
    for https, SNI and certificate checks against the host name. Never cookies or credentials,
    never a proxy from the environment. A declared non-text type is refused unread, unless
    `any_type` (a file fetched whole: an image a request names by URL)."""
    import httpx  # when the web tool is first used, not at every start

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
        kind = "sniff" if any_type and status < 400 else content_kind(media)
        if kind == "other" and status < 400:
            raise Blocked(f"it is {media}, not text; web_fetch reads only web pages, plain "
                           "text and JSON")
        if kind == "other":
            return Reply(status, kind=kind, content_type=media)
        try:  # raw bytes, decoded here within the cap (httpx would inflate a bomb whole)
            body, cut = await read_capped(response.aiter_raw(),
                                          response.headers.get("content-encoding", ""),
                                          web_max_bytes)
        except UnreadableEncoding as exc:
            raise Blocked(str(exc)) from None
        return Reply(status, None, kind, media, response.charset_encoding, body, cut)
