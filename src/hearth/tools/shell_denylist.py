"""The shell's denylist: a few commands whose damage no approval should make easy.

Read from the parsed command line (bashlex), not from its spelling: quotes and backslashes
are gone from a word once parsed (`'r'\\m` is `rm`), a program named by its path is known by
its name (`/bin/rm`), wrappers that run the next word are looked through (`sudo`, `env`,
`nice`, `command`…), and every command is checked: in a pipeline, a list, a loop, a function
body or a `$(…)` substitution. A line bashlex cannot parse is read by its text instead, with
patterns that fail towards refusing.

This is a courtesy, not the guard: what a command may do unasked is decided by where it runs
(`tools.sandbox`), and a command that may change something is asked of the owner anyway.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WRAPPERS = {"sudo", "doas", "env", "nice", "nohup", "command", "exec", "time", "timeout",
            "ionice", "stdbuf", "busybox", "xargs", "setsid", "chroot", "builtin"}
# a wrapper's options that take the next word as their value
OPTION_VALUES = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-R"},
    "doas": {"-u", "-C"}, "env": {"-u", "-C", "-S"}, "nice": {"-n"},
    "ionice": {"-c", "-n", "-p"}, "timeout": {"-s", "-k"}, "stdbuf": {"-i", "-o", "-e"},
    "xargs": {"-I", "-n", "-P", "-L", "-d", "-a", "-E", "-s"},
}
_DURATION = re.compile(r"^[0-9.]+[smhd]?$")
ROOTS = {"/", "/*", "/.", "/..", "~", "~/", "~/*", "$HOME", "$HOME/", "$HOME/*", "${HOME}",
         "${HOME}/", "${HOME}/*", "/home", "/home/*", "/root", "/usr", "/etc", "/var", "/boot"}
DISK = re.compile(r"^/dev/(sd|nvme|hd|vd|xvd|mmcblk|disk|mapper/)")

WHOLE = "it would delete the whole file system or home folder"
FORMATS = "it formats a disk"
DEVICE = "it writes straight onto a device"
DISK_WRITE = "it writes straight onto a disk"
FORK_BOMB = "it is a fork bomb"
SHUTDOWN = "it shuts the machine down"
WHOLE_MODE = "it changes the ownership or permissions of the whole file system"
FORCE_PUSH = "it force-pushes over a remote history"


@dataclass(frozen=True)
class Simple:
    """One simple command as bash would run it: its program's name, its words, and the
    files its output is redirected to."""

    program: str
    args: tuple[str, ...]
    writes_to: tuple[str, ...]


def refusal(command: str) -> str | None:
    """The sentence refusing a destructive command, or None."""
    why = _why(command)
    if why is None:
        return None
    return f"Refused `{command.strip()[:80]}`: {why}. Run it yourself if you mean it."


def _why(command: str) -> str | None:
    if _FORK_TEXT.search(command):
        return FORK_BOMB
    import bashlex.errors  # imported when a command is first read: it costs ~0.1 s at start

    try:
        parsed = _simple_commands(command)
    except (bashlex.errors.ParsingError, NotImplementedError, IndexError, TypeError,
            AttributeError, ValueError, RecursionError):
        return _why_by_text(command)
    for simple in parsed:
        for rule in RULES:
            why = rule(simple)
            if why is not None:
                return why
    return None


def _simple_commands(command: str) -> list[Simple]:
    import bashlex

    found: list[Simple] = []

    class Visitor(bashlex.ast.nodevisitor):
        def visitcommand(self, node: Any, parts: list[Any]) -> None:
            words = [str(p.word) for p in parts if getattr(p, "kind", "") == "word"]
            targets = [str(p.output.word) for p in parts
                       if getattr(p, "kind", "") == "redirect"
                       and getattr(getattr(p, "output", None), "word", None) is not None]
            simple = _unwrapped(words, tuple(targets))
            if simple is not None:
                found.append(simple)

    for tree in bashlex.parse(command):
        Visitor().visit(tree)
    return found


def _unwrapped(words: list[str], targets: tuple[str, ...]) -> Simple | None:
    """The command that finally runs, looking through wrappers and their options."""
    while words:
        program = os.path.basename(words[0])
        if program not in WRAPPERS:
            return Simple(program, tuple(words[1:]), targets)
        words = _past_options(program, words[1:])
    return Simple("", (), targets) if targets else None


def _past_options(wrapper: str, words: list[str]) -> list[str]:
    """The words after a wrapper's own options (and their values) and assignments."""
    taking = OPTION_VALUES.get(wrapper, set())
    while words:
        word = words[0]
        if word in taking:
            words = words[2:]
        elif word.startswith("-") or "=" in word or _DURATION.match(word):
            words = words[1:]
        elif wrapper == "chroot":
            return words[1:]  # chroot DIR COMMAND
        else:
            break
    return words


