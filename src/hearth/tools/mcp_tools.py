"""MCP tools as Hearth tools: the `McpTool` adapter, its name, and how a result reads.

Owns `McpTool` (one MCP tool offered as a Hearth `Tool`: `<server>__<tool>`, its input schema,
its effect from the tool's read-only hint, its output cut to the turn's limit), `tool_name`
(the sanitised, length-bounded Hearth name) and `render_result` (an MCP call result as text,
no more of it kept than the limit). What a server may send at all is bounded by its transport
(mcp_bounds, mcp_stdio).
The adapter runs a call through whatever routes it to its server (`McpServers` in mcp_client).
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from mcp import types as mcp_types

from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome

MAX_TOOL_NAME = 64
CUT_NOTE_ROOM = 100  # render_result's note may follow the `limit` characters it kept
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """`<server>__<tool>` with anything outside [A-Za-z0-9_-] replaced, at most 64 characters."""
    return f"{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"[:MAX_TOOL_NAME]


def _size(base64_data: str) -> str:
    size = len(base64_data) * 3 // 4
    return f"{size} bytes" if size < 10_000 else f"{size // 1024} KB"


def _block_line(block: mcp_types.ContentBlock) -> str | None:
    """A text block's text; an image, audio or resource summarised in one line."""
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent):
        return f"[image: {block.mime_type}, {_size(block.data)}]"
    if isinstance(block, mcp_types.AudioContent):
        return f"[audio: {block.mime_type}, {_size(block.data)}]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource link: {block.name} <{block.uri}>]"
    if isinstance(block, mcp_types.EmbeddedResource):
        res = block.resource
        if isinstance(res, mcp_types.TextResourceContents):
            what = f"{len(res.text)} characters of {res.mime_type or 'text'}"
        else:
            what = f"{_size(res.blob)} of {res.mime_type or 'binary data'}"
        return f"[resource {res.uri}: {what}]"
    return None


def render_result(result: mcp_types.CallToolResult, limit: int | None = None) -> str:
    """The text blocks joined; images, audio and resources summarised in one line each.

    With a `limit`, no more than `limit` characters are kept: each block is taken only up to
    the room left, the rest counted and dropped, and a note says so."""
    lines = [line for block in result.content if (line := _block_line(block)) is not None]
    if not lines and result.structured_content is not None:
        lines = [json.dumps(result.structured_content, ensure_ascii=False)]
    total = max(sum(len(line) + 1 for line in lines) - 1, 0)  # the length of them all joined
    if limit is None or total <= limit:
        return "\n".join(lines)
    kept: list[str] = []
    room = limit
    for line in lines:
        if room <= 0:
            break
        kept.append(line[:room])
        room -= len(kept[-1]) + 1
    text = "\n".join(kept)[:limit]
    return f"{text}\n[output cut at {limit} characters of {total:,}; the rest was dropped]"


class McpCaller(Protocol):
    """What routes an MCP tool call to its server (`McpServers`)."""

    async def call(
        self, server: str, tool: str, args: dict[str, Any], timeout: float | None = None,
        max_chars: int | None = None,
    ) -> ToolOutcome: ...


class McpTool:
    """One MCP tool as a Hearth tool: `<server>__<tool>`, its schema, its declared effect."""

    def __init__(self, servers: McpCaller, server: str, tool: mcp_types.Tool, name: str) -> None:
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
        self.placed: Placed = "remote"
        self.parallel_safe = read_only

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        outcome = await self._servers.call(self.server, self.tool, args,
                                           max_chars=ctx.output_chars)
        if len(outcome.output) <= ctx.output_chars + CUT_NOTE_ROOM:
            return outcome
        cut = outcome.output[: ctx.output_chars] + (
            f"\n[output cut at {ctx.output_chars} characters]"
        )
        return ToolOutcome(output=cut, receipt=outcome.receipt, ok=outcome.ok)
