"""`python -m docs.gen`: write the generated parts of the documentation (the references under
docs/reference/, the module map in docs/architecture.md); with `--check`, write nothing and
exit 1 naming each part that is not what the code makes."""

from __future__ import annotations

import sys

from docs.gen.parts import stale, write_all


def main(argv: list[str]) -> int:
    if "--check" in argv:
        behind = stale()
        for name in behind:
            print(f"docs/{name} is stale: run `python -m docs.gen` (make docs)", file=sys.stderr)
        return 1 if behind else 0
    for name in write_all():
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
