"""Backups of a serving gateway: made with `hearth backup` while ten chats send, restored with
`hearth restore` into a new home whose gateway serves every acknowledged message; never a
byte of an Incognito, Temporary or deleted chat (nor of their files); and on PostgreSQL, the
same round trip through pg_dump into a new, empty database."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from hearth.backup import rotation
from tests.fakes.model_server import ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.inprocess import InProcessGateway
from tests.support import postgres
from tests.support.backups import plain_bytes
from tests.support.cli import hearth
from tests.support.polling import until

SENDERS = 10
MOST = 60  # messages a sender sends, at most


def said_by_user(api: Api, key: str) -> list[str]:
    return [m["text"] for m in api.messages(key) if m["kind"] == "user"]


def backed_up(home: Path, folder: Path, env: dict[str, str] | None = None) -> Path:
    made = hearth("backup", "--to", str(folder), home=home, extra_env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    assert "Backed up to" in made.stdout
    found = rotation.archives(folder)
    assert len(found) == 1, found
    return found[0]


def restored(archive: Path, target: Path, key: Path, env: dict[str, str] | None = None
             ) -> Path:
    """`archive` restored into `target` as on another machine: no home of its own there, the
    backup key of the home that made it given with --key."""
    done = hearth("restore", str(archive), "--home", str(target), "--key", str(key),
                  home=target.parent / "none", extra_env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not (target / "token").exists()  # a secret: the restored gateway makes its own
    return target


class Senders:
    """Ten chats, each sent messages one after another until stopped; each acknowledgement
    kept with when it came."""

    def __init__(self, gateway: Gateway, keys: list[str]) -> None:
        self.gateway = gateway
        self.acked: dict[str, list[tuple[float, str]]] = {key: [] for key in keys}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._send, args=(key,)) for key in keys]

    def _send(self, key: str) -> None:
        api = self.gateway.client()
        for n in range(MOST):
            if self.stop.is_set():
                return
            text = f"{key} says {n}"
            api.send(key, text)
            self.acked[key].append((time.monotonic(), text))

    def __enter__(self) -> Senders:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)

    def acked_before(self, moment: float) -> dict[str, list[str]]:
        return {key: [text for at, text in sent if at < moment]
                for key, sent in self.acked.items()}

    def count_between(self, start: float, end: float) -> int:
        return sum(1 for sent in self.acked.values() for at, _ in sent if start < at < end)


def test_a_backup_made_while_ten_chats_send_restores_every_acknowledged_message(
        gateway_factory: Callable[..., Gateway], tmp_path: Path) -> None:
    gateway = gateway_factory()
    api = gateway.client()
    keys = [api.new_chat() for _ in range(SENDERS)]
    with Senders(gateway, keys) as senders:
        until(lambda: all(len(sent) >= 2 for sent in senders.acked.values()), 60)
        began = time.monotonic()
        archive = backed_up(gateway.home, tmp_path / "backups")
        ended = time.monotonic()
    assert senders.count_between(began, ended) > 0  # made while the chats were sending
    gateway.stop()
    home = restored(archive, tmp_path / "restored", gateway.home / "backup.key")
    second = InProcessGateway(home).start()
    try:
        again = second.client()
        listed = again.http.get("/api/sessions", params={"limit": 100}).json()["sessions"]
        assert sorted(chat["key"] for chat in listed) == sorted(keys)
        before = senders.acked_before(began)
        for key in keys:
            kept = said_by_user(again, key)
            everything = [text for _, text in senders.acked[key]]
            assert kept == everything[:len(kept)], key  # in order, nothing made up, no gap
            assert len(kept) >= len(before[key]), (key, kept, before[key])
    finally:
        second.kill()


def test_no_backup_holds_a_restricted_or_deleted_chat_nor_their_files(
        gateway: Gateway, tmp_path: Path) -> None:
    api = gateway.client()
    word = {name: f"{name}{uuid.uuid4().hex[:12]}" for name in
            ("kept", "temporary", "incognito", "deleted", "keptfile", "tempfile")}
    chats = {mode: api.new_chat(memory_mode=mode)
             for mode in ("persistent", "temporary", "incognito")}
    doomed = api.new_chat()
    for key, said in ((chats["persistent"], word["kept"]), (chats["temporary"],
                      word["temporary"]), (chats["incognito"], word["incognito"]),
                      (doomed, word["deleted"])):
        api.wait(api.send(key, f"remember the {said}")["run_id"])
    for key, said in ((chats["persistent"], word["keptfile"]),
                      (chats["temporary"], word["tempfile"])):
        held = api.http.post(f"/api/sessions/{key}/attachments", params={"name": "note.txt"},
                             content=f"a note about the {said}".encode())
        assert held.status_code in (200, 201), held.text
        sent = api.http.post(f"/api/sessions/{key}/messages",
                             json={"text": "read this", "attachments": [held.json()["id"]]})
        api.wait(sent.json()["run_id"])
    assert api.http.delete(f"/api/sessions/{doomed}").status_code == 200
    for key in (chats["temporary"], chats["incognito"]):  # still held by the gateway
        assert api.http.get(f"/api/sessions/{key}").status_code == 200
    data = plain_bytes(backed_up(gateway.home, tmp_path / "backups"))
    assert word["kept"].encode() in data and word["keptfile"].encode() in data
    for absent in ("temporary", "incognito", "deleted", "tempfile"):
        assert word[absent].encode() not in data, absent


@pytest.mark.postgres
def test_a_postgresql_gateway_round_trips_through_a_backup(
        model_server: ScriptedModelServer, gateway_factory: Callable[..., Gateway],
        tmp_path: Path) -> None:
    why = postgres.unavailable()
    if why is not None:
        pytest.skip(why)
    source = postgres.cluster().create(f"src_{uuid.uuid4().hex[:8]}")
    target = postgres.cluster().create(f"dst_{uuid.uuid4().hex[:8]}", template=None)
    gateway = gateway_factory(env={"HEARTH_DATABASE_URL": source})
    api = gateway.client()
    kept, temporary = api.new_chat(), api.new_chat(memory_mode="temporary")
    word = uuid.uuid4().hex
    api.wait(api.send(kept, f"kept {word}")["run_id"])
    api.wait(api.send(temporary, f"temporary {word}x")["run_id"])
    archive = backed_up(gateway.home, tmp_path / "backups", {"HEARTH_DATABASE_URL": source})
    assert f"{word}x".encode() not in plain_bytes(archive)
    gateway.stop()
    refused = hearth("restore", str(archive), "--home", str(tmp_path / "nowhere"),
                     "--key", str(gateway.home / "backup.key"), home=tmp_path / "none")
    assert refused.returncode == 1 and "HEARTH_DATABASE_URL" in refused.stderr
    assert not (tmp_path / "nowhere").exists()
    home = restored(archive, tmp_path / "restored", gateway.home / "backup.key",
                    {"HEARTH_DATABASE_URL": target})
    second = InProcessGateway(home, {"HEARTH_DATABASE_URL": target}).start()
    try:
        assert said_by_user(second.client(), kept) == [f"kept {word}"]
        assert second.client().http.get(f"/api/sessions/{temporary}").status_code == 404
    finally:
        second.kill()
