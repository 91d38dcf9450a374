"""Matrix against a real Synapse (PyPI `matrix-synapse`, in a virtualenv of its own:
`.venv/synapse`, which `.ci/run` makes, or the Python `HEARTH_SYNAPSE_PYTHON` names; without
one these tests skip, saying so). Synapse sends no room summary to a client that does not
lazy-load members, so who can read a room is what Hearth follows itself; and it takes
encryption state and plaintext messages alike, so nothing but Hearth keeps an encrypted room
free of plaintext answers."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.polling import until
from tests.support.telegram import chats, running

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SECRET = "hearth-test-registration"
SERVER = "example.org"


def _synapse_python() -> str | None:
    """A Python that imports synapse, or None."""
    named = os.environ.get("HEARTH_SYNAPSE_PYTHON") or str(REPO / ".venv/synapse/bin/python")
    if not Path(named).exists():
        return None
    found = subprocess.run([named, "-c", "import synapse"], capture_output=True, timeout=60)
    return named if found.returncode == 0 else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _config(home: Path, port: int) -> dict[str, Any]:
    lots = {"per_second": 1000, "burst_count": 1000}
    return {
        "server_name": SERVER, "pid_file": str(home / "synapse.pid"),
        "listeners": [{"port": port, "bind_addresses": ["127.0.0.1"], "type": "http",
                       "tls": False, "x_forwarded": False,
                       "resources": [{"names": ["client"], "compress": False}]}],
        "database": {"name": "sqlite3", "args": {"database": str(home / "synapse.db")}},
        "media_store_path": str(home / "media"), "signing_key_path": str(home / "signing.key"),
        "registration_shared_secret": SECRET, "macaroon_secret_key": "m" * 32,
        "form_secret": "f" * 32, "report_stats": False, "trusted_key_servers": [],
        "suppress_key_server_warning": True, "presence": {"enabled": False},
        "rc_message": lots, "rc_registration": lots,
        "rc_login": {"address": lots, "account": lots, "failed_attempts": lots},
        "rc_joins": {"local": lots, "remote": lots},
        "rc_invites": {"per_room": lots, "per_user": lots, "per_issuer": lots}}


@dataclass
class Synapse:
    url: str

    def register(self, name: str) -> User:
        """A user made with the shared secret (Synapse's admin registration)."""
        nonce = httpx.get(f"{self.url}/_synapse/admin/v1/register").json()["nonce"]
        password = f"pw-{name}"
        mac = hmac.new(SECRET.encode(), b"\0".join(
            [nonce.encode(), name.encode(), password.encode(), b"notadmin"]), hashlib.sha1)
        made = httpx.post(f"{self.url}/_synapse/admin/v1/register", json={
            "nonce": nonce, "username": name, "password": password, "admin": False,
            "mac": mac.hexdigest()})
        assert made.status_code == 200, made.text
        return User(self.url, made.json()["user_id"], made.json()["access_token"])


@dataclass
class User:
    url: str
    user_id: str
    token: str

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = httpx.request(method, f"{self.url}/_matrix/client/v3{path}", json=body,
                               headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def new_room(self, *invited: str) -> str:
        made = self.call("POST", "/createRoom", {"preset": "private_chat",
                                                  "invite": list(invited)})
        return str(made["room_id"])

    def say(self, room: str, body: str, **content: Any) -> str:
        txn = f"t{time.monotonic_ns()}"
        said = self.call("PUT", f"/rooms/{quote(room)}/send/m.room.message/{txn}",
                         {"msgtype": "m.text", "body": body, **content})
        return str(said["event_id"])

    def invite(self, room: str, user: str) -> None:
        self.call("POST", f"/rooms/{quote(room)}/invite", {"user_id": user})

    def encrypt(self, room: str) -> None:
        self.call("PUT", f"/rooms/{quote(room)}/state/m.room.encryption/",
                  {"algorithm": "m.megolm.v1.aes-sha2"})

    def members(self, room: str) -> set[str]:
        said = self.call("GET", f"/rooms/{quote(room)}/joined_members")
        return set(said["joined"])

    def said_by(self, room: str, sender: str) -> list[str]:
        """The bodies of `sender`'s messages in `room`, oldest first."""
        said = self.call("GET", f"/rooms/{quote(room)}/messages?dir=b&limit=100")
        return [str(e["content"].get("body")) for e in reversed(said["chunk"])
                if e["type"] == "m.room.message" and e["sender"] == sender]


@pytest.fixture(scope="module")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    python = _synapse_python()
    if python is None:
        pytest.skip("no Synapse: `python -m venv .venv/synapse && .venv/synapse/bin/pip "
                    "install matrix-synapse` (or set HEARTH_SYNAPSE_PYTHON)")
    home = tmp_path_factory.mktemp("synapse")
    port = _free_port()
    config = home / "homeserver.yaml"  # JSON is YAML
    config.write_text(json.dumps(_config(home, port)))
    app = [python, "-m", "synapse.app.homeserver", "-c", str(config)]
    subprocess.run([*app, "--generate-keys"], check=True, capture_output=True, timeout=120)
    with (home / "synapse.log").open("wb") as log:
        process = subprocess.Popen(app, stdout=log, stderr=subprocess.STDOUT, cwd=home)
    url = f"http://127.0.0.1:{port}"
    try:
        until(lambda: process.poll() is not None or _answers(url), timeout=120,
              what="Synapse serving")
        if process.poll() is not None:
            sys.stderr.write((home / "synapse.log").read_text()[-4000:])
            pytest.fail("Synapse did not start (its log is above)")
        yield Synapse(url)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/_matrix/client/versions", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _gateway(factory: Callable[..., Gateway], synapse: Synapse, bot: User,
             owner: User) -> Gateway:
    gateway = factory(config=(
        f'[channels.matrix]\nhomeserver = "{synapse.url}"\nuser_id = "{bot.user_id}"\n'
        f'access_token = "{bot.token}"\nowner_ids = ["{owner.user_id}"]\n'
        f'poll_timeout_seconds = 1\n'))
    running(gateway.client(), "matrix", timeout=30)
    time.sleep(1.5)  # the first sync is the present: what comes after it is read
    return gateway


def _joined(user: User, room: str, bot: User) -> None:
    until(lambda: bot.user_id in user.members(room), timeout=20, what="the bot joined")


def test_synapse_a_room_someone_is_invited_to_is_a_group_room_and_never_the_owners(
        synapse: Synapse, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    tag = str(time.monotonic_ns())[-6:]
    bot, ann, bob, cy = (synapse.register(f"{n}{tag}") for n in ("hearth", "ann", "bob", "cy"))
    model_server.default = Reply(text="Noted.")
    gateway = _gateway(gateway_factory, synapse, bot, ann)
    guests = bob.new_room(bot.user_id)
    owners = ann.new_room(bot.user_id)
    _joined(bob, guests, bot)
    _joined(ann, owners, bot)
    bob.say(guests, "hello")
    until(lambda: bob.said_by(guests, bot.user_id) == ["Noted."], timeout=30,
          what="the guest answered in their direct room")
    ann.say(owners, "hello")
    until(lambda: ann.said_by(owners, bot.user_id) == ["Noted."], timeout=30,
          what="the owner answered")
    api = gateway.client()
    until(lambda: api.http.put(f"/api/sessions/{api.new_chat()}/link",
                               json={"channel": "matrix"}).status_code == 200,
          what="Continue on Matrix while the owner's room is theirs alone")
    bob.invite(guests, cy.user_id)
    ann.invite(owners, cy.user_id)
    time.sleep(2.5)  # synced
    bob.say(guests, "anyone there?")
    refused = api.http.put(f"/api/sessions/{api.new_chat()}/link", json={"channel": "matrix"})
    assert refused.status_code == 409, refused.text
    bob.say(guests, f"{bot.user_id} still here?", **{"m.mentions": {"user_ids": [bot.user_id]}})
    until(lambda: len(bob.said_by(guests, bot.user_id)) >= 2, timeout=30,
          what="the addressed message answered")
    time.sleep(1.5)
    assert bob.said_by(guests, bot.user_id) == ["Noted.", "Noted."]
    said = [str(m["content"]) for r in model_server.requests for m in r.messages
            if m["role"] == "user"]
    assert not any("anyone there" in text for text in said)


def test_synapse_an_encrypted_room_is_sent_no_plaintext_answer(
        synapse: Synapse, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    tag = str(time.monotonic_ns())[-6:]
    bot, ann = (synapse.register(f"{n}{tag}") for n in ("hearth", "ann"))
    model_server.push(Reply(text="First answer."), Reply(text="A private answer."),
                      Reply(text="Another private answer."))
    gateway = _gateway(gateway_factory, synapse, bot, ann)
    room = ann.new_room(bot.user_id)
    _joined(ann, room, bot)
    ann.say(room, "hello")
    until(lambda: ann.said_by(room, bot.user_id) == ["First answer."], timeout=30,
          what="answered while unencrypted")
    ann.encrypt(room)
    ann.say(room, "a plaintext message in a room now encrypted")
    api = gateway.client()
    [chat] = chats(api)
    api.wait(api.send(chat["key"], "a word from the dashboard")["run_id"])
    until(lambda: api.http.get("/api/desk").json()["deliveries"], timeout=30,
          what="the answer's delivery failed")
    time.sleep(1.5)
    answers = ann.said_by(room, bot.user_id)
    assert not any("private answer" in text for text in answers), answers
    assert answers[0] == "First answer." and all("end-to-end encrypted" in text
                                                 for text in answers[1:]), answers
    [failed] = api.http.get("/api/desk").json()["deliveries"]
    assert "end-to-end encrypted" in failed["why"]
