"""What web_fetch and MCP tools take back is bounded as it is read: past the cap the rest is
dropped (or left unread) with a sentence, and the gateway's memory stays flat whatever the
other side sends. From an outside security review (output buffered whole before the cap)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, TypeVar

import pytest

from hearth.config import McpServerConfig
from hearth.tools.base import ToolContext, ToolOutcome, ToolRefused
from hearth.tools.mcp_client import McpServers
from hearth.tools.web import WebFetch
from hearth.tools.web_text import html_to_text
from tests.gateway import free_port
from tests.support.polling import loop_lags
from tests.support.web_site import Site, context, fetch

T = TypeVar("T")
MB = 1024 * 1024


def peak_while(work: Callable[[], T]) -> tuple[T, int]:
    """What `work` returned, and the most memory Python held above the start while it ran."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = work()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return result, peak


def gzip_of(data: bytes, times: int) -> bytes:
    """`data` repeated `times` times, gzip-compressed, without ever holding it whole."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [packer.compress(data) for _ in range(times)]
    return b"".join([*parts, packer.flush()])


# ---------------------------------------------------------------- web_fetch


def test_a_body_with_no_length_is_cut_at_the_cap_and_left_unread(tmp_path: Path,
                                                                 site: Site) -> None:
    """A 50 MB body with no Content-Length: the fetch keeps 1 MB and hangs up.
    Before: this held too (the old reader also stopped at the cap); kept as a guard, now that
    the body is decoded by hand."""
    sent: list[int] = []
    done = threading.Event()
    chunk = b"y" * 65536

    def endless(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.end_headers()  # HTTP/1.0: the body ends when the connection does
        total = 0
        try:
            while total < 50 * MB:
                handler.wfile.write(chunk)
                total += len(chunk)
        except OSError:
            pass
        finally:
            sent.append(total)
            done.set()

    site.routes["/endless"] = endless
    ctx = context(tmp_path, max_bytes=MB, output_chars=2 * MB)
    outcome, peak = peak_while(lambda: fetch(ctx, site.url("/endless")))
    assert outcome.ok and outcome.output.count("y") == MB
    assert outcome.output.endswith("(cut at 1.0 MB; the rest of the page was not read)")
    assert done.wait(10)
    assert sent[0] < 30 * MB, f"the server got {sent[0] / MB:.0f} MB out before the hang-up"
    assert peak < 8 * MB, f"the gateway held {peak / MB:.1f} MB"


def test_a_gzip_bomb_is_inflated_only_up_to_the_cap(tmp_path: Path, site: Site) -> None:
    """200 KB of gzip that inflates to 200 MB. Before: httpx inflated each 64 KB network chunk
    whole before the cap was looked at (measured: a 143 MB peak for a 1 MB cap); now no more
    than the cap is ever inflated (measured: 5 MB)."""
    bomb = gzip_of(b"y" * MB, 200)
    assert len(bomb) < MB
    site.routes["/bomb"] = (200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"},
                            bomb)
    ctx = context(tmp_path, max_bytes=MB, output_chars=2 * MB)
    outcome, peak = peak_while(lambda: fetch(ctx, site.url("/bomb")))
    assert outcome.ok and outcome.output.count("y") == MB
    assert "(cut at 1.0 MB; the rest of the page was not read)" in outcome.output
    assert peak < 20 * MB, f"the gateway held {peak / MB:.1f} MB"
    assert site.seen[0][1]["accept-encoding"] == "gzip, deflate"


def test_compressed_pages_read_as_before_and_unknown_codings_are_refused(
        tmp_path: Path, site: Site) -> None:
    """gzip and deflate (zlib-wrapped or raw) pages read whole when under the cap.
    Before: a coding httpx does not know (br without the brotli package) came back as the
    compressed bytes themselves, read as text."""
    text = "hello, compressed world\n" * 100
    raw_deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    site.routes["/gz"] = (200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"},
                          gzip_of(text.encode(), 1))
    site.routes["/zlib"] = (200, {"Content-Type": "text/plain", "Content-Encoding": "deflate"},
                            zlib.compress(text.encode()))
    site.routes["/raw"] = (200, {"Content-Type": "text/plain", "Content-Encoding": "deflate"},
                           raw_deflate.compress(text.encode()) + raw_deflate.flush())
    site.routes["/br"] = (200, {"Content-Type": "text/plain", "Content-Encoding": "br"},
                          b"\x1b\x03\x00\xf8\xa5\x8a\x02\x00")
    ctx = context(tmp_path)
    for path in ("/gz", "/zlib", "/raw"):
        outcome = fetch(ctx, site.url(path))
        assert outcome.ok and outcome.output == text, path
    refused = _refusal(fetch, ctx, site.url("/br"))
    assert "it is compressed as br, which web_fetch does not read" in refused


def _refusal(call: Callable[..., ToolOutcome], *args: Any) -> str:
    with pytest.raises(ToolRefused) as caught:
        call(*args)
    return caught.value.sentence


def test_html_that_the_parser_chokes_on_is_left_out_off_the_loop(tmp_path: Path,
                                                                 site: Site) -> None:
    """Before: '<!' a million times (2 MB) took Python's HTML parser over a minute, on the
    event loop itself: every request waited. Now the page is parsed in a worker, a piece at a
    time, and what cannot be parsed is left out with a note."""
    site.routes["/choke"] = (200, {"Content-Type": "text/html"},
                             b"<title>T</title><p>kept</p>" + b"<!" * 1_000_000)

    async def both() -> tuple[ToolOutcome, list[float]]:
        async with loop_lags() as lags:
            outcome = await WebFetch().run({"url": site.url("/choke")},
                                           context(tmp_path, max_bytes=3 * MB, timeout=30))
        return outcome, lags

    began = time.monotonic()
    outcome, lags = asyncio.run(both())
    assert time.monotonic() - began < 10
    assert outcome.output.startswith("T\n\nkept")
    assert outcome.output.endswith("[the rest of the page was left out: it is not well-formed "
                                   "HTML]")
    worst = max(lags, default=0.0)
    assert worst < 0.5, f"the event loop stalled for {worst:.2f} s"


def test_html_parsing_stops_at_its_time_limit() -> None:
    """Before: no limit; '<' two million times took the parser ~12 s (quadratic)."""
    began = time.monotonic()
    text = html_to_text("<p>first</p>" + "<" * 2_000_000, seconds=0.5)
    assert time.monotonic() - began < 3
    assert text.startswith("first\n")
    assert text.endswith("\n[the rest of the page was left out: it could not be read as HTML "
                         "within 0.5 seconds]")


# ---------------------------------------------------------------- MCP

FLOODING_SERVER = r'''
"""An MCP server written by hand (stdio or streamable HTTP), whose answers are far too large."""
import json
import sys
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MB = 1024 * 1024
TOOLS = [{"name": name, "description": name, "inputSchema": {"type": "object", "properties": {}},
          "annotations": {"readOnlyHint": True}} for name in ("flood", "bomb", "wide", "echo")]


def answer(message):
    """The result of one request: a dict, "LARGE" (sent by hand), or None (a notification)."""
    if "id" not in message:
        return None
    method = message["method"]
    if method == "initialize":
        return {"protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "flood", "version": "1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and message["params"]["name"] == "wide":
        return {"content": [{"type": "text", "text": "a" * 100_000},
                            {"type": "text", "text": "b" * 100_000},
                            {"type": "image", "data": "aGk=", "mimeType": "image/png"}]}
    if method == "tools/call" and message["params"]["name"] == "echo":
        return {"content": [{"type": "text", "text": "still here"}]}
    if method == "tools/call":
        return "LARGE"
    return {}


def head(request_id):
    return ('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"'
            % json.dumps(request_id)).encode()


TAIL = b'"}]}}'


def flood(write, request_id):
    """50 MB of text in one answer, written a megabyte at a time."""
    write(head(request_id))
    chunk = b"y" * MB
    for _ in range(50):
        write(chunk)
    write(TAIL)


def bomb(request_id):
    """100 MB of text in one answer, gzip-compressed to about 100 KB."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"y" * MB
    parts = [packer.compress(head(request_id))]
    parts += [packer.compress(chunk) for _ in range(100)]
    return b"".join([*parts, packer.compress(TAIL), packer.flush()])


