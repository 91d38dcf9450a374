"""A sign-in link's one use, on each engine: of two gateways (two handles on one database)
taking the same link at the same moment, exactly one takes it and begins its sign-in; the
other is told it was used."""

from __future__ import annotations

import threading
import time

from hearth.engine.access import signin_links
from hearth.store.db import Database
from hearth.store.signins import LinkUse

ROUNDS = 12


def test_of_two_uses_at_once_exactly_one_takes_the_link(db: Database) -> None:
    handles = [Database(db.url) for _ in range(2)]  # as two gateways' own connections
    try:
        for round_ in range(ROUNDS):
            with db.write() as conn:
                code = signin_links.make(conn, time.time())
            outcomes = _race(handles, code, round_)
            assert sorted(outcomes) == ["taken", "used"], (round_, outcomes)
    finally:
        for handle in handles:
            handle.close()
    with db.read() as conn:
        signed_in = conn.exec_driver_sql("SELECT count(*) FROM signins").scalar()
    assert signed_in == ROUNDS  # one sign-in begun per link, never two


def _race(handles: list[Database], code: str, round_: int) -> list[LinkUse]:
    start = threading.Barrier(len(handles))
    outcomes: list[LinkUse] = []

    def use(index: int) -> None:
        start.wait()
        with handles[index].write() as conn:
            outcomes.append(signin_links.use(conn, code, f"signin-{round_}-{index}",
                                             time.time(), 3600))

    threads = [threading.Thread(target=use, args=(i,)) for i in range(len(handles))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return outcomes
