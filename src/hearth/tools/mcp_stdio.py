"""A stdio MCP server's transport, with every message bounded: `bounded_stdio_client`.

The SDK's own stdio transport keeps appending a line's pieces until its newline comes (a server
that prints a gigabyte without one fills the gateway's memory, re-copying the whole buffer for
each piece, on the event loop). This one is the same transport, bounded: the child process in its
own session (process group), newline-delimited JSON-RPC both ways, and a shutdown that closes
stdin, waits, then ends the whole process group (SIGTERM, then SIGKILL). What it owns beyond
that is the bound: `LineSplitter` keeps at most MAX_MESSAGE_BYTES of a line; past that the rest
of the line is counted and dropped, and the request it answered (its id found at the line's
start or end, or the one request outstanding) gets an error answer saying why.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import StdioServerParameters, types as mcp_types
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from hearth.tools.mcp_bounds import MAX_MESSAGE_BYTES, too_large

log = logging.getLogger("hearth.tools.mcp_client")

EDGE_BYTES = 512  # of an oversized line, kept at each end to find its id
EXIT_WAIT = 2.0  # after stdin closes, then again after SIGTERM (the SDK's own timings)
FLUSH_WAIT = 0.5  # for the writer to send what it accepted before stdin closes
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
                MemoryObjectSendStream[SessionMessage]]


@dataclass(frozen=True)
class Oversized:
    """A line longer than the cap: its first and last bytes, and how long it was."""

    head: bytes
    tail: bytes
    size: int


class LineSplitter:
    """Newline-delimited lines out of a byte stream, none kept whole past `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._dropping: Oversized | None = None

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        done: list[bytes | Oversized] = []
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            self._take(chunk[start:] if newline == -1 else chunk[start:newline])
            if newline == -1:
                return done
            done.append(self._end_line())
            start = newline + 1

    def _take(self, piece: bytes) -> None:
        if not piece:
            return
        if self._dropping is not None:
            kept = self._dropping
            self._dropping = Oversized(kept.head, (kept.tail + piece)[-EDGE_BYTES:],
                                       kept.size + len(piece))
            return
        self._parts.append(piece)
        self._size += len(piece)
        if self._size > self._limit:  # its ends are kept (to find its id), the rest let go
            head = _edge(self._parts)[:EDGE_BYTES]
            tail = _edge(self._parts[::-1], from_end=True)[-EDGE_BYTES:]
            self._dropping = Oversized(head, tail, self._size)
            self._parts, self._size = [], 0

    def _end_line(self) -> bytes | Oversized:
        if self._dropping is not None:
            line: bytes | Oversized = self._dropping
            self._dropping = None
            return line
        joined = b"".join(self._parts)
        self._parts, self._size = [], 0
        return joined


def _edge(parts: list[bytes], from_end: bool = False) -> bytes:
    """The first EDGE_BYTES (or more) of the pieces given, joined; `from_end`: the pieces are
    given last first, and are joined back in order."""
    taken: list[bytes] = []
    size = 0
    for part in parts:
        taken.append(part[-EDGE_BYTES:] if from_end else part[:EDGE_BYTES])
        size += len(taken[-1])
        if size >= EDGE_BYTES:
            break
    return b"".join(taken[::-1] if from_end else taken)


# ---------------------------------------------------------------- messages


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        log.warning("an MCP server sent a line that is not a JSON-RPC message: %s", exc)
        return exc
    return SessionMessage(message)


def _answered_id(line: Oversized, outstanding: set[Any]) -> Any:
    """The id of the outstanding request an oversized answer was for, else None."""
    found = [*_ID.findall(line.head)[:1], *_ID.findall(line.tail)[-1:]]
    for raw in found:
        try:
            request_id = json.loads(raw)
        except ValueError:
            continue
        if request_id in outstanding:
            return request_id
    return next(iter(outstanding)) if len(outstanding) == 1 else None


def _refusal_of(line: Oversized, outstanding: set[Any],
                limit: int) -> SessionMessage | Exception:
    """An oversized line as an error answer to its request, or (no request known) an error."""
    request_id = _answered_id(line, outstanding)
    log.warning("an MCP server sent a message of %d bytes (the cap is %d); it was dropped",
                line.size, limit)
    if request_id is None:
        return ValueError(f"a message of {line.size} bytes was dropped: {too_large(limit)}")
    error = mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=too_large(limit))
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


# ---------------------------------------------------------------- the transport


@asynccontextmanager
async def bounded_stdio_client(params: StdioServerParameters, errlog: TextIO,
                               limit: int = MAX_MESSAGE_BYTES) -> AsyncIterator[Streams]:
    """The server as a child process in its own session, and the session's two streams."""
    env = get_default_environment() | (params.env or {})
    process = await anyio.open_process([params.command, *params.args], env=env, stderr=errlog,
                                       cwd=params.cwd, start_new_session=True)
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    outstanding: set[Any] = set()
    writer_done = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read, process, to_session, outstanding, limit)
        tg.start_soon(_write, process, from_session, to_session, outstanding, writer_done)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(FLUSH_WAIT):
                    await writer_done.wait()
                await _stop(process)
                for stream in (read_stream, write_stream, to_session, from_session):
                    await stream.aclose()
            tg.cancel_scope.cancel()


async def _read(process: Process, to_session: MemoryObjectSendStream[SessionMessage | Exception],
                outstanding: set[Any], limit: int) -> None:
    """The server's stdout, one bounded message at a time, to the session; then, once the
    session is gone, the rest drained so a server stuck writing can see stdin close and exit."""
    assert process.stdout is not None
    lines = LineSplitter(limit)
    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError,
                  OSError):
        async with to_session:
            async for chunk in process.stdout:
                for line in lines.feed(chunk):
                    message = _message(line, outstanding, limit)
                    if message is not None:
                        await to_session.send(message)
    with anyio.CancelScope(shield=True), suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                                  anyio.BrokenResourceError, OSError):
        while True:
            await process.stdout.receive()


def _message(line: bytes | Oversized, outstanding: set[Any],
             limit: int) -> SessionMessage | Exception | None:
    if isinstance(line, Oversized):
        message = _refusal_of(line, outstanding, limit)
    elif not line.strip():
        return None
    else:
        message = _parse(line)
    if isinstance(message, SessionMessage):
        inner = message.message
        if isinstance(inner, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
            outstanding.discard(inner.id)
    return message


async def _write(process: Process, from_session: MemoryObjectReceiveStream[SessionMessage],
                 to_session: MemoryObjectSendStream[SessionMessage | Exception],
                 outstanding: set[Any], done: anyio.Event) -> None:
    assert process.stdin is not None
    try:
        async with from_session:
            async for message in from_session:
                if isinstance(message.message, mcp_types.JSONRPCRequest):
                    outstanding.add(message.message.id)
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send((data + "\n").encode())
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await to_session.aclose()  # the server may live on: the session must see the end
    finally:
        done.set()


async def _stop(process: Process) -> None:
    """Close stdin and wait; then SIGTERM the process group, wait, SIGKILL; then reap."""
    assert process.stdin is not None and process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, EXIT_WAIT):
        await terminate_posix_process_tree(process, EXIT_WAIT)
        if not await _exited(process, EXIT_WAIT):
            log.warning("MCP server process %d is still alive after SIGKILL", process.pid)
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdout.aclose()  # the drain must not wait on it
            return  # abandoned: reaping it would wait for ever
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.aclose()  # it has exited: this closes the pipes and reaps at once


async def _exited(process: Process, seconds: float) -> bool:
    """Has the process exited within `seconds`? (polled: `wait` also waits for pipes that a
    grandchild may hold open)."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None
