"""The shell's screen: which command lines are worth trying read-only, and which command
lines a prefix-limited grant may cover.

The screen is never the guard. A command it calls a reader runs without asking only where it
provably cannot change anything: inside the sandbox, with the workspace read-only and no
network (`tools.sandbox`); there a reader that turns out to write (an option, a variable, an
expansion or a helper the screen did not know) fails instead of writing. Without the sandbox
the screen's answer is not used at all: every command is asked.

A line is worth trying read-only when every command in it (split at `|`, `&&`, `||`, `;`) is
a known reader with no known writing option and nothing redirects into a file or runs hidden
code (`$(...)`, backticks, `eval`, `source`): a command that would only fail read-only is
better asked.
"""

from __future__ import annotations

import re
import shlex

READERS = {
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "pwd", "echo",
    "printf", "stat", "file", "du", "df", "which", "type", "tree", "sort", "uniq", "cut",
    "date", "whoami", "uname", "printenv", "realpath", "basename", "dirname", "diff",
    "cmp", "md5sum", "sha1sum", "sha256sum", "less", "more", "nl", "tr", "jq", "true",
    "false", "test", "[", "id", "hostname", "ps", "find",
}
GIT_READERS = {"status", "log", "diff", "show", "blame", "shortlog", "describe", "rev-parse",
               "ls-files", "grep"}
# options that make a reader write a file or run a program
WRITING_OPTIONS = {
    "git": {"--output", "--ext-diff", "--textconv"},
    "rg": {"--pre", "--pre-glob"},
    "tree": {"-o"},
    "sort": {"-o", "--output"},
}
FIND_WRITERS = {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf",
                "-fls", "-fprint0"}

_SEPARATORS = re.compile(r"\|\||&&|[|;&\n]")
_HARMLESS_REDIRECTS = re.compile(r"[0-9&]?>\s*/dev/null(?![^\s;|&])|2>&1")
_HIDDEN = re.compile(r"\$\(|`|<\(|>\(")

def reads_only(command: str) -> bool:
    """True when every part of the line looks like a reader (worth trying read-only)."""
    command = _HARMLESS_REDIRECTS.sub(" ", command)
    if _HIDDEN.search(command) or ">" in command:
        return False
    parts = [p.strip() for p in _SEPARATORS.split(command) if p.strip()]
    return bool(parts) and all(_part_reads(p) for p in parts)


def _part_reads(part: str) -> bool:
    try:
        words = shlex.split(part)
    except ValueError:
        return False
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words = words[1:]  # VAR=value prefixes
    if not words:
        return True
    if "/" in words[0]:
        return False  # a program named by its path may be anything, e.g. ./ls in the workspace
    program, args = words[0], words[1:]
    writers = WRITING_OPTIONS.get(program, set())
    if any(a.split("=", 1)[0] in writers or (a[:2] in writers and len(a) > 2) for a in args):
        return False
    if program == "uniq":
        return len([a for a in args if not a.startswith("-")]) < 2  # uniq IN OUT writes OUT
    if program == "git":
        sub = next((a for a in args if not a.startswith("-")), "")
        return sub in GIT_READERS
    if program == "find":
        return not any(a in FIND_WRITERS for a in args)
    return program in READERS


# what a prefix-limited grant never covers beyond the prefix it names: another command, a
# redirection, an expansion that runs code, a line break
_BEYOND_ONE_COMMAND = re.compile(r"[;&|<>`$(){}\n\r\\]")


def one_command_beyond(prefix: str, command: str) -> bool:
    """Does `command` add only plain words to `prefix` (one simple command, no operator,
    redirection, substitution or line break beyond what the grant itself names)?"""
    if not command.startswith(prefix):
        return False
    return _BEYOND_ONE_COMMAND.search(command[len(prefix):]) is None
