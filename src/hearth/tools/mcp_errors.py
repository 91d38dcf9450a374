"""What an MCP connection may raise, and how a failure is said to a person.

Owns the named exceptions of the MCP client (`NotConfigured`, `ServerGone`), the tuples of SDK
and transport errors the session expects by name (anything else is a bug, logged at the worker
task's boundary), and the phrasing helpers: why a server could not start, what ended a working
session, a duration in words, an exception's first line.
"""

from __future__ import annotations

import anyio
import httpx2
from mcp import types as mcp_types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from hearth.config import McpServerConfig


class NotConfigured(Exception):
    """The server's configuration names neither (or both) a command and a url."""


class ServerGone(Exception):
    """The call's connection ended before it answered; the message says how."""


# What a transport or session may raise at us, by name. Anything else is a bug, logged at the
# worker task's boundary and still turned into the server's failure sentence.
KNOWN_ERRORS: tuple[type[BaseException], ...] = (
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
CALL_ERRORS: tuple[type[BaseException], ...] = (
    MCPError,
    RuntimeError,
    ValidationError,
    OSError,
    httpx2.HTTPError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)
START_ERRORS: tuple[type[BaseException], ...] = (*KNOWN_ERRORS, NotConfigured)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside `exc`, exception groups flattened, in order."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def first_line(exc: BaseException) -> str:
    """The first line of the exception's message (at most 200 characters), else its type."""
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def secs(seconds: float) -> str:
    """`1 second`, `2.5 seconds`."""
    return f"{seconds:g} second{'' if seconds == 1 else 's'}"


def start_failure(
    config: McpServerConfig, start_timeout: float, problem: BaseException | None, tail: str
) -> str:
    """Why the start failed, as the end of a sentence."""
    found = leaves(problem) if problem is not None else []
    for exc in found:
        if isinstance(exc, NotConfigured):
            return str(exc)
        if isinstance(exc, TimeoutError):  # before OSError, its base class
            limit = secs(start_timeout)
            return f"it did not finish its start-up handshake within {limit}"
        if isinstance(exc, FileNotFoundError) and config.command:
            return f"command '{config.command}' was not found"
        if isinstance(exc, PermissionError) and config.command:
            return f"command '{config.command}' could not be run (permission denied)"
        if isinstance(exc, OSError) and config.command:
            return f"command '{config.command}' could not be run ({exc.strerror or exc})"
        if isinstance(exc, httpx2.HTTPError | httpx2.InvalidURL):
            return f"{config.url} could not be reached ({first_line(exc)})"
        if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
            return "it exited during start-up" + (f": {tail}" if tail else "")
        if isinstance(exc, MCPError):
            return f"it answered the start-up handshake with an error: {exc.message}"
        if isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError):
            return "it closed the connection during start-up" + (f": {tail}" if tail else "")
        if isinstance(exc, ValidationError | RuntimeError):
            return f"its start-up answer could not be used ({first_line(exc)})"
    if found:
        return f"it failed unexpectedly ({type(found[0]).__name__}: {first_line(found[0])})"
    return "it ended during start-up" + (f": {tail}" if tail else "")


def loss_detail(config: McpServerConfig, problem: BaseException) -> str:
    """What ended a session that was working, for the parentheses of its failure sentence."""
    exc = leaves(problem)[0] if leaves(problem) else problem
    if isinstance(exc, httpx2.HTTPError):
        return f"{config.url} could not be reached: {first_line(exc)}"
    return f"{type(exc).__name__}: {first_line(exc)}"
