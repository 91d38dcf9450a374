"""Backups of a big home: how long one takes and how large it is, and what a backup running
beside turns does to them.

The home holds `--chats` chats of `--messages` messages each (1,000 x 200 by default), built
as `bench/search.py` builds its store (one transaction of multi-row inserts through the
store's schema, the search index's triggers live; 5% of the chats Incognito or Temporary, so
the backup's scrub has rows to take out), plus a memory document and a saved prompt.

Timed, in this process as `hearth backup` runs it (`hearth.backup.making.make_backup`): a
backup (SQLite's online snapshot, the scrub and VACUUM, the archive gzipped and hashed) with
the database's and the archive's sizes; the snapshot alone (`store.backup.snapshot_sqlite`);
`--verify` of the archive; a restore into a new home.

Then turns: a real `hearth gateway` process on that home (its model the scripted fake server,
answering at once) and one chat sending `--turns` turns in a row (send, wait with the answer:
`/wait?message=true`), timed as a client sees them: without any backup; while `hearth backup`
runs in a process of its own, again and again; and while the gateway itself makes scheduled
backups (`[backup] every = "1s"`, so one follows another) on its thread. p50 / p95 of each,
and the ratios to the first (a backup should not double a turn's p50).

A benchmark, not a test: it prints figures and ratios and exits 0 whatever they are.

    .venv/bin/python bench/backup.py [--chats 1000] [--messages 200] [--turns 150]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "bench")]

import search as corpus  # noqa: E402  (bench/search.py: the same chats and words)
from turns import Chat, GatewayProcess  # noqa: E402

from hearth.backup import keys, rotation  # noqa: E402
from hearth.backup.making import make_backup  # noqa: E402
from hearth.backup.reading import verify  # noqa: E402
from hearth.backup.restoring import restore  # noqa: E402
from hearth.home import Home  # noqa: E402
from hearth.store.backup import snapshot_sqlite  # noqa: E402
from hearth.store.db import Database  # noqa: E402
from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import write_config  # noqa: E402

ANSWER = "Noted: the raised beds go on the south side."  # what bench/turns.py checks
TARGET_RATIO = 2.0  # a backup beside turns: their p50 less than doubled
SEED = 20261204


def build_home(home: Path, chats: int, messages: int) -> float:
    """The home with its store filled; seconds it took."""
    began = time.perf_counter()
    home.mkdir(parents=True)
    db = Database(f"sqlite:///{home / 'hearth.db'}")
    try:
        db.upgrade()
        rng = random.Random(SEED)
        corpus.build(db, chats, messages, corpus.make_words(rng, 4000), rng)
        db.truncate_wal()
    finally:
        db.close()
    (home / "workspace" / "memory").mkdir(parents=True)
    (home / "workspace" / "memory" / "notes.md").write_text("# Notes\nlikes tea\n" * 50)
    (home / "prompts").mkdir()
    (home / "prompts" / "summary.md").write_text("Summarize {{topic}} in five lines.\n")
    return time.perf_counter() - began


def mb(size: int) -> str:
    return f"{size / 1e6:7.1f} MB"


def timed_backup(home: Path, scratch: Path) -> Path:
    db_size = (home / "hearth.db").stat().st_size
    began = time.perf_counter()
    snapshot = snapshot_sqlite(home / "hearth.db", scratch / "snapshot.db")
    snap_s = time.perf_counter() - began
    print(f"  snapshot alone (online copy, scrub, VACUUM)  {snap_s:6.2f} s   "
          f"{mb(snapshot.path.stat().st_size)} ({snapshot.left_out} restricted chats left out)")
    snapshot.path.unlink()
    made = make_backup(Home(home), f"sqlite:///{home / 'hearth.db'}", scratch / "backups")
    print(f"  hearth backup (snapshot + archive)           {made.seconds:6.2f} s   archive "
          f"{mb(made.size)}, {made.size / db_size:.2f}x the database's {mb(db_size).strip()}")
    began = time.perf_counter()
    verify(made.path, keys.read(keys.key_path(home)))
    print(f"  hearth backup --verify                       {time.perf_counter() - began:6.2f} s")
    began = time.perf_counter()
    restore(made.path, scratch / "restored", None, keys.read(keys.key_path(home)))
    print(f"  hearth restore                               {time.perf_counter() - began:6.2f} s")
    shutil.rmtree(scratch / "restored")
    return made.path


def turn_times(url: str, turns: int, keep_going: Callable[[], bool] | None = None) -> list[float]:
    """`turns` turns in a row in one new chat (two trips each); seconds each took. With
    `keep_going`, only the turns taken while it says so are kept, until `turns` of them."""
    chat = Chat(url)
    times: list[float] = []
    try:
        while len(times) < turns:
            if keep_going is not None and not keep_going():
                time.sleep(0.01)
                continue
            took = chat.two_trips()
            if keep_going is None or keep_going():
                times.append(took)
    finally:
        chat.close()
    return times


def summary(name: str, times: list[float], base: float | None) -> float:
    ms = sorted(t * 1000 for t in times)
    p50 = statistics.median(ms)
    p95 = statistics.quantiles(ms, n=20)[18]
    ratio = "" if base is None else (f"   {p50 / base:.2f}x the p50 without; target < "
                                     f"{TARGET_RATIO:.0f}x: "
                                     f"{'met' if p50 / base < TARGET_RATIO else 'MISSED'}")
    print(f"  {name:<40} n={len(ms):<4} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms{ratio}")
    return p50


class BackupsBeside:
    """`hearth backup` in a process of its own, one after another, until stopped."""

    def __init__(self, home: Path, folder: Path) -> None:
        self.home, self.folder = home, folder
        self.running = threading.Event()
        self.stopping = threading.Event()
        self.made = 0
        self.thread = threading.Thread(target=self._loop)

    def _loop(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HEARTH_")}
        env["HEARTH_HOME"] = str(self.home)
        while not self.stopping.is_set():
            with subprocess.Popen([sys.executable, "-m", "hearth", "backup", "--to",
                                   str(self.folder)], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) as proc:
                time.sleep(1.0)  # its interpreter's start: not yet the backup itself
                self.running.set()
                proc.wait()
                self.running.clear()
                self.made += proc.returncode == 0
            rotation.rotate(self.folder, 1)

    def __enter__(self) -> BackupsBeside:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.thread.join()


def in_progress(folder: Path) -> bool:
    """Is a backup being made in `folder` now (its staging folder is there)?"""
    return any(name.startswith(".hearth-backup-") for name in os.listdir(folder))


def turns_beside_backups(home: Path, scratch: Path, turns: int, model: ScriptedModelServer
                         ) -> None:
    write_config(home, model.openai_base_url)
    gateway = GatewayProcess(home)
    try:
        gateway.wait_ready()
        turn_times(gateway.url, 20)  # warm: the model's client built, the caches filled
        base = summary("no backup", turn_times(gateway.url, turns), None)
        with BackupsBeside(home, scratch / "beside") as beside:
            during = turn_times(gateway.url, turns, beside.running.is_set)
        summary(f"`hearth backup` beside ({beside.made} made)", during, base)
    finally:
        gateway.stop()
    write_config(home, model.openai_base_url, '[backup]\nevery = "1s"\nkeep = 1\nto = "sched"\n')
    gateway = GatewayProcess(home)
    try:
        gateway.wait_ready()
        folder = home / "sched"
        began = time.monotonic()
        while not rotation.archives(folder) and time.monotonic() - began < 300:
            time.sleep(0.2)  # the first scheduled one is made: from now on one follows another
        during = turn_times(gateway.url, turns, lambda: in_progress(folder))
        made = sum(1 for line in (home / "gateway.log").read_text().splitlines()
                   if "backed up to" in line)
        summary(f"scheduled, in the gateway ({made} made)", during, base)
    finally:
        gateway.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--turns", type=int, default=150)
    args = parser.parse_args()
    print(f"Hearth bench: backups; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f} at start")
    scratch = Path(tempfile.mkdtemp(prefix="hearth-bench-backup-"))
    try:
        home = scratch / "home"
        took = build_home(home, args.chats, args.messages)
        print(f"\n{args.chats} chats x {args.messages} messages built in {took:.1f} s")
        timed_backup(home, scratch)
        print(f"\nTurns (one chat, send and wait with the answer), {args.turns} each:")
        with ScriptedModelServer() as model:
            model.default = Reply(text=ANSWER)
            turns_beside_backups(home, scratch, args.turns, model)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"  load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
