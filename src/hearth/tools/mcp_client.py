"""MCP client: the configured `[[mcp_servers]]`, their connections, and their tools as Hearth tools.

Owns one connection per configured server (stdio: a child process started with a minimal
environment; streamable HTTP: a session with `url`), started lazily on first use and stopped by
`McpServers.close()`. Each MCP tool becomes an `McpTool` named `<server>__<tool>`. A server that
cannot start, crashes or stops answering is described in a sentence (`McpServers.status()`); it
never takes the gateway or the other servers down with it.

Design: the SDK's context managers (transport, `ClientSession`) hold anyio cancel scopes and
task groups, so they must be entered and exited in one task. Each server therefore gets one
background *worker task* that enters them, initializes the session, lists the tools and then
serves calls that arrive on an anyio memory stream, each call in its own child task with its own
cancel scope. Callers only ever touch an `asyncio.Future` per call: a caller that times out or is
cancelled cancels the future, which cancels that call's scope inside the worker (the SDK then
tells the server the request was cancelled). Closing cancels the worker's outer scope; the
SDK's transport shutdown (shielded, bounded) then stops the child process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal, Self, TextIO, cast

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mcp_types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from hearth import __version__
from hearth.config import McpServerConfig
from hearth.tools.base import Effect, ToolContext, ToolOutcome, ToolRefused

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_START_TIMEOUT = 30.0
MAX_TOOL_NAME = 64
_ENV_PASSED = ("PATH", "HOME", "LANG")  # what a stdio server inherits from us (see _child_env)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_CLIENT_INFO = mcp_types.Implementation(name="hearth", version=__version__)
_CLOSE_WAIT = 15.0  # the SDK's stdio shutdown is bounded (~6 s); this is a backstop


class _NotConfigured(Exception):
    """The server's configuration names neither (or both) a command and a url."""


# What a transport or session may raise at us, by name. Anything else is a bug, logged at the
# worker task's boundary and still turned into the server's failure sentence.
_KNOWN_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    MCPError,
    httpx2.HTTPError,
    httpx2.InvalidURL,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
    ValidationError,
)
_CALL_ERRORS: tuple[type[BaseException], ...] = (
    MCPError,
    RuntimeError,
    ValidationError,
    OSError,
    httpx2.HTTPError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)
_START_ERRORS: tuple[type[BaseException], ...] = (*_KNOWN_ERRORS, _NotConfigured)


def tool_name(server: str, tool: str) -> str:
    """`<server>__<tool>` with anything outside [A-Za-z0-9_-] replaced, at most 64 characters."""
    return f"{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"[:MAX_TOOL_NAME]


class _ServerGone(Exception):
    """The call's connection ended before it answered; the message says how."""


@dataclass(eq=False)
class _Call:
    tool: str
    args: dict[str, Any]
    future: asyncio.Future[mcp_types.CallToolResult]
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def abandon_if_cancelled(self, future: asyncio.Future[mcp_types.CallToolResult]) -> None:
        """Done-callback: the caller gave up (timeout, cancellation), so stop the call too."""
        if future.cancelled():
            self.scope.cancel()


def _settle(call: _Call, result: mcp_types.CallToolResult | BaseException) -> None:
    if call.future.done():
        return
    if isinstance(result, BaseException):
        call.future.set_exception(result)
    else:
        call.future.set_result(result)


class _EofWatch:
    """The transport's read stream, passed through, calling `on_eof` when it ends.

    A stdio server that exits closes its stdout; the SDK's dispatcher then fails what is pending
    but nothing tells the owner. This wrapper does, so the worker can tear the session down and
    the next call restarts the server. `last_context` is forwarded because the dispatcher reads
    it (duck-typed) from context-carrying streams.
    """

    def __init__(self, inner: Any, on_eof: Any) -> None:
        self._inner = inner
        self._on_eof = on_eof

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_eof()
            raise
        return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    """PATH, HOME and LANG from the gateway, then the server's own `env`; nothing else.

    The SDK adds its own short safe list (HOME, LOGNAME, PATH, SHELL, TERM, USER) underneath;
    the gateway's secrets (model keys, HEARTH_TOKEN) are never passed.
    """
    env = {key: os.environ[key] for key in _ENV_PASSED if key in os.environ}
    env.update(extra)
    return env


