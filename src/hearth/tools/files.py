"""The file tools: read_file, list_dir, write_file, all confined to the workspace."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hearth import atomic
from hearth.home import owner_umask
from hearth.tools import fence
from hearth.tools.base import Effect, Placed, ToolContext, ToolOutcome, ToolRefused
from hearth.tools.workspace import display, resolve_inside

MAX_READ_BYTES = 2_000_000
MAX_WRITE_BYTES = 5_000_000


def size_words(count: int) -> str:
    if count < 1024:
        return f"{count} bytes" if count != 1 else "1 byte"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KB"
    return f"{count / (1024 * 1024):.1f} MB"


class ReadFile:
    name = "read_file"
    description = "Read a text file from the workspace. Paths are relative to the workspace."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "File path in the workspace"}},
        "required": ["path"],
    }
    effect: Effect = "reads"
    placed: Placed = "gateway"
    parallel_safe = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        path = resolve_inside(ctx.workspace, args["path"], ctx.placement.hidden)
        return await asyncio.to_thread(self._read, path, ctx)

    def _read(self, path: Path, ctx: ToolContext) -> ToolOutcome:
        name = display(ctx.workspace, path)
        if not path.is_file():
            raise ToolRefused(f"There is no file {name!r} in the workspace.")
        with path.open("rb") as handle:
            data = handle.read(MAX_READ_BYTES + 1)
        truncated = len(data) > MAX_READ_BYTES
        text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        if len(text) > ctx.output_chars:
            text, truncated = text[: ctx.output_chars], True
        note = " (truncated)" if truncated else ""
        return ToolOutcome(
            output=text + ("\n[truncated]" if truncated else ""),
            receipt=f"Read {size_words(len(data[:MAX_READ_BYTES]))} from {name}{note}.",
        )


class ListDir:
    name = "list_dir"
    description = "List the entries of a folder in the workspace ('.' is the workspace itself)."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Folder path; default '.'"}},
        "required": [],
    }
    effect: Effect = "reads"
    placed: Placed = "gateway"
    parallel_safe = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        path = resolve_inside(ctx.workspace, args.get("path") or ".", ctx.placement.hidden)
        return await asyncio.to_thread(self._list, path, ctx)

    def _list(self, path: Path, ctx: ToolContext) -> ToolOutcome:
        name = display(ctx.workspace, path)
        if not path.is_dir():
            raise ToolRefused(f"There is no folder {name!r} in the workspace.")
        lines = []
        for entry in sorted(path.iterdir(), key=lambda p: p.name):
            if fence.hides(entry, ctx):
                continue  # the memory folder, for work that reads no memory
            if entry.is_symlink():
                lines.append(f"{entry.name} -> (symlink)")
            elif entry.is_dir():
                lines.append(f"{entry.name}/")
            else:
                lines.append(f"{entry.name}  {size_words(entry.stat().st_size)}")
        output = "\n".join(lines) if lines else "(empty folder)"
        count = len(lines)
        noun = "entry" if count == 1 else "entries"
        where = "the workspace" if name == "." else name
        receipt = f"Listed {count} {noun} in {where}."
        return ToolOutcome(output=output[: ctx.output_chars], receipt=receipt)


class WriteFile:
    name = "write_file"
    description = (
        "Write text to a file in the workspace, creating folders as needed and replacing "
        "any file already there."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path in the workspace"},
            "content": {"type": "string", "description": "The whole new content"},
        },
        "required": ["path", "content"],
    }
    effect: Effect = "changes"
    placed: Placed = "gateway"
    parallel_safe = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        path = resolve_inside(ctx.workspace, args["path"], ctx.placement.hidden)
        data = args["content"].encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise ToolRefused(
                f"Refused: the content is {size_words(len(data))}, over the "
                f"{size_words(MAX_WRITE_BYTES)} a single write may hold."
            )
        return await asyncio.to_thread(self._write, path, data, ctx)

    def _write(self, path: Path, data: bytes, ctx: ToolContext) -> ToolOutcome:
        name = display(ctx.workspace, path)
        if path.is_dir():
            raise ToolRefused(f"Refused: {name!r} is a folder, not a file.")
        path.parent.mkdir(parents=True, exist_ok=True)
        # the folders made must still be inside
        resolve_inside(ctx.workspace, name, ctx.placement.hidden)
        write_atomically(path, data)
        receipt = f"Wrote {size_words(len(data))} to {name}."
        return ToolOutcome(output=receipt, receipt=receipt)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace (or make) a workspace file whole (`hearth.atomic`): an existing file keeps its
    mode bits, a new one gets the owner's (their umask, not the gateway's private one)."""
    atomic.write_atomically(path, data, mode=0o666 & ~owner_umask(), keep_mode=True)
