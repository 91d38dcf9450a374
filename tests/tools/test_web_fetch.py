"""web_fetch against real local servers: what it refuses, what it pins, what it reads."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from hearth.tools.base import ToolContext, ToolRefused
from hearth.tools.web import WebFetch
from hearth.tools.web_reach import address_class, literal_address
from hearth.tools.web_text import html_to_text
from tests.support.web_site import Route, Site, context, fetch, serve


def refusal(ctx: ToolContext, url: str, tool: WebFetch | None = None) -> str:
    """The sentence the fetch is refused with, which must come before any connection."""
    started = time.monotonic()
    with pytest.raises(ToolRefused) as caught:
        fetch(ctx, url, tool)
    assert time.monotonic() - started < 1.0
    sentence = caught.value.sentence
    assert sentence.startswith("Refused ") and sentence.endswith(".")
    return sentence


def page(body: str, ctype: str = "text/html; charset=utf-8", status: int = 200) -> Route:
    return (status, {"Content-Type": ctype}, body.encode("utf-8"))


def redirect(to: str, status: int = 302) -> Route:
    return (status, {"Location": to}, b"")


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[list[str]]]:
    """Names of our own: each lookup of a name takes the next answer (the last one repeats);
    every other name goes to the real resolver. The answers used are recorded in `calls`."""
    answers: dict[str, list[list[str]]] = {}
    real = socket.getaddrinfo

    def lookup(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name not in answers:
            return real(host, port, *args, **kwargs)
        answers.setdefault("calls", []).append([name])
        queue = answers[name]
        ips = queue.pop(0) if len(queue) > 1 else queue[0]
        return [(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (ip, port)) for ip in ips]

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    return answers


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("url, scheme", [
    ("file:///etc/passwd", "file:"), ("ftp://example.org/x", "ftp:"),
    ("gopher://example.org/", "gopher:"), ("data:text/plain,hello", "data:"),
    ("javascript:alert(1)", "javascript:"),
])
def test_a_scheme_other_than_http_is_refused(tmp_path: Path, url: str, scheme: str) -> None:
    sentence = refusal(context(tmp_path), url)
    assert f"the {scheme} scheme is not fetched" in sentence and url in sentence


def test_a_url_without_a_scheme_is_refused(tmp_path: Path) -> None:
    assert "has no scheme" in refusal(context(tmp_path), "example.org/page")


def test_credentials_in_the_url_are_refused(tmp_path: Path, site: Site) -> None:
    sentence = refusal(context(tmp_path), site.url("/").replace("//", "//user:pw@"))
    assert "user name or password" in sentence and "never sends credentials" in sentence
    assert site.seen == []


def test_loopback_is_refused_without_the_allow_list(tmp_path: Path, site: Site) -> None:
    site.routes["/"] = page("<p>secret</p>")
    url = site.url("/")
    sentence = refusal(context(tmp_path, allow=()), url)
    assert f"Refused {url}: 127.0.0.1 is a loopback address" in sentence
    assert "web_fetch_allow_hosts" in sentence
    assert site.seen == []


def test_a_name_that_resolves_to_loopback_is_refused(tmp_path: Path, site: Site) -> None:
    url = site.url("/", host="localhost")
    sentence = refusal(context(tmp_path), url)  # 127.0.0.1 is allowed, the name is not
    assert f"Refused {url}: localhost resolves to" in sentence
    assert "a loopback address" in sentence and "web_fetch_allow_hosts" in sentence
    assert site.seen == []


@pytest.mark.parametrize("url, words", [
    ("http://[::1]/", "::1 is a loopback address"),
    ("http://169.254.169.254/latest/meta-data/", "a link-local address (the cloud metadata"),
    ("http://10.0.0.1/", "10.0.0.1 is a private address"),
    ("http://192.168.1.1/", "192.168.1.1 is a private address"),
    ("http://172.16.5.4/", "a private address"),
    ("http://100.64.0.1/", "a carrier-grade NAT address"),
    ("http://[fc00::1]/", "a private address"),
    ("http://[fe80::1]/", "a link-local address"),
    ("http://0.0.0.0/", "0.0.0.0 is an unspecified address"),
    ("http://[::]/", "an unspecified address"),
    ("http://224.0.0.1/", "a multicast address"),
    ("http://240.0.0.1/", "a reserved address"),
    ("http://[::ffff:127.0.0.1]/", "an IPv4-mapped form of 127.0.0.1, a loopback address"),
    ("http://[::ffff:169.254.169.254]/", "an IPv4-mapped form of 169.254.169.254"),
    ("http://2130706433/", "2130706433 is the address 127.0.0.1, a loopback address"),
    ("http://0x7f.1/", "0x7f.1 is the address 127.0.0.1, a loopback address"),
    ("http://0177.0.0.1/", "the address 127.0.0.1, a loopback address"),
    ("http://127.1:8080/", "the address 127.0.0.1, a loopback address"),
])
def test_non_public_addresses_are_refused_before_connecting(
    tmp_path: Path, url: str, words: str
) -> None:
    sentence = refusal(context(tmp_path, allow=(), timeout=0.5), url)
    assert f"Refused {url}: " in sentence and words in sentence
    assert "web_fetch_allow_hosts" in sentence


def test_a_name_with_any_non_public_address_is_refused(
    tmp_path: Path, fake_dns: dict[str, list[list[str]]]
) -> None:
    fake_dns["mixed.test"] = [["93.184.216.34", "10.1.2.3"]]
    sentence = refusal(context(tmp_path, timeout=0.5), "http://mixed.test/")
    assert "mixed.test resolves to 10.1.2.3, a private address" in sentence


def test_address_classes_and_literals() -> None:
    assert address_class(literal_address("93.184.216.34") or _never()) is None
    assert address_class(literal_address("2606:4700::1111") or _never()) is None
    assert address_class(literal_address("::ffff:8.8.8.8") or _never()) is None
    assert address_class(literal_address("64:ff9b::7f00:1") or _never()) is not None
    assert address_class(literal_address("2002:7f00:1::") or _never()) is not None
    assert literal_address("example.org") is None and literal_address("cafe.be") is None


def _never() -> Any:
    raise AssertionError("not an address")


# ---------------------------------------------------------------- pages


def test_an_allowed_host_gives_html_as_text(tmp_path: Path, site: Site) -> None:
    html = (
        "<!doctype html><html><head><title> The  Page </title>"
        "<style>body{color:red}</style><script>var secret = 1;</script></head>"
        "<body><h1>Heading</h1><p>First   paragraph with a <a href='/x'>link text</a>.</p>"
        "<ul><li>one</li><li>two</li></ul><noscript>enable js</noscript>"
        "<script>alert('x')</script><p>Caf&eacute; &amp; more</p></body></html>")
    site.routes["/page"] = page(html)
    outcome = fetch(context(tmp_path), site.url("/page"))
    assert outcome.ok
    lines = outcome.output.splitlines()
    assert lines[0] == "The Page"
    assert "# Heading" in lines and "- one" in lines and "- two" in lines
    assert "First paragraph with a link text." in lines and "Café & more" in lines
    for hidden in ("secret", "alert", "color:red", "enable js"):
        assert hidden not in outcome.output
    assert outcome.receipt == (f"Fetched {len(html.encode())} bytes of text from "
                               f"{site.url('/page')} (HTTP 200).")
    headers = site.seen[0][1]
    assert headers["user-agent"] == "Hearth/0.1 (web_fetch)"
    assert "cookie" not in headers and "authorization" not in headers


def test_html_without_a_content_type_is_sniffed() -> None:
    assert html_to_text("<title>T</title><div>a<br>b</div><svg><title>no</title></svg>") == (
        "T\n\na\nb")


def test_plain_text_and_json_pass_through(tmp_path: Path, site: Site) -> None:
    text = "line one\n  <b>not html</b>\nline three\n"
    site.routes["/t"] = page(text, "text/plain; charset=utf-8")
    data = json.dumps({"a": [1, 2], "b": "ü"})
    site.routes["/j"] = page(data, "application/json")
    site.routes["/latin"] = (200, {"Content-Type": "text/plain; charset=iso-8859-1"},
                             "café".encode("latin-1"))
    ctx = context(tmp_path)
    assert fetch(ctx, site.url("/t")).output == text
    assert json.loads(fetch(ctx, site.url("/j")).output) == {"a": [1, 2], "b": "ü"}
    assert fetch(ctx, site.url("/latin")).output == "café"


def test_an_image_is_refused_by_its_type(tmp_path: Path, site: Site) -> None:
    site.routes["/cat.png"] = (200, {"Content-Type": "image/png"}, b"\x89PNG\r\n\x1a\n")
    sentence = refusal(context(tmp_path), site.url("/cat.png"))
    assert "image/png, not text" in sentence


def test_max_chars_cuts_the_text(tmp_path: Path, site: Site) -> None:
    site.routes["/long"] = page("x" * 5000, "text/plain")
    outcome = fetch(context(tmp_path), site.url("/long"), max_chars=100)
    assert outcome.output.startswith("x" * 100) and "x" * 101 not in outcome.output
    assert "[cut at 100 characters]" in outcome.output
    ctx = context(tmp_path, output_chars=50)
    assert "[cut at 50 characters]" in fetch(ctx, site.url("/long"), max_chars=100).output
    with pytest.raises(ToolRefused, match="max_chars"):
        fetch(ctx, site.url("/long"), max_chars=0)


def test_the_byte_cap_cuts_a_large_body(tmp_path: Path, site: Site) -> None:
    site.routes["/big"] = page("y" * 1_000_000, "text/plain")
    outcome = fetch(context(tmp_path, max_bytes=10_000), site.url("/big"))
    assert outcome.ok and outcome.output.startswith("y" * 10_000)
    assert outcome.output.count("y") == 10_000
    assert "(cut at 9.8 KB; the rest of the page was not read)" in outcome.output
    assert outcome.receipt == (f"Fetched 9.8 KB of text from {site.url('/big')} "
                               "(HTTP 200, cut at 9.8 KB).")


def test_a_404_is_a_failed_result_with_the_status(tmp_path: Path, site: Site) -> None:
    site.routes["/gone"] = page("<title>Nope</title><p>This page is gone.</p>", status=404)
    outcome = fetch(context(tmp_path), site.url("/gone"))
    assert not outcome.ok
    assert outcome.output.startswith(f"HTTP 404 from {site.url('/gone')}")
    assert "This page is gone." in outcome.output
    assert outcome.receipt == f"Got HTTP 404 from {site.url('/gone')}."


def test_a_stalled_server_times_out_quickly(tmp_path: Path, site: Site) -> None:
    site.routes["/stall"] = lambda handler: site.stop.wait(10)
    started = time.monotonic()
    outcome = fetch(context(tmp_path, timeout=0.5), site.url("/stall"))
    assert time.monotonic() - started < 2.0
    assert not outcome.ok and "took longer than 0.5 seconds" in outcome.output


def test_a_closed_port_is_a_failed_result(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = fetch(context(tmp_path), f"http://127.0.0.1:{port}/")
    assert not outcome.ok and outcome.output.startswith(f"Could not fetch http://127.0.0.1:{port}/")


# ---------------------------------------------------------------- redirects


def test_a_redirect_chain_within_the_allowed_host_is_followed(tmp_path: Path,
                                                               site: Site) -> None:
    site.routes["/a"] = redirect("/b", 301)
    site.routes["/b"] = redirect(site.url("/c"), 307)
    site.routes["/c"] = redirect("d?x=1#frag", 303)
    site.routes["/d?x=1"] = page("arrived", "text/plain")
    outcome = fetch(context(tmp_path), site.url("/a"))
    assert outcome.ok and outcome.output == "arrived"
    assert site.paths() == ["/a", "/b", "/c", "/d?x=1"]
    assert outcome.receipt == (f"Fetched 7 bytes of text from {site.url('/d?x=1')} "
                               "(HTTP 200, after 3 redirects).")


@pytest.mark.parametrize("to, words", [
    ("http://localhost:{port}/inside", "localhost resolves to"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
    ("http://[::ffff:127.0.0.1]:{port}/inside", "an IPv4-mapped form of 127.0.0.1"),
    ("file:///etc/passwd", "the file: scheme is not fetched"),
])
def test_a_redirect_to_a_refused_address_is_refused(tmp_path: Path, site: Site, to: str,
                                                    words: str) -> None:
    target = to.format(port=site.port)
    site.routes["/out"] = redirect(target)
    site.routes["/inside"] = page("secret", "text/plain")
    sentence = refusal(context(tmp_path, timeout=0.5), site.url("/out"))
    assert f"Refused the redirect from {site.url('/out')} to {target}: " in sentence
    assert words in sentence
    assert site.paths() == ["/out"]


def test_too_many_redirects_are_refused(tmp_path: Path, site: Site) -> None:
    for n in range(10):
        site.routes[f"/r{n}"] = redirect(f"/r{n + 1}")
    sentence = refusal(context(tmp_path), site.url("/r0"))
    assert "redirected more than 5 times" in sentence
    assert site.paths() == [f"/r{n}" for n in range(6)]


# ---------------------------------------------------------------- pinning


def test_the_connection_goes_to_the_checked_address(
    tmp_path: Path, site: Site, fake_dns: dict[str, list[list[str]]]
) -> None:
    """The name is looked up once; a second answer (a rebinding) is never used, and the
    server hears the name in Host."""
    site.routes["/"] = page("pinned", "text/plain")
    fake_dns["pinned.test"] = [["127.0.0.1"], ["10.9.9.9"]]
    outcome = fetch(context(tmp_path, allow=("PINNED.test",)),
                    site.url("/", host="pinned.test"))
    assert outcome.ok and outcome.output == "pinned"
    assert fake_dns["calls"] == [["pinned.test"]]
    assert site.seen[0][1]["host"] == f"pinned.test:{site.port}"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj",
         "/CN=pinned.test", "-addext", "subjectAltName=DNS:pinned.test"],
        check=True, capture_output=True)
    return key, cert


def test_https_is_pinned_and_checks_the_certificate_against_the_name(
    tmp_path: Path, fake_dns: dict[str, list[list[str]]], certificate: tuple[Path, Path]
) -> None:
    key, cert = certificate
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    client_tls = ssl.create_default_context(cafile=str(cert))
    tool = WebFetch(verify=client_tls)
    fake_dns["pinned.test"] = [["127.0.0.1"]]
    fake_dns["other.test"] = [["127.0.0.1"]]
    ctx = context(tmp_path, allow=("pinned.test", "other.test", "127.0.0.1"))
    secure = Site(routes={"/": page("over tls", "text/plain")})
    for running in serve(secure, server_tls):
        outcome = fetch(ctx, f"https://pinned.test:{running.port}/", tool)
        assert outcome.ok and outcome.output == "over tls"
        assert running.seen[0][1]["host"] == f"pinned.test:{running.port}"
        # the same server under a name its certificate does not carry: verification fails
        wrong = fetch(ctx, f"https://other.test:{running.port}/", tool)
        assert not wrong.ok and "certificate" in wrong.output.lower()
        wrong_ip = fetch(ctx, f"https://127.0.0.1:{running.port}/", tool)
        assert not wrong_ip.ok
        assert len(running.seen) == 1
