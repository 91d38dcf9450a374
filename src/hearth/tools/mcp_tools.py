"""MCP tools as Hearth tools: the `McpTool` adapter, its name, and how a result reads.

Owns `McpTool` (one MCP tool offered as a Hearth `Tool`: `<server>__<tool>`, its input schema,
its effect from the tool's read-only hint, its output cut to the turn's limit), `tool_name`
(the sanitised, length-bounded Hearth name) and `render_result` (an MCP call result as text).
The adapter runs a call through whatever routes it to its server (`McpServers` in mcp_client).
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from mcp import types as mcp_types

from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome

MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """`<server>__<tool>` with anything outside [A-Za-z0-9_-] replaced, at most 64 characters."""
    return f"{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"[:MAX_TOOL_NAME]


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


class McpCaller(Protocol):
    """What routes an MCP tool call to its server (`McpServers`)."""

    async def call(
        self, server: str, tool: str, args: dict[str, Any], timeout: float | None = None
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
        outcome = await self._servers.call(self.server, self.tool, args)
        if len(outcome.output) <= ctx.output_chars:
            return outcome
        cut = outcome.output[: ctx.output_chars] + (
            f"\n[output cut at {ctx.output_chars} characters]"
        )
        return ToolOutcome(output=cut, receipt=outcome.receipt, ok=outcome.ok)
