"""The dependency census's reader: which third-party packages the gateway's modules import,
which distribution provides each, what pyproject.toml declares (the core and each extra), and
which of the extras' packages a module imports at import time, itself or through the hearth
modules it imports at import time.

Modules are given as parsed trees by dotted name (`modules()` reads src/hearth), so a test can
hand in a planted tree of its own: the census's positive control.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

from tests.support.census import SRC, sources

PYPROJECT = SRC.parents[1] / "pyproject.toml"
CORE = "core"
NOT_PACKAGES = ("all", "dev", "docs")  # extras of other extras, or of tools (tests, the docs site)


@dataclass(frozen=True)
class Import:
    module: str  # the dotted name imported (`from X import y`: X)
    line: int
    eager: bool  # run when the importing module is imported (not in a function, not typing)


def modules() -> dict[str, ast.Module]:
    """src/hearth's modules by dotted name (`hearth.channels.setup`; a package by its own)."""
    named = {}
    for path, tree in sources().items():
        parts = ["hearth", *Path(path).with_suffix("").parts]
        named[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = tree
    return named


def imports(tree: ast.Module, module: str = "") -> list[Import]:
    """Every import statement in `tree`, relative ones resolved against `module`'s name."""
    found: list[Import] = []
    _walk(tree, module, eager=True, into=found)
    return found


def _walk(node: ast.AST, package: str, eager: bool, into: list[Import]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            _walk(child, package, False, into)
        elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            for part in child.body:
                _walk(ast.Module(body=[part], type_ignores=[]), package, False, into)
            for part in child.orelse:
                _walk(ast.Module(body=[part], type_ignores=[]), package, eager, into)
        elif isinstance(child, ast.Import):
            into += [Import(alias.name, child.lineno, eager) for alias in child.names]
        elif isinstance(child, ast.ImportFrom):
            base = _absolute(child, package)
            into.append(Import(base, child.lineno, eager))
            into += [Import(f"{base}.{alias.name}", child.lineno, eager)
                     for alias in child.names if base.startswith("hearth")]
        else:
            _walk(child, package, eager, into)


def _absolute(node: ast.ImportFrom, module: str) -> str:
    """`from .x import y` in `module` (src has none; a module, not a package, is assumed)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")[:-node.level]
    return ".".join([*parts, *([node.module] if node.module else [])])


def third_party(module: str) -> bool:
    top = module.split(".")[0]
    return top not in sys.stdlib_module_names and top not in ("hearth", "__future__")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _module_owners() -> dict[str, str]:
    """Every installed module's dotted name, by the distribution whose files hold it."""
    owners: dict[str, str] = {}
    for dist in metadata.distributions():
        name = canonical(dist.metadata["Name"] or "")
        for file in dist.files or ():
            if file.suffix not in (".py", ".so", ".pyd") or ".." in file.parts:
                continue
            parts = [file.parts[-1].split(".")[0] if i == len(file.parts) - 1 else part
                     for i, part in enumerate(file.parts)]
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            for depth in range(1, len(parts) + 1):  # a namespace package's own name too
                owners.setdefault(".".join(parts[:depth]), name)
            owners[".".join(parts)] = name
    return owners


def distribution_of(module: str) -> str | None:
    """The distribution that provides `module` (its deepest installed part), if installed."""
    owners = _module_owners()
    parts = module.split(".")
    for depth in range(len(parts), 0, -1):
        found = owners.get(".".join(parts[:depth]))
        if found is not None:
            return found
    return None


def declared(pyproject: Path = PYPROJECT) -> dict[str, str]:
    """Each distribution pyproject.toml declares, by the extra it is in (`core`: always)."""
    project = tomllib.loads(pyproject.read_text("utf-8"))["project"]
    found = {_name(spec): CORE for spec in project["dependencies"]}
    for extra, specs in project["optional-dependencies"].items():
        if extra not in NOT_PACKAGES:
            found.update({_name(spec): extra for spec in specs if _name(spec) not in found})
    return found


def extras_of(pyproject: Path = PYPROJECT) -> dict[str, set[str]]:
    """Each extra (not `all` or `dev`) and its distributions."""
    project = tomllib.loads(pyproject.read_text("utf-8"))["project"]
    return {extra: {_name(spec) for spec in specs}
            for extra, specs in project["optional-dependencies"].items()
            if extra not in NOT_PACKAGES}


def _name(spec: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    assert match, spec
    return canonical(match.group(1))


def undeclared(trees: Mapping[str, ast.Module], known: Mapping[str, str]) -> list[str]:
    """Each third-party import in `trees` whose distribution `known` does not declare."""
    found = []
    for name, tree in trees.items():
        for imported in imports(tree, name):
            if not third_party(imported.module):
                continue
            dist = distribution_of(imported.module)
            if dist is None:
                found.append(f"{name}:{imported.line} imports {imported.module}, which is "
                             "not installed (so not declared)")
            elif dist not in known:
                found.append(f"{name}:{imported.line} imports {imported.module} (from {dist}), "
                             "which pyproject.toml does not declare")
    return found


def eager_extras(trees: Mapping[str, ast.Module], known: Mapping[str, str],
                 integrations: Mapping[str, set[str]]) -> list[str]:
    """Each module that imports an extra's package at import time, itself or through the
    hearth modules it imports at import time, unless it is an integration module allowed that
    extra (`integrations`: module → extras)."""
    found = []
    eager = {name: [i for i in imports(tree, name) if i.eager] for name, tree in trees.items()}
    for name in trees:
        for extra, module, via in _reached(name, eager, known):
            if extra not in integrations.get(name, set()):
                through = f" (through {' → '.join(via)})" if via else ""
                found.append(f"{name} imports {module} of the {extra} extra at import "
                             f"time{through}")
    return found


def _reached(start: str, eager: Mapping[str, list[Import]], known: Mapping[str, str]
             ) -> Iterator[tuple[str, str, list[str]]]:
    """(extra, package, the hearth modules between) for each extra's package `start` imports
    at import time (`eager`: each module's imports run at import time), breadth first, each
    hearth module visited once."""
    queue: list[tuple[str, list[str]]] = [(start, [])]
    seen = {start}
    while queue:
        name, via = queue.pop(0)
        for imported in eager[name]:
            if third_party(imported.module):
                extra = known.get(distribution_of(imported.module) or "", CORE)
                if extra != CORE:
                    yield extra, imported.module, via
                continue
            for inner in _with_parents(imported.module):
                if inner in eager and inner not in seen:
                    seen.add(inner)
                    queue.append((inner, [*via, inner]))


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:depth]) for depth in range(1, len(parts) + 1)]

