"""The configuration reference (docs/reference/configuration.md), made from the config models
in `hearth.config`: every table of config.toml, every key in it with its type, its default, the
environment variable that sets it (where one does) and what the source says of it (the class's
docstring, the comment beside or above the field).

`settings()` walks the models the way config.toml nests them; `documented()` reads the
reference back, so a test can hold that every setting the models have is in it.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from hearth import config as config_module

PAGE = "reference/configuration.md"
HEADER = "| key | default | |\n| --- | --- | --- |"
LONG_DEFAULT = 48  # a longer default string is shown cut, with its length
TABLE_NAME = re.compile(r"(?<!`)(\[\[?[a-z_.<>*]+\]\]?)(?![`(])")


@dataclass(frozen=True)
class Setting:
    table: str  # as config.toml writes it: `[gateway]`, `[[models]]`, `[agents.<name>.tools]`
    key: str
    owner: type[BaseModel]  # the model the field is declared on
    field: FieldInfo
    env: tuple[str, ...]  # the HEARTH_* variables that set it


@dataclass(frozen=True)
class Table:
    name: str
    model: type[BaseModel]


def _model_of(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """How a field nests a model: ("table", M), ("array", M) for a list of M, ("named", M) for
    a dict of M by name; None for a plain value."""
    kept = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (Union, types.UnionType) and len(kept) == 1:
        annotation = kept[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table", annotation
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return "array", args[0]
    if origin is dict and isinstance(args[-1], type) and issubclass(args[-1], BaseModel):
        return "named", args[-1]
    return None


def tables(model: type[BaseModel], name: str = "") -> Iterator[Table]:
    """Every table of config.toml under `model` (the top level first, as `name` ""), in the
    models' order."""
    yield Table(name, model)
    for key, field in model.model_fields.items():
        nested = _model_of(field.annotation)
        if nested is None:
            continue
        kind, inner = nested
        path = f"{name}.{key}" if name else key
        yield from tables(inner, {"table": path, "array": path,
                                  "named": f"{path}.<name>"}[kind])


def table_heading(table: Table, arrays: set[str]) -> str:
    return f"[[{table.name}]]" if table.name in arrays else f"[{table.name}]"


def settings(root: type[BaseModel]) -> Iterator[Setting]:
    """Every key of every table, a nested table not counted as a key (it has its own)."""
    env = _environment()
    arrays = _arrays(root)
    for table in tables(root):
        for key, field in table.model.model_fields.items():
            if _model_of(field.annotation) is not None:
                continue
            dotted = f"{table.name}.{key}"
            yield Setting(table_heading(table, arrays), key, _owner(table.model, key), field,
                          tuple(sorted(env.get(dotted, ()))))


def _arrays(root: type[BaseModel]) -> set[str]:
    """The tables that are arrays of tables (`[[models]]`)."""
    found = set()
    for table in tables(root):
        for key, field in table.model.model_fields.items():
            nested = _model_of(field.annotation)
            if nested and nested[0] == "array":
                found.add(f"{table.name}.{key}" if table.name else key)
    return found


def _environment() -> dict[str, set[str]]:
    """`section.key` -> the variables that set it (load_config's own table)."""
    found: dict[str, set[str]] = {}
    for var, (section, key) in config_module._env_table().items():
        found.setdefault(f"{section}.{key}", set()).add(var)
    return found


def _owner(model: type[BaseModel], key: str) -> type[BaseModel]:
    for klass in model.__mro__:
        if key in getattr(klass, "__annotations__", {}):
            return klass
    return model


# ------------------------------------------------------------------- what the source says

def _comments() -> dict[tuple[str, str], str]:
    """(class, field) -> the comment beside the field, else the comment lines just above it."""
    source = inspect.getsource(config_module)
    lines = source.splitlines()
    found: dict[tuple[str, str], str] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                text = _comment_of(lines, item.lineno, item.end_lineno or item.lineno)
                if text:
                    found[(node.name, item.target.id)] = text
    return found


def _comment_of(lines: list[str], first: int, last: int) -> str:
    beside = _trailing_comment(lines[last - 1])
    if beside:
        return beside
    above: list[str] = []
    index = first - 2
    while index >= 0 and lines[index].strip().startswith("#"):
        above.insert(0, lines[index].strip().lstrip("#").strip())
        index -= 1
    return " ".join(above)


