"""How Hearth reaches one MCP server: its transport and a `ClientSession` on it.

Owns the choice of transport (stdio: a child process started with a minimal environment, through
mcp_stdio's bounded transport; streamable HTTP: a session with `url`, through mcp_bounds' bounded
client; either way no message is kept past MAX_MESSAGE_BYTES), where a bare command is looked
for, the temporary file that collects a stdio server's stderr and its last line, and an EOF watch
that tells the session owner when the server's output ends (a stdio server that exits closes its
stdout).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self, TextIO, cast

import anyio
from mcp import ClientSession, StdioServerParameters, types as mcp_types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from hearth import __version__
from hearth.config import McpServerConfig
from hearth.tools.mcp_bounds import MAX_MESSAGE_BYTES, bounded_http_client
from hearth.tools.mcp_errors import NotConfigured
from hearth.tools.mcp_stdio import bounded_stdio_client

_ENV_PASSED = ("PATH", "HOME", "LANG")  # what a stdio server inherits from us (see _child_env)
_CLIENT_INFO = mcp_types.Implementation(name="hearth", version=__version__)


class _EofWatch:
    """The transport's read stream, passed through, calling `on_eof` when it ends.

    A stdio server that exits closes its stdout; the SDK's dispatcher then fails what is pending
    but nothing tells the owner. This wrapper does, so the worker can tear the session down and
    the next call restarts the server. `last_context` is forwarded because the dispatcher reads
    it (duck-typed) from context-carrying streams.
    """

    def __init__(self, inner: Any, on_eof: Callable[[], None]) -> None:
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


def open_errlog(config: McpServerConfig) -> TextIO | None:
    """A temporary file for a stdio server's stderr; None for a server reached by url."""
    if not config.command:
        return None
    return cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))


def stderr_tail(errlog: IO[str] | None) -> str:
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


def open_transport(
    config: McpServerConfig, errlog: TextIO | None
) -> AbstractAsyncContextManager[Any]:
    """The server's transport, not yet entered; NotConfigured when its config names neither
    (or both) a command and a url."""
    cfg = config
    if cfg.url and not cfg.command:
        return _http_transport(cfg.url)
    if cfg.command and not cfg.url:
        env = _child_env(cfg.env)
        params = StdioServerParameters(
            command=_resolve_command(cfg.command, env), args=list(cfg.args), env=env
        )
        return bounded_stdio_client(params, errlog if errlog is not None else sys.stderr)
    if cfg.command and cfg.url:
        raise NotConfigured("its configuration has both a command and a url; give one")
    raise NotConfigured("its configuration has neither a command nor a url")


@asynccontextmanager
async def _http_transport(url: str) -> AsyncIterator[Any]:
    """Streamable HTTP through Hearth's bounded client (mcp_bounds), which outlives it."""
    async with (
        bounded_http_client() as client,
        streamable_http_client(url, http_client=client,
                               max_sse_event_size=MAX_MESSAGE_BYTES) as streams,
    ):
        yield streams


async def open_session(
    stack: AsyncExitStack,
    config: McpServerConfig,
    errlog: TextIO | None,
    on_eof: Callable[[], None],
) -> ClientSession:
    """Enter the server's transport and a `ClientSession` on it into `stack` (the session is
    not initialized yet); `on_eof` is called when the server's output ends."""
    read, write = await stack.enter_async_context(open_transport(config, errlog))
    return await stack.enter_async_context(
        ClientSession(_EofWatch(read, on_eof), write, client_info=_CLIENT_INFO)
    )
