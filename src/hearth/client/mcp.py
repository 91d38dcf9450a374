"""`hearth mcp`: Hearth's own tools served over MCP (stdio) to an agent CLI, run as one chat.

Owns the translation between MCP (`tools/list`, `tools/call`) and the gateway's tool routes
(`GET /api/sessions/{key}/tools`, `POST /api/sessions/{key}/tools/{name}`). It holds no state
and never touches the database: every call is forwarded to the running gateway, which runs it
as the chat (its workspace, its agent's tool policy, its approvals, the ledger and the audit).

A tool the gateway does not know (its `tool_not_found`) is a JSON-RPC protocol error,
-32602 "Unknown tool: <name>", as the MCP spec's tools/call says; a known tool that fails or is
refused (policy, a denied approval, the gateway gone) is a tool result with `isError`, its
sentence for the model to read.

Only MCP protocol is written to stdout; logs and the start-up sentences go to stderr.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import anyio
import httpx
from mcp import types as mcp_types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from hearth import __version__
from hearth.client.envelope import error_code, error_sentence, unreachable_sentence

log = logging.getLogger(__name__)

CALL_TIMEOUT = 15 * 60.0  # a call waiting for the owner's approval is held by the gateway
CONNECT_TIMEOUT = 10.0
LIST_TIMEOUT = 30.0
EXIT_NO_SESSION = 2
EXIT_NO_GATEWAY = 3
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
UNKNOWN_TOOL = "tool_not_found"  # the gateway's code for a tool name it has no tool for


class GatewayError(Exception):
    """The gateway could not be reached or refused a request; the message says what to do."""

    def __init__(self, sentence: str, status: int | None = None,
                 code: str | None = None) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.status = status
        self.code = code  # the error envelope's code, when the gateway answered one


@dataclass(frozen=True)
class CallAnswer:
    """What the gateway said about one tool call."""

    output: str
    ok: bool
    receipt: str
    run_id: str


class GatewayTools:
    """The chat `key`'s tools, as the gateway's HTTP API serves them."""

    def __init__(self, base_url: str, token: str, key: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.key = key
        self._session_path = f"/api/sessions/{quote(key, safe='')}"
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(LIST_TIMEOUT, connect=CONNECT_TIMEOUT),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def check_session(self) -> None:
        """GatewayError (status 404 when the chat does not exist) unless the chat is there."""
        await self._request("GET", self._session_path, params={"limit": 1})

    async def list_tools(self) -> list[dict[str, Any]]:
        body = await self._request("GET", f"{self._session_path}/tools")
        return list(body.get("tools") or [])

    async def call(self, name: str, arguments: dict[str, Any]) -> CallAnswer:
        timeout = httpx.Timeout(LIST_TIMEOUT, connect=CONNECT_TIMEOUT, read=CALL_TIMEOUT)
        body = await self._request("POST", f"{self._session_path}/tools/{quote(name, safe='')}",
                                   json={"arguments": arguments}, timeout=timeout)
        return CallAnswer(output=str(body.get("output", "")), ok=bool(body.get("ok")),
                          receipt=str(body.get("receipt") or ""),
                          run_id=str(body.get("run_id") or ""))

    async def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.ReadTimeout as error:
            raise GatewayError(
                f"The gateway at {self.base_url} did not answer within "
                f"{_duration(kwargs.get('timeout'))}; if the call waits for an approval, "
                "answer it and try again."
            ) from error
        except httpx.TransportError as error:
            raise GatewayError(unreachable_sentence(self.base_url, error)) from error
        if response.status_code >= 400:
            raise GatewayError(error_sentence(response), response.status_code,
                               error_code(response))
        return _json_object(response)


def _duration(timeout: object) -> str:
    seconds = timeout.read if isinstance(timeout, httpx.Timeout) and timeout.read else LIST_TIMEOUT
    return f"{seconds / 60:g} minutes" if seconds >= 60 else f"{seconds:g} seconds"


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError as error:
        raise GatewayError(f"The gateway answered {response.status_code} with a body that is "
                           "not JSON.") from error
    if not isinstance(body, dict):
        raise GatewayError(f"The gateway answered {response.status_code} with JSON that is "
                           "not an object.")
    return body


def to_mcp_tool(spec: dict[str, Any]) -> mcp_types.Tool:
    """One gateway tool description as an MCP tool; `reads` tools are marked read-only."""
    schema = spec.get("parameters")
    effect = spec.get("effect")
    return mcp_types.Tool(
        name=str(spec["name"]),
        description=str(spec.get("description") or ""),
        input_schema=schema if isinstance(schema, dict) and schema else dict(_EMPTY_SCHEMA),
        annotations=mcp_types.ToolAnnotations(
            read_only_hint=effect == "reads", open_world_hint=effect == "external"
        ),
    )


def to_call_result(answer: CallAnswer) -> mcp_types.CallToolResult:
    """The tool's output as text; `ok == False` is an MCP tool error. The run and receipt ride
    along in `_meta` so a client can find the call in the gateway's ledger."""
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=answer.output)],
        is_error=not answer.ok,
        meta={"hearth/run_id": answer.run_id, "hearth/receipt": answer.receipt},
    )


def error_result(sentence: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=sentence)], is_error=True
    )


def build_server(gateway: GatewayTools) -> Server[Any]:
    """A low-level MCP server whose two handlers forward to the gateway."""

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        try:
            specs = await gateway.list_tools()
        except GatewayError as error:
            raise MCPError(code=mcp_types.INTERNAL_ERROR, message=error.sentence) from error
        return mcp_types.ListToolsResult(tools=[to_mcp_tool(spec) for spec in specs])

    async def call_tool(
        _ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        try:
            answer = await gateway.call(params.name, dict(params.arguments or {}))
        except GatewayError as error:
            if error.code == UNKNOWN_TOOL:
                raise MCPError(code=mcp_types.INVALID_PARAMS,
                               message=f"Unknown tool: {params.name}") from error
            return error_result(error.sentence)
        return to_call_result(answer)

    return Server(
        "hearth",
        version=__version__,
        instructions=f"Hearth's tools, each call run by the Hearth gateway as chat {gateway.key}.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _start_problem(gateway: GatewayTools) -> tuple[int, str] | None:
    """The exit code and sentence when the chat cannot be served, else None."""
    try:
        await gateway.check_session()
    except GatewayError as error:
        if error.status == 404:
            return EXIT_NO_SESSION, (f"There is no chat {gateway.key!r} on the gateway at "
                                     f"{gateway.base_url}; pass the key of an existing chat "
                                     "with --session.")
        return EXIT_NO_GATEWAY, error.sentence
    return None


async def serve(base_url: str, token: str, key: str) -> int:
    """Serve chat `key`'s tools over stdio until the client hangs up; the exit code."""
    gateway = GatewayTools(base_url, token, key)
    try:
        problem = await _start_problem(gateway)
        if problem is not None:
            code, sentence = problem
            print(sentence, file=sys.stderr)
            return code
        server = build_server(gateway)
        log.info("serving the tools of chat %s from %s over MCP stdio", key, gateway.base_url)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return 0
    finally:
        await gateway.aclose()


def run(base_url: str, token: str, key: str) -> int:
    """The `hearth mcp` entry point: logs to stderr, then `serve`."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return anyio.run(serve, base_url, token, key)
