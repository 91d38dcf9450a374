"""MCP client: the configured `[[mcp_servers]]`, their tools, and calls routed to them.

Owns `McpServers`, the registry of every configured server: one `McpSession` each
(mcp_session.py: started lazily on first use, stopped by `McpServers.close()`), the stable
Hearth name of each MCP tool (`<server>__<tool>`, made unique), and a call's result or failure
said as a `ToolOutcome`. A server that cannot start, crashes or stops answering is described in
a sentence (`McpServers.status()`); it never takes the gateway or the other servers down with it.

The other pieces: mcp_transport.py (how a server is reached), mcp_errors.py (what it may raise,
said in sentences), mcp_tools.py (an MCP tool as a Hearth tool).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import anyio
import httpx2
from mcp import types as mcp_types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from hearth.config import McpServerConfig
from hearth.tools.base import ToolOutcome, ToolRefused
from hearth.tools.mcp_bounds import is_too_large
from hearth.tools.mcp_errors import ServerGone, first_line, secs
from hearth.tools.mcp_session import McpSession
from hearth.tools.mcp_tools import MAX_TOOL_NAME, McpTool, render_result, tool_name

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_START_TIMEOUT = 30.0
_PARSE_FAILED = "Failed to parse JSON response: "  # how the SDK's HTTP transport words it


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
        self._connections: dict[str, McpSession] = {}
        for config in configs:
            if config.name in self._connections:
                raise ValueError(f"two MCP servers are named {config.name!r}")
            self._connections[config.name] = McpSession(config, start_timeout)
        self._names: dict[tuple[str, str], str] = {}  # (server, tool) -> its Hearth name, stable

    def status(self) -> dict[str, str]:
        """name -> "ready" | "not started" | "starting" | "stopping" (a server that died,
        while its session is torn down) | "failed: <sentence>"."""
        return {name: conn.status() for name, conn in self._connections.items()}

    async def tools(self) -> list[McpTool]:
        """The tools of every server that is (or can be) running; a failed server is skipped."""

        async def start(conn: McpSession) -> None:
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
        self, server: str, tool: str, args: dict[str, Any], timeout: float | None = None,
        max_chars: int | None = None,
    ) -> ToolOutcome:
        """Call `tool` (its MCP name) on `server`; of its answer no more than `max_chars`
        characters are kept (see `render_result`). A server that cannot run → ToolRefused."""
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
                output=f"{name} did not answer within {secs(limit)}; the call was cancelled.",
                receipt=f"{called}; it did not answer within {limit:g} s.",
                ok=False,
            )
        except ServerGone as gone:
            return ToolOutcome(str(gone), f"{called}; the server stopped.", ok=False)
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                text = conn.gone_sentence(tool)
                return ToolOutcome(text, f"{called}; the server stopped.", ok=False)
            if is_too_large(exc.message):
                return ToolOutcome(f"The {server} server's answer to {name} was not used: "
                                   f"{exc.message.removeprefix(_PARSE_FAILED)}.",
                                   f"{called}; its answer was too large.", ok=False)
            return ToolOutcome(
                f"The {server} server refused {name}: {exc.message}",
                f"{called}; it refused the call.",
                ok=False,
            )
        except (RuntimeError, ValidationError) as exc:
            return ToolOutcome(
                f"The {server} server's answer to {name} could not be used: {first_line(exc)}",
                f"{called}; its answer could not be used.",
                ok=False,
            )
        except (OSError, httpx2.HTTPError, anyio.BrokenResourceError,
                anyio.ClosedResourceError) as exc:
            return ToolOutcome(
                f"The connection to the {server} server failed during {name}: {first_line(exc)}",
                f"{called}; the connection failed.",
                ok=False,
            )
        text = render_result(result, max_chars)
        if result.is_error:
            text = text or f"{name} reported an error without a message."
            return ToolOutcome(text, f"{called}; it reported an error.", ok=False)
        return ToolOutcome(text or "(no output)", f"{called}.", ok=True)

    async def close(self) -> None:
        """Stop every server (stdio children are gone when this returns)."""
        await asyncio.gather(*(conn.close() for conn in self._connections.values()))
