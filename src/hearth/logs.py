"""How the gateway's logs read: Hearth's own facts from INFO up, a line each; every other
library's chatter (Alembic's migration steps, httpx's requests) only with `--verbose`."""

from __future__ import annotations

import logging

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def set_up_logging(verbose: bool) -> None:
    """Hearth's records from INFO up; every other library's from WARNING up, or from INFO up
    too when `verbose`."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format=LOG_FORMAT)
    logging.getLogger("hearth").setLevel(logging.INFO)
