"""The gateway's migrations, run in a process of their own.

Alembic (and Mako, which it brings) costs the process that imports it about 12 MiB that it
never gives back. A long-running gateway should not carry that for a schema it brings up to
date once, so `hearth gateway` starts here: where the database is already at the newest
migration (every restart) nothing runs; where it is not (a new home, an upgrade), a child
process (`python -m hearth.store.upgrade`) applies the migrations and exits, and the gateway
opens a current store. The CLI's `hearth db upgrade` and the tests migrate in their own process
(`Database.upgrade`): they do not live long.

The URL goes to the child in its environment, not its arguments, so a password in it is not
shown to every user of the machine by `ps`.
"""

from __future__ import annotations

import os
import subprocess
import sys

from sqlalchemy import create_engine
from sqlalchemy.exc import OperationalError

from hearth.extras import require_for_url
from hearth.masking import mask
from hearth.store import migrate
from hearth.store.check import shown_url

URL_ENV = "HEARTH_UPGRADE_URL"
VERBOSE_ENV = "HEARTH_UPGRADE_VERBOSE"  # the gateway's --verbose: Alembic's steps logged


class MigrationFailed(RuntimeError):
    """The child that applied the migrations did not finish them, or the database could not
    be reached to ask what it needs."""


def upgrade_apart(url: str, verbose: bool = False) -> bool:
    """Bring the database at `url` to the newest migration in a child process, unless it is
    there already. True when the child ran. Raises MigrationFailed if it failed (its own error
    is on the gateway's standard error, which the child shares)."""
    require_for_url(url)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            if migrate.is_current(conn, migrate.head_revision()):
                return False
    except OperationalError as error:  # unreachable, refused, no such database
        raise MigrationFailed(f"the database at {shown_url(url)} cannot be reached: "
                              f"{_first_line(error)}") from None
    finally:
        engine.dispose()
    env = {**os.environ, URL_ENV: url, VERBOSE_ENV: "1" if verbose else ""}
    done = subprocess.run([sys.executable, "-m", "hearth.store.upgrade"], env=env,
                          stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        raise MigrationFailed(f"the database migrations failed (exit {done.returncode}); "
                              "`hearth db upgrade` shows why")
    return True


def _first_line(error: OperationalError) -> str:
    return mask(str(error.orig or error).strip().splitlines()[0])[:300]


def main() -> None:
    from hearth.logs import set_up_logging
    from hearth.store.db import Database

    set_up_logging(os.environ.get(VERBOSE_ENV) == "1")
    db = Database(os.environ[URL_ENV])
    try:
        db.upgrade()
    finally:
        db.close()


if __name__ == "__main__":
    main()
