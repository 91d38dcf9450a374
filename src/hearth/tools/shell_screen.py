"""The shell's screen: which command lines only read, and which are refused outright.

A command line only reads when every command in it (split at `|`, `&&`, `||`, `;`) is a known
reader with no writing option, and nothing writes a file (`>`, `>>`, `tee`) or runs hidden
code (`$(...)`, backticks, `eval`, `source`). Anything the screen cannot read counts as a
change. The denylist refuses a few commands whose damage no approval should make easy.
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

DENYLIST: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\brm\s+(-[a-zA-Z]*[rR][a-zA-Z]*\s+|--recursive\s+)(-\S+\s+)*"
                r"[\"']?(/|~|\$HOME|\$\{HOME\})/?\*?[\"']?(\s|;|&|\||$)"),
     "it would delete the whole file system or home folder"),
    (re.compile(r"\bmkfs(\.\w+)?\b"), "it formats a disk"),
    (re.compile(r"\bdd\b.*\bof=/dev/"), "it writes straight onto a device"),
    (re.compile(r">\s*/dev/(sd|nvme|hd|vd|xvd)"), "it writes straight onto a disk"),
    (re.compile(r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"), "it is a fork bomb"),
    (re.compile(r"\b(shutdown|reboot|halt|poweroff)\b"), "it shuts the machine down"),
    (re.compile(r"\bchmod\s+(-\S+\s+)*-R\s+\S+\s+/(\s|$)|\bchown\s+(-\S+\s+)*-R\s+\S+\s+/(\s|$)"),
     "it changes the ownership or permissions of the whole file system"),
    (re.compile(r"\bgit\s+push\b[^;&|]*\s(--force(-with-lease)?|-f)(?=\s|$|;|&|\|)"),
     "it force-pushes over a remote history"),
]


def refusal(command: str) -> str | None:
    """The sentence refusing a destructive command, or None."""
    for pattern, why in DENYLIST:
        if pattern.search(command):
            return f"Refused `{command.strip()[:80]}`: {why}. Run it yourself if you mean it."
    return None


def reads_only(command: str) -> bool:
    """True only when the screen can tell that every part of the line merely reads."""
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
