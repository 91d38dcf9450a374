"""A QR code drawn in the terminal (`hearth token --link`), by segno: each character is two
modules, one above the other (half blocks), with the code's quiet zone around it.

The light modules are drawn, the dark ones left blank, each line in bright white on black
(ANSI colours), so the code reads the right way round on a light terminal and a dark one
alike; where the output is not a terminal the colours are dropped (typer's `echo` strips
them) and the blocks alone are the code as a dark terminal shows it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import segno

# (top module light, bottom module light) -> the character drawing them
BLOCKS = {(False, False): " ", (True, False): "\u2580", (False, True): "\u2584",
          (True, True): "\u2588"}
WHITE_ON_BLACK = "\x1b[97;40m"
RESET = "\x1b[0m"


def qr_lines(text: str) -> list[str]:
    """The QR code of `text`, as the lines to print (each coloured white on black)."""
    rows = segno.make(text, error="m").matrix_iter(scale=1, border=4)
    return [f"{WHITE_ON_BLACK}{line}{RESET}"
            for line in _halves([not dark for dark in row] for row in rows)]


def _halves(rows: Iterable[list[bool]]) -> Iterator[str]:
    """Each two rows of modules (light: True) as one line of half blocks."""
    pending = iter(rows)
    for top in pending:
        bottom = next(pending, [True] * len(top))  # an odd last row: light below it
        yield "".join(BLOCKS[pair] for pair in zip(top, bottom, strict=True))