def _resolve_command(command: str, env: dict[str, str]) -> str:
    """The command as configured; a bare name not on PATH is also looked for next to Python,
    so a server installed into Hearth's own virtualenv works without activating it."""
    if os.sep in command or shutil.which(command, path=env.get("PATH")):
        return command
    beside = Path(sys.executable).parent / command
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else command


def _stderr_tail(errlog: IO[str] | None) -> str:
    """The last non-blank line the server wrote to stderr (it explains most start failures)."""
    if errlog is None:
        return ""
    try:
        fd = errlog.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, 4096, max(0, size - 4096))
    except (OSError, ValueError):
        return ""
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _secs(seconds: float) -> str:
    return f"{seconds:g} second{'' if seconds == 1 else 's'}"


def _size(base64_data: str) -> str:
    size = len(base64_data) * 3 // 4
    return f"{size} bytes" if size < 10_000 else f"{size // 1024} KB"


def render_result(result: mcp_types.CallToolResult) -> str:
    """The text blocks joined; images, audio and resources summarised in one line each."""
    lines: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            lines.append(block.text)
        elif isinstance(block, mcp_types.ImageContent):
            lines.append(f"[image: {block.mime_type}, {_size(block.data)}]")
        elif isinstance(block, mcp_types.AudioContent):
            lines.append(f"[audio: {block.mime_type}, {_size(block.data)}]")
        elif isinstance(block, mcp_types.ResourceLink):
            lines.append(f"[resource link: {block.name} <{block.uri}>]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            res = block.resource
            if isinstance(res, mcp_types.TextResourceContents):
                what = f"{len(res.text)} characters of {res.mime_type or 'text'}"
            else:
                what = f"{_size(res.blob)} of {res.mime_type or 'binary data'}"
            lines.append(f"[resource {res.uri}: {what}]")
    if not lines and result.structured_content is not None:
        lines.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(lines)


async def _list_all_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that paginates forever cannot hang the start
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


_State = Literal["not started", "starting", "ready", "stopping", "failed"]


class _Connection:
    """One configured server: its worker task, its state, its tools."""

    def __init__(self, config: McpServerConfig, start_timeout: float) -> None:
        self.config = config
        self.name = config.name
        self.tools: list[mcp_types.Tool] = []
        self._start_timeout = start_timeout
        self._state: _State = "not started"
        self._failure = ""
        self._may_restart = False  # set when a ready server died; spent by the next use
        self._restarted = False  # this run is a restart that has not served a call yet
        self._closing = False
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._ready: asyncio.Future[str | None] | None = None
        self._send: MemoryObjectSendStream[_Call] | None = None

    # ------------------------------------------------------------------ caller side

    def status(self) -> str:
        if self._state == "failed":
            return f"failed: {self._failure}"
        return self._state  # ready, not started, or on its way: starting, stopping

    async def ensure(self) -> None:
        """Start (or restart, once after a death) the server; ToolRefused says why it cannot."""
        async with self._lock:
            while True:
                if self._closing:
                    raise ToolRefused(f"The MCP server '{self.name}' has been shut down.")
                if self._state == "ready":
                    return
                if self._state == "starting" and self._ready is not None:
                    failure = await asyncio.shield(self._ready)
                    if failure is not None:
                        raise ToolRefused(failure)
                    continue
                if self._state == "stopping" and self._task is not None:
                    await asyncio.wait([self._task])  # its teardown is bounded by the SDK
                    continue
                if self._state == "failed":
                    if not self._may_restart:
                        raise ToolRefused(self._failure)
                    log.info("restarting the MCP server %r after it stopped", self.name)
                self._restarted = self._state == "failed"
                self._may_restart = False
                self._start()

    def submit(self, tool: str, args: dict[str, Any]) -> asyncio.Future[mcp_types.CallToolResult]:
        future: asyncio.Future[mcp_types.CallToolResult] = (
            asyncio.get_running_loop().create_future()
        )
        call = _Call(tool, args, future)
        future.add_done_callback(call.abandon_if_cancelled)
        if self._send is None:
            raise ToolRefused(f"The MCP server '{self.name}' is not running.")
        try:
            self._send.send_nowait(call)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise ToolRefused(
                self._failure or f"The MCP server '{self.name}' is not running."
            ) from None
        return future

    async def close(self) -> None:
        self._closing = True
        if self._send is not None:
            self._send.close()
        if self._scope is not None:
            self._scope.cancel()
        task = self._task
        if task is None:
            return
        done, _ = await asyncio.wait([task], timeout=_CLOSE_WAIT)
        if not done:
            log.warning("the MCP server %r did not stop in time; cancelling its task", self.name)
            task.cancel()
            await asyncio.wait([task], timeout=5)

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._scope = anyio.CancelScope()
        if self._send is not None:
            self._send.close()  # the previous run's; its worker has finished
        send, receive = anyio.create_memory_object_stream[_Call](max_buffer_size=math.inf)
        self._send = send
        self._state = "starting"
        self._failure = ""
        self._task = loop.create_task(
            self._serve(self._scope, receive, self._ready), name=f"mcp-server:{self.name}"
        )

    # ------------------------------------------------------------------ worker side

    def _transport(self, errlog: TextIO | None) -> AbstractAsyncContextManager[Any]:
        cfg = self.config
        if cfg.url and not cfg.command:
            return streamable_http_client(cfg.url)
        if cfg.command and not cfg.url:
            env = _child_env(cfg.env)
            params = StdioServerParameters(
                command=_resolve_command(cfg.command, env), args=list(cfg.args), env=env
            )
            return stdio_client(params, errlog=errlog if errlog is not None else sys.stderr)
        if cfg.command and cfg.url:
            raise _NotConfigured("its configuration has both a command and a url; give one")
        raise _NotConfigured("its configuration has neither a command nor a url")

    async def _serve(
        self,
        scope: anyio.CancelScope,
        receive: MemoryObjectReceiveStream[_Call],
        ready: asyncio.Future[str | None],
    ) -> None:
        """The worker task: owns the transport and session contexts from entry to exit."""
        errlog: TextIO | None = None
        lost = anyio.Event()
        initialized = False
        problem: BaseException | None = None
        try:
            if self.config.command:
                errlog = cast(
                    TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
                )
            with scope:
                async with AsyncExitStack() as stack:
                    read, write = await stack.enter_async_context(self._transport(errlog))
                    session = await stack.enter_async_context(
                        ClientSession(_EofWatch(read, lost.set), write, client_info=_CLIENT_INFO)
                    )
                    with anyio.fail_after(self._start_timeout):
                        await session.initialize()
                        self.tools = await _list_all_tools(session)
                    initialized = True
                    self._state = "ready"
                    if not ready.done():
                        ready.set_result(None)
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._watch, lost, tg.cancel_scope)
                        async for call in receive:
                            tg.start_soon(self._handle, session, call)
                        tg.cancel_scope.cancel()
        except ExceptionGroup as group:
            problem = group
            unknown = [leaf for leaf in _leaves(group) if not isinstance(leaf, _KNOWN_ERRORS)]
            if unknown:
                log.error("the MCP server %r failed", self.name, exc_info=group)
        except _START_ERRORS as exc:
            problem = exc
        except Exception as exc:  # the task boundary: logged, then said in a sentence
            log.exception("the MCP server %r failed unexpectedly", self.name)
            problem = exc
        finally:
            # Calls still queued get an answer; the send side then fails fast.
            gone = _ServerGone(self.gone_sentence())
            while True:
                try:
                    _settle(receive.receive_nowait(), gone)
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    break
            receive.close()
            tail = _stderr_tail(errlog)
            if errlog is not None:
                errlog.close()
            self._finish(initialized, problem, tail)
            if not ready.done():
                ready.set_result(self._failure or f"The MCP server '{self.name}' was shut down.")

    def _finish(self, initialized: bool, problem: BaseException | None, tail: str) -> None:
        if self._closing:
            self._state, self._failure = "not started", ""
            return
        self._state = "failed"
        if not initialized:
            why = self._why(problem, tail)
            self._failure = f"The MCP server '{self.name}' could not start: {why}."
            if tail:
                log.warning("MCP server %r stderr: %s", self.name, tail)
            return
        # The stderr tail is not quoted here: after a working session it is usually an old
        # log line, not the cause. It goes to the log for whoever investigates.
        detail = f" ({self._loss_detail(problem)})" if problem is not None else ""
        if tail:
            log.warning("MCP server %r stderr, last line: %s", self.name, tail)
        if self._restarted:
            self._may_restart = False
            self._failure = (
                f"The MCP server '{self.name}' stopped again after its restart{detail}, "
                "so it is not restarted again."
            )
        else:
            self._may_restart = True
            self._failure = (
                f"The MCP server '{self.name}' stopped unexpectedly{detail}; "
                "it will be restarted on the next call."
            )
        log.warning("%s", self._failure)

    def _why(self, problem: BaseException | None, tail: str) -> str:
        """Why the start failed, as the end of a sentence."""
        cfg = self.config
        leaves = _leaves(problem) if problem is not None else []
        for exc in leaves:
            if isinstance(exc, _NotConfigured):
                return str(exc)
            if isinstance(exc, TimeoutError):  # before OSError, its base class
                limit = _secs(self._start_timeout)
                return f"it did not finish its start-up handshake within {limit}"
            if isinstance(exc, FileNotFoundError) and cfg.command:
                return f"command '{cfg.command}' was not found"
            if isinstance(exc, PermissionError) and cfg.command:
                return f"command '{cfg.command}' could not be run (permission denied)"
            if isinstance(exc, OSError) and cfg.command:
                return f"command '{cfg.command}' could not be run ({exc.strerror or exc})"
            if isinstance(exc, httpx2.HTTPError | httpx2.InvalidURL):
                return f"{cfg.url} could not be reached ({_first_line(exc)})"
            if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
                return "it exited during start-up" + (f": {tail}" if tail else "")
            if isinstance(exc, MCPError):
                return f"it answered the start-up handshake with an error: {exc.message}"
            if isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError):
                return "it closed the connection during start-up" + (f": {tail}" if tail else "")
            if isinstance(exc, ValidationError | RuntimeError):
                return f"its start-up answer could not be used ({_first_line(exc)})"
        if leaves:
            return f"it failed unexpectedly ({type(leaves[0]).__name__}: {_first_line(leaves[0])})"
        return "it ended during start-up" + (f": {tail}" if tail else "")

    def _loss_detail(self, problem: BaseException) -> str:
        exc = _leaves(problem)[0] if _leaves(problem) else problem
        if isinstance(exc, httpx2.HTTPError):
            return f"{self.config.url} could not be reached: {_first_line(exc)}"
        return f"{type(exc).__name__}: {_first_line(exc)}"

    def gone_sentence(self, tool: str | None = None) -> str:
        what = f"its tool '{tool}'" if tool else "a call"
        if self._closing:
            return f"The MCP server '{self.name}' was shut down while {what} was running."
        return (
            f"The MCP server '{self.name}' stopped while {what} was running, "
            "so whether it finished is unknown."
        )

    async def _watch(self, lost: anyio.Event, scope: anyio.CancelScope) -> None:
        await lost.wait()
        if not self._closing:
            self._state = "stopping"  # callers now wait for the teardown, then restart
        scope.cancel()

    async def _handle(self, session: ClientSession, call: _Call) -> None:
        try:
            with call.scope:
                try:
                    result = await session.call_tool(call.tool, call.args)
                except _CALL_ERRORS as exc:
                    _settle(call, exc)
                    return
                self._restarted = False  # it served a call: a later death may restart it
                _settle(call, result)
        finally:
            _settle(call, _ServerGone(self.gone_sentence(call.tool)))