def _trailing_comment(line: str) -> str:
    """The comment ending a line of code (a `#` outside any string)."""
    quote: str | None = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[index + 1:].strip()
    return ""


# --------------------------------------------------------------------------- the page

def render(root: type[BaseModel] = config_module.Config) -> str:
    comments = _comments()
    arrays = _arrays(root)
    by_table: dict[str, list[Setting]] = {}
    for setting in settings(root):
        by_table.setdefault(setting.table, []).append(setting)
    parts = [_INTRO]
    for table in tables(root):
        heading = table_heading(table, arrays) if table.name else "(top level)"
        rows = by_table.get(heading, [])
        if not rows:
            continue
        parts.append(f"## `{heading}`\n")
        doc = table.model.__dict__.get("__doc__")  # its own, never a base class's
        if doc:
            parts.append(_one_line(doc) + "\n")
        parts.append(HEADER)
        parts += [_row(s, comments) for s in rows]
        parts.append("")
    return "\n".join(parts).rstrip("\n") + "\n"


_INTRO = """\
# Configuration reference

<!-- Generated by `python -m docs.gen` (docs/gen/config_reference.py) from the config models
in src/hearth/config.py: do not edit by hand; `make docs` writes it again. -->

Every key `~/.hearth/config.toml` takes, by table, with its default and its type. "Environment"
names the variable that sets the key instead of the file (`HEARTH_<SECTION>_<KEY>`, and the short
`HEARTH_HOST` and `HEARTH_PORT`); a key that is a secret may instead be read from the variable
its `…_env` key names. How the settings fit together is in [Configuration](../configuration.md).
"""


def _row(setting: Setting, comments: dict[tuple[str, str], str]) -> str:
    """One key: its name, its default, then its type, what sets it from the environment and
    what the source says of it."""
    about = _one_line(comments.get((setting.owner.__name__, setting.key), ""))
    env = ", ".join(f"`{v}`" for v in setting.env)
    secret_env = setting.key + "_env"
    if not env and secret_env in setting.owner.model_fields:
        env = f"the one `{secret_env}` names"
    notes = [_type(setting.field) + "."]
    if env:
        notes.append(f"Environment: {env}.")
    if about:
        notes.append(about[0].upper() + about[1:] + ("" if about.endswith(".") else "."))
    cells = [f"`{setting.key}`", _default(setting.field), " ".join(notes)]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _one_line(text: str) -> str:
    """Source prose as one Markdown line: a table's name (`[apps]`) set as code, so that it
    reads as config.toml writes it and never as a link."""
    return TABLE_NAME.sub(r"`\1`", " ".join(text.split()))


def _type(field: FieldInfo) -> str:
    text = _annotation(field.annotation)
    bounds = []
    for item in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"),
                           ("min_length", "length ≥"), ("max_length", "length ≤")):
            value = getattr(item, attr, None)
            if value is not None:
                bounds.append(f"{sign} {value}")
        pattern = getattr(item, "pattern", None)
        if pattern is not None:
            bounds.append(f"matching `{pattern}`")
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _annotation(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        text = " or ".join(_annotation(a) for a in kept)
        return text + (" or unset" if len(kept) < len(args) else "")
    if origin is Literal:
        return "one of " + ", ".join(f"`{json.dumps(a)}`" for a in args)
    if origin in (list, dict):
        return f"{origin.__name__} of " + ", ".join(_annotation(a) for a in args)
    return getattr(annotation, "__name__", str(annotation))


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, str) and len(value) > LONG_DEFAULT:
        return f"`{json.dumps(value[:LONG_DEFAULT])[:-1]}…` ({len(value)} characters)"
    return f"`{json.dumps(value)}`"


# ------------------------------------------------------------------- reading it back

ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|")
TABLE = re.compile(r"^## `(.+)`\s*$")


def documented(text: str) -> set[tuple[str, str]]:
    """The (table, key) pairs a configuration reference lists."""
    found: set[tuple[str, str]] = set()
    table = None
    for line in text.splitlines():
        heading = TABLE.match(line)
        if heading:
            table = heading.group(1)
            continue
        row = ROW.match(line)
        if row and table is not None:
            found.add((table, row.group(1)))
    return found


def undocumented(text: str, root: type[BaseModel] = config_module.Config) -> list[str]:
    """The settings of the models that the reference does not list, as `table key`."""
    listed = documented(text)
    return [f"{s.table} {s.key}" for s in settings(root) if (s.table, s.key) not in listed]