def _flags(args: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """Short option letters and long option names (abbreviations stay as typed)."""
    short: set[str] = set()
    long: set[str] = set()
    for arg in args:
        if arg.startswith("--") and len(arg) > 2:
            long.add(arg[2:].split("=", 1)[0])
        elif arg.startswith("-") and len(arg) > 1:
            short.update(arg[1:])
    return short, long


def _long(long: set[str], name: str, shortest: int = 3) -> bool:
    """Is `--name` among the options, whole or abbreviated to at least `shortest` letters?"""
    return any(len(opt) >= shortest and name.startswith(opt) for opt in long)


def _root_target(arg: str) -> bool:
    cleaned = re.sub(r"/{2,}", "/", arg.strip("\"'"))
    if cleaned in ROOTS:
        return True
    stripped = cleaned.rstrip("/") or "/"
    return stripped in ROOTS or os.path.normpath(cleaned) == "/"


def _rm(c: Simple) -> str | None:
    if c.program != "rm":
        return None
    short, long = _flags(c.args)
    recursive = bool(short & {"r", "R"}) or _long(long, "recursive")
    targets = [a for a in c.args if not a.startswith("-")]
    return WHOLE if recursive and any(_root_target(t) for t in targets) else None


def _mkfs(c: Simple) -> str | None:
    formats = c.program.startswith("mkfs") or c.program in {"mke2fs", "mkswap", "wipefs"}
    return FORMATS if formats else None


def _dd(c: Simple) -> str | None:
    if c.program != "dd":
        return None
    return DEVICE if any(a.startswith("of=/dev/") and a != "of=/dev/null" for a in c.args) \
        else None


def _disk_redirect(c: Simple) -> str | None:
    return DISK_WRITE if any(DISK.match(t) for t in c.writes_to) else None


def _shutdown(c: Simple) -> str | None:
    if c.program in {"shutdown", "reboot", "halt", "poweroff"}:
        return SHUTDOWN
    if c.program == "systemctl" and {"poweroff", "reboot", "halt", "kexec"} & set(c.args):
        return SHUTDOWN
    if c.program in {"init", "telinit"} and {"0", "6"} & set(c.args):
        return SHUTDOWN
    return None


def _whole_mode(c: Simple) -> str | None:
    if c.program not in {"chmod", "chown", "chgrp"}:
        return None
    short, long = _flags(c.args)
    recursive = "R" in short or _long(long, "recursive")
    targets = [a for a in c.args if not a.startswith("-")][1:]
    return WHOLE_MODE if recursive and any(_root_target(t) for t in targets) else None


def _force_push(c: Simple) -> str | None:
    if c.program != "git":
        return None
    words = [a for a in c.args if not a.startswith("-")]
    if "push" not in words[:3]:  # `git -C dir push`
        return None
    short, long = _flags(c.args)
    forced = "f" in short or _long(long, "force") or _long(long, "force-with-lease", 7) \
        or any(w.startswith("+") for w in words[1:])
    return FORCE_PUSH if forced else None


RULES: tuple[Callable[[Simple], str | None], ...] = (
    _rm, _mkfs, _dd, _disk_redirect, _shutdown, _whole_mode, _force_push)

_FORK_TEXT = re.compile(r"(\S+)\s*\(\)\s*\{\s*\1\s*\|\s*\1\s*&\s*\}")
_TEXT_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\brm\b.*\s-[a-zA-Z]*[rR]|\brm\b.*--rec"), WHOLE),
    (re.compile(r"\bmkfs"), FORMATS),
    (re.compile(r"\bdd\b.*\bof=/dev/"), DEVICE),
    (re.compile(r">\s*/dev/(sd|nvme|hd|vd|xvd)"), DISK_WRITE),
    (re.compile(r"\b(shutdown|reboot|halt|poweroff)\b"), SHUTDOWN),
    (re.compile(r"\bgit\b.*\bpush\b.*(\s-f|--force|\s\+)"), FORCE_PUSH),
]


def _why_by_text(command: str) -> str | None:
    """For a line the parser cannot read: refuse on the shape of a denylisted command."""
    for pattern, why in _TEXT_RULES:
        if pattern.search(command):
            return why
    return None
