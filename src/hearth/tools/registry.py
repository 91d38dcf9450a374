"""The tool registry: the tools a turn may offer the model, by name."""

from __future__ import annotations

from collections.abc import Iterable

from hearth.tools.base import Tool
from hearth.tools.edit import EditFile
from hearth.tools.files import ListDir, ReadFile, WriteFile
from hearth.tools.search import Glob, Grep
from hearth.tools.shell import Shell
from hearth.tools.web import WebFetch


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"two tools are named {tool.name!r}")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def all(self) -> list[Tool]:
        return list(self._tools.values())


def builtin_tools() -> list[Tool]:
    return [ReadFile(), ListDir(), Glob(), Grep(), WriteFile(), EditFile(), Shell(), WebFetch()]