class McpTool:
    """One MCP tool as a Hearth tool: `<server>__<tool>`, its schema, its declared effect."""

    def __init__(self, servers: McpServers, server: str, tool: mcp_types.Tool, name: str) -> None:
        self._servers = servers
        self.server = server
        self.tool = tool.name
        self.name = name
        described = (tool.description or "").strip() or f"The {tool.name} tool."
        self.description = f"{described} (MCP server '{server}')"
        schema = dict(tool.input_schema)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        self.parameters: dict[str, Any] = schema
        read_only = bool(tool.annotations and tool.annotations.read_only_hint)
        self.effect: Effect = "reads" if read_only else "external"
        self.parallel_safe = read_only

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        outcome = await self._servers.call(self.server, self.tool, args)
        if len(outcome.output) <= ctx.output_chars:
            return outcome
        cut = outcome.output[: ctx.output_chars] + (
            f"\n[output cut at {ctx.output_chars} characters]"
        )
        return ToolOutcome(output=cut, receipt=outcome.receipt, ok=outcome.ok)


class McpServers:
    """Every configured MCP server, each started on first use and stopped by `close()`."""

    def __init__(
        self,
        configs: Sequence[McpServerConfig],
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        self.call_timeout = call_timeout
        self._connections: dict[str, _Connection] = {}
        for config in configs:
            if config.name in self._connections:
                raise ValueError(f"two MCP servers are named {config.name!r}")
            self._connections[config.name] = _Connection(config, start_timeout)
        self._names: dict[tuple[str, str], str] = {}  # (server, tool) -> its Hearth name, stable

    def status(self) -> dict[str, str]:
        """name -> "ready" | "not started" | "starting" | "stopping" (a server that died,
        while its session is torn down) | "failed: <sentence>"."""
        return {name: conn.status() for name, conn in self._connections.items()}

    async def tools(self) -> list[McpTool]:
        """The tools of every server that is (or can be) running; a failed server is skipped."""

        async def start(conn: _Connection) -> None:
            try:
                await conn.ensure()
            except ToolRefused as refused:
                log.info("%s", refused.sentence)

        await asyncio.gather(*(start(conn) for conn in self._connections.values()))
        found: list[McpTool] = []
        for conn in self._connections.values():
            if conn.status() != "ready":
                continue
            for tool in conn.tools:
                found.append(McpTool(self, conn.name, tool, self._name_for(conn.name, tool.name)))
        return found

    def _name_for(self, server: str, tool: str) -> str:
        key = (server, tool)
        if key not in self._names:
            base = tool_name(server, tool)
            taken = set(self._names.values())
            name, n = base, 2
            while name in taken:
                suffix = f"_{n}"
                name, n = base[: MAX_TOOL_NAME - len(suffix)] + suffix, n + 1
            self._names[key] = name
        return self._names[key]

    async def call(
        self, server: str, tool: str, args: dict[str, Any], timeout: float | None = None
    ) -> ToolOutcome:
        """Call `tool` (its MCP name) on `server`. A server that cannot run → ToolRefused."""
        conn = self._connections.get(server)
        if conn is None:
            raise ToolRefused(f"There is no MCP server named '{server}'.")
        await conn.ensure()
        future = conn.submit(tool, args)
        limit = self.call_timeout if timeout is None else timeout
        name = self._names.get((server, tool)) or tool_name(server, tool)
        called = f"Called {name} on the {server} server"
        try:
            result = await asyncio.wait_for(future, limit)
        except TimeoutError:
            return ToolOutcome(
                output=f"{name} did not answer within {_secs(limit)}; the call was cancelled.",
                receipt=f"{called}; it did not answer within {limit:g} s.",
                ok=False,
            )
        except _ServerGone as gone:
            return ToolOutcome(str(gone), f"{called}; the server stopped.", ok=False)
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                text = conn.gone_sentence(tool)
                return ToolOutcome(text, f"{called}; the server stopped.", ok=False)
            return ToolOutcome(
                f"The {server} server refused {name}: {exc.message}",
                f"{called}; it refused the call.",
                ok=False,
            )
        except (RuntimeError, ValidationError) as exc:
            return ToolOutcome(
                f"The {server} server's answer to {name} could not be used: {_first_line(exc)}",
                f"{called}; its answer could not be used.",
                ok=False,
            )
        except (OSError, httpx2.HTTPError, anyio.BrokenResourceError,
                anyio.ClosedResourceError) as exc:
            return ToolOutcome(
                f"The connection to the {server} server failed during {name}: {_first_line(exc)}",
                f"{called}; the connection failed.",
                ok=False,
            )
        if result.is_error:
            text = render_result(result) or f"{name} reported an error without a message."
            return ToolOutcome(text, f"{called}; it reported an error.", ok=False)
        return ToolOutcome(render_result(result) or "(no output)", f"{called}.", ok=True)

    async def close(self) -> None:
        """Stop every server (stdio children are gone when this returns)."""
        await asyncio.gather(*(conn.close() for conn in self._connections.values()))
