"""`python -m tests.support.without MODULE[,MODULE…] -- ARGS…`: the `hearth` command run with
those packages not installed, as on a machine where an extra was never installed: each
import of one (and `importlib.util.find_spec`) fails as Python fails for a missing package.
The tests of an integration set up without its extra run the gateway this way; the real thing,
a virtualenv with the core alone, is tests/test_core_install.py's."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class NotInstalled(importlib.abc.MetaPathFinder):
    """Finds nothing of the hidden packages, before any other finder looks."""

    def __init__(self, hidden: set[str]) -> None:
        self.hidden = hidden

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if any(fullname == name or fullname.startswith(name + ".") for name in self.hidden):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def main() -> None:
    hidden, separator, *args = sys.argv[1:]
    assert separator == "--", "usage: without MODULE[,MODULE…] -- ARGS…"
    sys.meta_path.insert(0, NotInstalled(set(hidden.split(","))))
    sys.argv = ["hearth", *args]
    from hearth.cli import main as hearth

    hearth()


if __name__ == "__main__":
    main()
