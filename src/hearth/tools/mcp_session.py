"""One MCP server's session lifecycle: start, death detection, one restart, its status.

Owns `McpSession`, the state machine of one configured server: "not started" → "starting" →
"ready"; a ready server whose output ends goes "stopping" (its session is torn down) and then
"failed", and is restarted once, on its next use. A start that fails, or a restarted server
that dies before it served a call, stays "failed" with a sentence saying why. Closing returns
it to "not started" for good.

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
import logging
import math
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession, types as mcp_types

from hearth.config import McpServerConfig
from hearth.tools.base import ToolRefused
from hearth.tools.mcp_errors import (
    CALL_ERRORS,
    KNOWN_ERRORS,
    START_ERRORS,
    ServerGone,
    leaves,
    loss_detail,
    start_failure,
)
from hearth.tools.mcp_transport import open_errlog, open_session, stderr_tail

# One logger for the whole MCP client, so its log lines keep the name they always had.
log = logging.getLogger("hearth.tools.mcp_client")

_CLOSE_WAIT = 15.0  # the SDK's stdio shutdown is bounded (~6 s); this is a backstop


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


@dataclass(eq=False)
class _Run:
    """What one run of the worker task opened and how far it got."""

    errlog: TextIO | None = None
    lost: anyio.Event = field(default_factory=anyio.Event)
    initialized: bool = False


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


class McpSession:
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

    async def _serve(
        self,
        scope: anyio.CancelScope,
        receive: MemoryObjectReceiveStream[_Call],
        ready: asyncio.Future[str | None],
    ) -> None:
        """The worker task: owns the transport and session contexts from entry to exit."""
        run = _Run()
        problem: BaseException | None = None
        try:
            run.errlog = open_errlog(self.config)
            with scope:
                await self._run_session(run, receive, ready)
        except ExceptionGroup as group:
            problem = group
            unknown = [leaf for leaf in leaves(group) if not isinstance(leaf, KNOWN_ERRORS)]
            if unknown:
                log.error("the MCP server %r failed", self.name, exc_info=group)
        except START_ERRORS as exc:
            problem = exc
        except Exception as exc:  # the task boundary: logged, then said in a sentence
            log.exception("the MCP server %r failed unexpectedly", self.name)
            problem = exc
        finally:
            self._wind_down(run, receive, ready, problem)

    async def _run_session(
        self,
        run: _Run,
        receive: MemoryObjectReceiveStream[_Call],
        ready: asyncio.Future[str | None],
    ) -> None:
        """Connect, hand-shake, list the tools, say ready, then serve calls until the end."""
        async with AsyncExitStack() as stack:
            session = await open_session(stack, self.config, run.errlog, run.lost.set)
            with anyio.fail_after(self._start_timeout):
                await session.initialize()
                self.tools = await _list_all_tools(session)
            run.initialized = True
            self._state = "ready"
            if not ready.done():
                ready.set_result(None)
            await self._serve_calls(session, receive, run.lost)

    async def _serve_calls(
        self,
        session: ClientSession,
        receive: MemoryObjectReceiveStream[_Call],
        lost: anyio.Event,
    ) -> None:
        """Each queued call in its own child task, until the queue closes or the server is lost."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch, lost, tg.cancel_scope)
            async for call in receive:
                tg.start_soon(self._handle, session, call)
            tg.cancel_scope.cancel()

    def _wind_down(
        self,
        run: _Run,
        receive: MemoryObjectReceiveStream[_Call],
        ready: asyncio.Future[str | None],
        problem: BaseException | None,
    ) -> None:
        """The worker's end: answer what is queued, close the stderr file, record the outcome."""
        # Calls still queued get an answer; the send side then fails fast.
        gone = ServerGone(self.gone_sentence())
        while True:
            try:
                _settle(receive.receive_nowait(), gone)
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
        receive.close()
        tail = stderr_tail(run.errlog)
        if run.errlog is not None:
            run.errlog.close()
        self._finish(run.initialized, problem, tail)
        if not ready.done():
            ready.set_result(self._failure or f"The MCP server '{self.name}' was shut down.")

    def _finish(self, initialized: bool, problem: BaseException | None, tail: str) -> None:
        if self._closing:
            self._state, self._failure = "not started", ""
            return
        self._state = "failed"
        if not initialized:
            why = start_failure(self.config, self._start_timeout, problem, tail)
            self._failure = f"The MCP server '{self.name}' could not start: {why}."
            if tail:
                log.warning("MCP server %r stderr: %s", self.name, tail)
            return
        # The stderr tail is not quoted here: after a working session it is usually an old
        # log line, not the cause. It goes to the log for whoever investigates.
        detail = f" ({loss_detail(self.config, problem)})" if problem is not None else ""
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
                except CALL_ERRORS as exc:
                    _settle(call, exc)
                    return
                self._restarted = False  # it served a call: a later death may restart it
                _settle(call, result)
        finally:
            _settle(call, ServerGone(self.gone_sentence(call.tool)))