def reply(request_id, result):
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def stdio():
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = json.loads(line)
        result = answer(message)
        if result == "LARGE":
            flood(out.write, message["id"])
            out.write(b"\n")
        elif result is not None:
            out.write(reply(message["id"], result) + b"\n")
        out.flush()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_DELETE = do_GET

    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        result = answer(message)
        if result is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if result == "LARGE" and message["params"]["name"] == "bomb":
            body = bomb(message["id"])
            self.send_header("Content-Encoding", "gzip")
        elif result == "LARGE":
            self.end_headers()  # no Content-Length: the body ends with the connection
            try:
                flood(self.wfile.write, message["id"])
            except OSError:
                pass
            return
        else:
            body = reply(message["id"], result)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if sys.argv[1] == "stdio":
    stdio()
else:
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
'''

TOO_LARGE = "was not used: its answer was larger than 8 MB, so it was not read."


@pytest.fixture
def flooding_script(tmp_path: Path) -> Path:
    script = tmp_path / "flooding_server.py"
    script.write_text(FLOODING_SERVER)
    return script


async def peak_of(work: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """`peak_while` for a coroutine: what it returned and the most memory held above start."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = await work()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return result, peak


def check_flooding_server(servers: McpServers, ctx: ToolContext, large: str) -> int:
    """Call the flooding server's tools; the peak memory of the oversized call."""

    async def scenario() -> int:
        tools = {tool.name: tool for tool in await servers.tools()}
        try:
            outcome, peak = await peak_of(lambda: tools[f"flood__{large}"].run({}, ctx))
            assert not outcome.ok
            assert outcome.output == f"The flood server's answer to flood__{large} {TOO_LARGE}"
            assert outcome.receipt == f"Called flood__{large} on the flood server; its answer " \
                                      "was too large."
            # The server and the session go on; a large answer is cut to the turn's limit.
            assert (await tools["flood__echo"].run({}, ctx)).output == "still here"
            small = ToolContext(workspace=ctx.workspace, session_key="k", run_id="r",
                                output_chars=1000)
            wide = await tools["flood__wide"].run({}, small)
            assert wide.ok and wide.output == "a" * 1000 + (
                "\n[output cut at 1000 characters of 200,029; the rest was dropped]")
            return peak
        finally:
            await servers.close()

    return asyncio.run(scenario())


def test_a_stdio_server_flooding_one_answer_is_cut_at_the_transport(
        flooding_script: Path, ctx: ToolContext) -> None:
    """A 50 MB line on stdout. Before: the SDK's reader appended each 64 KB piece to the whole
    buffer so far (`buffer + chunk`, copied again every time, on the event loop), parsed the
    50 MB message, and Hearth joined the text and only then cut it (measured: a 150 MB peak
    and 27 s). Now the line is dropped past 8 MB and its call answered (8 MB, 0.2 s)."""
    servers = McpServers([McpServerConfig(name="flood", command=sys.executable,
                                          args=[str(flooding_script), "stdio"])])
    peak = check_flooding_server(servers, ctx, "flood")
    assert peak < 30 * MB, f"the gateway held {peak / MB:.0f} MB for a 50 MB answer"


@pytest.fixture
def flooding_http(flooding_script: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(flooding_script), "http", str(port)])
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("large", ["flood", "bomb"])
def test_an_http_server_flooding_one_answer_is_cut_at_the_transport(
        flooding_http: str, ctx: ToolContext, large: str) -> None:
    """A 50 MB JSON answer with no Content-Length, and a 100 KB gzip body that inflates to
    100 MB. Before: the SDK read a JSON answer whole (`response.aread()`), httpx inflating
    the bomb in full, before anything looked at its size (measured: 100 MB and 200 MB peaks,
    and ok results). Now the read ends at 8 MB (measured: 9 MB and 16 MB peaks)."""
    servers = McpServers([McpServerConfig(name="flood", url=flooding_http)])
    peak = check_flooding_server(servers, ctx, large)
    assert peak < 30 * MB, f"the gateway held {peak / MB:.0f} MB for the answer"
