"""store/replicas.py on both engines: the replicas' rows, a dead one's runs taken back once,
and a lease held by one replica at a time."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import Connection, update

from hearth.store import replicas, runs, sessions, transcript
from hearth.store.db import Database
from hearth.store.schema import replicas as replica_rows


def _running(conn: Connection, key: str, replica: str) -> str:
    """A chat `key` whose one run runs on `replica`, holding the chat's writer claim."""
    sessions.insert(conn, key=key, tab_id=f"tab-{key}", memory_mode="persistent",
                    chat_number=None)
    run_id = runs.new_run_id()
    runs.insert(conn, run_id=run_id, session_key=key, tab_id=f"tab-{key}", generation=0,
                principal="owner")
    assert sessions.claim_writer(conn, key, run_id)
    assert runs.mark_running(conn, run_id, replica)
    return run_id


def _age(conn: Connection, replica: str, seconds: float) -> None:
    """`replica`'s last renewal, `seconds` ago."""
    conn.execute(update(replica_rows).where(replica_rows.c.id == replica)
                 .values(beat_at=replica_rows.c.beat_at - seconds))


def test_a_dead_replicas_runs_are_taken_back_and_a_live_ones_are_not(db: Database) -> None:
    with db.write() as conn:
        replicas.join(conn, "alive", "host:/a", 1)
        replicas.join(conn, "dead", "host:/b", 2)
        kept = _running(conn, "chat-a", "alive")
        lost = _running(conn, "chat-b", "dead")
        _age(conn, "dead", 60)
    with db.write() as conn:
        taken = replicas.take_back(conn, "alive", lease=30, budget=3)
    assert taken.requeued == [(lost, "chat-b")] and not taken.past_budget
    with db.read() as conn:
        assert runs.get(conn, kept).status == "running"  # type: ignore[union-attr]
        back = runs.get(conn, lost)
        assert back is not None and back.status == "admitted" and back.recovery_attempts == 1
        assert sessions.get(conn, "chat-b").writer_run_id is None  # type: ignore[union-attr]
        assert sessions.get(conn, "chat-a").writer_run_id == kept  # type: ignore[union-attr]
        assert replicas.live(conn, 30) == ["alive"]
    with db.write() as conn:  # a second look finds nothing more to take
        again = replicas.take_back(conn, "alive", lease=30, budget=3)
    assert again.requeued == [] and again.past_budget == []


def test_a_run_past_its_budget_is_left_to_the_taker_to_end(db: Database) -> None:
    with db.write() as conn:
        replicas.join(conn, "me", "host:/a", 1)
        run_id = _running(conn, "chat-a", "gone-long-ago")  # a replica with no row at all
    with db.write() as conn:
        taken = replicas.take_back(conn, "me", lease=30, budget=0)
    assert taken.past_budget == [(run_id, "chat-a", 1)] and not taken.requeued
    with db.read() as conn:
        run = runs.get(conn, run_id)
        assert run is not None and run.status == "running"
    with db.write() as conn:  # named the taker's, it is not taken again
        assert replicas.take_back(conn, "me", lease=30, budget=0).past_budget == []


def test_two_takers_at_once_take_each_run_once(db: Database) -> None:
    with db.write() as conn:
        replicas.join(conn, "one", "host:/a", 1)
        replicas.join(conn, "two", "host:/b", 2)
        lost = [_running(conn, f"chat-{n}", "dead") for n in range(20)]
    counted: list[int] = []

    def take(me: str) -> None:
        with db.beside() as conn:
            counted.append(len(replicas.take_back(conn, me, lease=30, budget=3).requeued))

    takers = [threading.Thread(target=take, args=(me,)) for me in ("one", "two")]
    for taker in takers:
        taker.start()
    for taker in takers:
        taker.join()
    assert sum(counted) == len(lost)
    with db.read() as conn:
        assert {runs.get(conn, r).recovery_attempts for r in lost} == {1}  # type: ignore[union-attr]


def test_a_lease_is_held_by_one_replica_until_its_time_runs_out(db: Database) -> None:
    with db.write() as conn:
        assert replicas.hold(conn, "leader", "one", lease=30)
        assert not replicas.hold(conn, "leader", "two", lease=30)
        assert replicas.hold(conn, "leader", "one", lease=30)  # renewed
        assert replicas.holder(conn, "leader") == "one"
        assert replicas.hold(conn, "leader", "one", lease=-1)  # its time has run out
        assert replicas.holder(conn, "leader") is None
        assert replicas.hold(conn, "leader", "two", lease=30)
        assert replicas.holder(conn, "leader") == "two"


def test_a_beat_fails_once_the_row_is_gone_and_leaving_drops_the_leases(db: Database) -> None:
    with db.write() as conn:
        replicas.join(conn, "me", "host:/a", 1)
        assert replicas.beat(conn, "me")
        assert replicas.hold(conn, "leader", "me", lease=30)
        replicas.leave(conn, "me")
        assert not replicas.beat(conn, "me")
        assert replicas.holder(conn, "leader") is None
        replicas.join(conn, "old", "host:/a", 1)
        replicas.join(conn, "new", "host:/a", 2)
        assert replicas.forget_place(conn, "host:/a", keep="new") == ["old"]
        assert replicas.live(conn, 30) == ["new"]


def test_two_gateways_appending_to_one_chat_at_once_take_turns(db: Database) -> None:
    """Each reads the chat's last seq under a lock: the second waits for the first's commit
    and appends after it (unlocked, both read the same seq and the second fails)."""
    if db.dialect != "postgresql":
        pytest.skip("one gateway per SQLite database: its one writer orders every append")
    with db.write() as conn:
        sessions.insert(conn, key="c", tab_id="tab-c", memory_mode="persistent",
                        chat_number=None)
    first_in = threading.Event()
    seqs: list[int] = []
    failed: list[BaseException] = []

    def append(text: str, hold: float) -> None:
        try:
            with db.beside() as conn:
                seqs.append(transcript.append(conn, "c", "user", {"text": text}).seq)
                first_in.set()
                time.sleep(hold)  # the transaction stays open: the other must wait
        except Exception as error:  # noqa: BLE001 - reported below
            failed.append(error)

    first = threading.Thread(target=append, args=("one", 0.4))
    first.start()
    assert first_in.wait(10)
    second = threading.Thread(target=append, args=("two", 0))
    second.start()
    first.join()
    second.join()
    assert failed == [] and sorted(seqs) == [1, 2]
