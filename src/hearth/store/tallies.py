"""Counts the gateway's metrics read when they are scraped (`engine/observe/figures.py`): the
queue of admitted runs by chat, the delivery ledger by state, the owed chores by kind. One
GROUP BY each, over an index; nothing of a chat is returned but how many runs wait in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, func, select

from hearth.store.schema import deliveries, owed_chores, runs


@dataclass(frozen=True)
class Tallies:
    """The counts of one scrape: queued runs per chat (the counts alone, deepest first),
    deliveries by state, owed chores by kind."""

    queues: tuple[int, ...]
    deliveries: dict[str, int]
    owed: dict[str, int]


def tallies(conn: Connection) -> Tallies:
    """The counts, read in one transaction."""
    return Tallies(queues=queued(conn), deliveries=_by(conn, deliveries.c.status),
                   owed=_by(conn, owed_chores.c.kind))


def queued(conn: Connection) -> tuple[int, ...]:
    """How many admitted runs wait in each chat that has one, the deepest first."""
    count = func.count().label("n")
    found = conn.execute(select(count).where(runs.c.status == "admitted")
                         .group_by(runs.c.session_key).order_by(count.desc()))
    return tuple(int(n) for (n,) in found)


def _by(conn: Connection, column: ColumnElement[Any]) -> dict[str, int]:
    found = conn.execute(select(column, func.count()).group_by(column))
    return {str(value): int(n) for value, n in found}
