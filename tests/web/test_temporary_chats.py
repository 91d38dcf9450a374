"""A Temporary chat ends forgotten: it works in a folder of its own that goes with it, and it
is forgotten when the gateway stops, when a restart finds one a killed process left (before
anything is served or resumed), and when it has been idle past `temporary_idle_seconds`.
Persistent and Incognito chats are never forgotten that way."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pydantic
import pytest

from hearth.config import Config
from hearth.sessions import chats
from hearth.store import sessions as session_store
from tests.engine_harness import blocking, make_config, make_engine
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.polling import until
from tests.support.store import audit_rows, rows_of

WORDS = "remember the heron at dawn"


def write_and_answer(server: ScriptedModelServer, name: str, content: str) -> None:
    server.push(Reply(tool_calls=[Call("write_file", {"path": name, "content": content})]),
                Reply(text=f"Wrote {name}."))


def talk(api: Api, server: ScriptedModelServer, key: str, name: str) -> None:
    write_and_answer(server, name, key)
    assert api.wait(api.send(key, WORDS)["run_id"])["status"] == "complete"


def forgotten(api: Api, home: Path, key: str, run_id: str | None = None) -> None:
    """Nothing of the chat is left, and every request naming it answers 404."""
    assert set(rows_of(home, key).values()) == {0}
    assert not (home / "sessions" / key).exists()
    http = api.http
    for answer in (http.get(f"/api/sessions/{key}"),
                   http.post(f"/api/sessions/{key}/messages", json={"text": "hello?"}),
                   http.patch(f"/api/sessions/{key}", json={"title": "back?"}),
                   http.post(f"/api/sessions/{key}/stop"),
                   http.get(f"/api/sessions/{key}/events", params={"after": 0}),
                   http.get(f"/api/sessions/{key}/tools"),
                   http.delete(f"/api/sessions/{key}")):
        assert answer.status_code == 404, (answer.request.url, answer.text)
        assert answer.json()["error"]["code"] == "session_not_found"
    if run_id is not None:
        assert http.get(f"/api/runs/{run_id}").status_code == 404


def controls(api: Api, server: ScriptedModelServer) -> dict[str, str]:
    """A persistent and an incognito chat, each with an exchange: never forgotten."""
    made = {mode: api.new_chat(memory_mode=mode) for mode in ("persistent", "incognito")}
    for mode, key in made.items():
        server.push(Reply(text=f"A {mode} answer."))
        api.wait(api.send(key, f"a {mode} question")["run_id"])
    return made


def still_kept(api: Api, made: dict[str, str]) -> None:
    for mode, key in made.items():
        texts = [m["text"] for m in api.messages(key)]
        assert texts == [f"a {mode} question", f"A {mode} answer."], (mode, texts)


def test_a_temporary_chat_works_in_its_own_folder_and_delete_removes_it(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    temporary, kept = api.new_chat(memory_mode="temporary"), api.new_chat()
    own = gateway.home / "sessions" / temporary / "workspace"
    assert not own.exists()  # made when a turn first needs it
    talk(api, model_server, temporary, "scratch.txt")
    model_server.push(Reply(tool_calls=[Call("shell", {"command": "echo hi > shell.txt"})]),
                      Reply(text="Done."))
    api.wait(api.send(temporary, "and a command")["run_id"])
    talk(api, model_server, kept, "kept.txt")
    assert (own / "scratch.txt").read_text() == temporary
    assert (own / "shell.txt").read_text() == "hi\n"
    assert not (gateway.home / "workspace" / "scratch.txt").exists()
    assert (gateway.home / "workspace" / "kept.txt").read_text() == kept  # shared workspace
    assert not (gateway.home / "sessions" / kept).exists()

    answer = api.http.delete(f"/api/sessions/{temporary}")

    assert answer.status_code == 200 and answer.json()["removed"]["folder"] is True
    forgotten(api, gateway.home, temporary)
    assert (gateway.home / "workspace" / "kept.txt").exists()


def test_a_folder_the_owner_gave_is_never_removed(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    inside = gateway.home / "workspace" / "my-project"
    inside.mkdir(parents=True)
    refused = api.http.post("/api/sessions", json={"name": "my-project", "memory_mode":
                                                   "temporary", "workspace_dir": str(inside)})
    assert refused.status_code == 422  # the home is never a workspace (it would be removed)
    given = gateway.home.parent / "projects" / "my-project"
    given.mkdir(parents=True)
    (given / "precious.txt").write_text("mine")
    key = api.new_chat(name="my-project", memory_mode="temporary", workspace_dir=str(given))
    talk(api, model_server, key, "made-here.txt")
    assert (given / "made-here.txt").exists()
    answer = api.http.delete(f"/api/sessions/{key}")
    assert answer.status_code == 200 and answer.json()["removed"]["folder"] is False
    assert (given / "precious.txt").read_text() == "mine" and (given / "made-here.txt").exists()
    assert set(rows_of(gateway.home, key).values()) == {0}
    assert api.http.get(f"/api/sessions/{key}").status_code == 404


def test_a_graceful_stop_forgets_temporary_chats_and_keeps_the_others(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    made = controls(api, model_server)
    temporary = api.new_chat(memory_mode="temporary")
    talk(api, model_server, temporary, "gone.txt")
    run_id = api.http.get(f"/api/sessions/{temporary}").json()["messages"][0]["run_id"]
    assert (gateway.home / "sessions" / temporary / "workspace" / "gone.txt").exists()

    gateway.stop()  # SIGTERM

    assert set(rows_of(gateway.home, temporary).values()) == {0}  # gone before the restart
    assert not (gateway.home / "sessions" / temporary).exists()
    ended = [r for r in audit_rows(gateway.home) if r["session_key"] == temporary]
    assert [(r["detail"]["why"], r["detail"]["outcome"]) for r in ended] == [
        ("temporary_ended", "deleted")]
    assert ended[0]["actor"] == "gateway" and ended[0]["detail"]["removed"]["messages"] == 4
    for key in made.values():
        assert rows_of(gateway.home, key)["transcript_events"] == 2
    gateway.start()
    api = gateway.client()
    forgotten(api, gateway.home, temporary, run_id)
    still_kept(api, made)


@pytest.mark.process_gateway  # a kill -9, then a restart
def test_a_restart_after_a_kill_forgets_temporary_chats_before_serving(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    made = controls(api, model_server)
    temporary = api.new_chat(memory_mode="temporary")
    talk(api, model_server, temporary, "left.txt")
    model_server.push(Reply(text="never finished", hold=threading.Event()))
    asked = len(model_server.calls())
    running = api.send(temporary, "a long one")["run_id"]
    queued = api.send(temporary, "and one more")["run_id"]
    assert model_server.wait_for_requests(asked + 1, timeout=10)  # its turn is running

    gateway.kill()  # kill -9: nothing of the process's own ending ran

    assert rows_of(gateway.home, temporary)["sessions"] == 1  # the kill left it behind
    assert rows_of(gateway.home, temporary)["transcript_events"] == 6
    assert (gateway.home / "sessions" / temporary / "workspace" / "left.txt").exists()
    model_server.reset()
    gateway.start()
    api = gateway.client()
    forgotten(api, gateway.home, temporary)  # the first requests served already find nothing
    for run_id in (running, queued):
        assert api.http.get(f"/api/runs/{run_id}").status_code == 404
    time.sleep(0.5)
    assert model_server.calls() == []  # recovery resumed nothing of it
    ended = [r["detail"]["why"] for r in audit_rows(gateway.home)
             if r["session_key"] == temporary]
    assert ended == ["restart"]
    still_kept(api, made)


def test_an_idle_temporary_chat_is_forgotten_and_a_busy_one_is_not(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(config="[limits]\ntemporary_idle_seconds = 1.5\n")
    api = gateway.client()
    made = controls(api, model_server)
    idle = api.new_chat(memory_mode="temporary")
    talk(api, model_server, idle, "idle.txt")
    busy = api.new_chat(memory_mode="temporary")
    release = threading.Event()
    model_server.push(Reply(text="Finally done.", hold=release))
    busy_run = api.send(busy, "think for a while")["run_id"]
    begun = time.monotonic()

    until(lambda: api.http.get(f"/api/sessions/{idle}").status_code == 404, timeout=10)

    assert time.monotonic() - begun > 0.5  # not at once: only once idle
    forgotten(api, gateway.home, idle)
    assert [r["detail"]["why"] for r in audit_rows(gateway.home)] == ["idle"]
    time.sleep(2)  # well past the idle limit, but its turn is running
    assert api.http.get(f"/api/sessions/{busy}").json()["running"] is True
    release.set()
    assert api.wait(busy_run)["status"] == "complete"
    until(lambda: api.http.get(f"/api/sessions/{busy}").status_code == 404, timeout=10)
    still_kept(api, made)


def test_the_idle_limit_must_be_positive() -> None:
    assert Config.model_validate({}).limits.temporary_idle_seconds == 3600
    for bad in (0, -1):
        with pytest.raises(pydantic.ValidationError):
            Config.model_validate({"limits": {"temporary_idle_seconds": bad}})


def test_only_temporary_chats_end_forgotten_at_start_and_stop(tmp_path: Path) -> None:
    """Persistent and Incognito chats are kept; so is one whose mode this build cannot read
    (it keeps no memory, but a later version may know its mode: it is not destroyed)."""
    engine = make_engine(tmp_path, make_config(None))
    with engine.db.write() as conn:
        session_store.insert(conn, key="odd-mode", tab_id="t", memory_mode="someday-mode",
                             chat_number=None)
    def opened(mode: str) -> str:
        return blocking(lambda: chats.open_chat(engine.db, memory_mode=mode)).session.key

    kept = [opened(mode) for mode in ("persistent", "incognito")] + ["odd-mode"]
    temporary = [opened("temporary") for _ in range(2)]

    async def body() -> None:
        await engine.start()  # forgets the temporary chats a previous process left
        kept_rows = [await engine.db.reading(session_store.get, key) for key in temporary]
        assert kept_rows == [None] * len(temporary)
        made = (await chats.open_chat(engine.db, memory_mode="temporary")).session.key
        temporary.append(made)
        await engine.close()  # and the ones made since

    asyncio.run(body())
    with engine.db.read() as conn:
        assert all(session_store.get(conn, key) is None for key in temporary)
        assert all(session_store.get(conn, key) is not None for key in kept)
