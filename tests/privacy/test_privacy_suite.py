"""The adversarial privacy suite: a restricted chat leaves nothing behind, by any path.

For an Incognito, a Temporary and an unreadable chat, one turn calls every tool that could
leave a trace — the memory tools, write_file and edit_file into the memory folder, the shell
echoing into it (plainly, and disguised so only the sandbox can stop it), chat_search,
schedule_job — and asks for an always-allow grant, while the after-turn learning chore is
set up on a background model. Afterwards: no new or changed rows in the memory tables
(recall counts included), no byte changed in the memory documents, no call to any model but
the turn's (counted at the scripted model server), no grant, no job, no approval asked for a
refused call, no hit in the chat list, its search or another chat's chat_search, and no
audit row carrying the chat's words. The same script in a persistent chat is the positive
control: there every path does write. Each runs on both engines: SQLite, where the store's
locks are its authorizer, and PostgreSQL, where they are the roles of less privilege.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from hearth.tools.sandbox import bwrap_works
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support import postgres
from tests.support.fixtures import ENGINES

WORD = "zanzibarquux"  # the chat's secret: it must end up nowhere
SEEDED = "The owner's favourite colour is teal"
BACKGROUND = """
[[models]]
id = "bg"
provider = "openai"
base_url = "{url}"
api_key = "sk-test"
model = "bg-model"

[chains]
chat = ["fake"]
background = ["bg"]

[tools]
profile = "full"

[learning]
every_turns = 1
"""
LEARNED = '{"items": [{"kind": "fact", "text": "The owner keeps a word: zanzibarquux"}]}'
REFUSED_WORDS = {"incognito": "Incognito", "temporary": "Temporary",
                 "unreadable": "cannot be read"}


def _calls(seeded_id: int) -> list[Call]:
    calls = [
        Call("memory_remember", {"text": f"The owner's secret word is {WORD}"}),
        Call("memory_forget", {"id": seeded_id}),
        Call("memory_recall", {"query": "favourite colour"}),
        Call("memory_list", {}),
        Call("write_file", {"path": "memory/MEMORY.md", "content": f"# Memory\n{WORD}\n"}),
        Call("edit_file", {"path": "memory/preferences.md", "old_text": "# Preferences",
                           "new_text": f"# Preferences\n{WORD}"}),
        Call("shell", {"command": f"echo {WORD} >> memory/MEMORY.md"}),
        Call("chat_search", {"query": "teal"}),
        Call("schedule_job", {"prompt": f"Say {WORD} every hour.", "every_minutes": 60}),
        Call("write_file", {"path": "notes.txt", "content": "an ordinary change"}),
    ]
    if bwrap_works():  # disguised from the screen: only the sandbox can hold this one
        calls.append(Call("shell", {"command":
                                    f"d=$(printf 'mem%s' ory); echo {WORD} >> $d/projects.md"}))
    return calls


KEEPERS = ("memory_remember", "memory_forget", "schedule_job")  # refused to every restricted mode
READERS = ("memory_recall", "memory_list", "chat_search")  # refused where nothing is read


# ---------------------------------------------------------------- what a chat could leave


class Store:
    """The gateway's database, read as any other program would: its home's SQLite file, or
    the PostgreSQL database it was pointed at."""

    def __init__(self, home: Path, url: str | None) -> None:
        self.home = home
        self.url = url or f"sqlite:///{home / 'hearth.db'}"

    def rows(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        engine = create_engine(self.url)
        try:
            with engine.begin() as conn:
                return [tuple(row) for row in conn.execute(text(sql), params)]
        finally:
            engine.dispose()


def _memory_rows(store: Store) -> list[tuple[Any, ...]]:
    return store.rows("SELECT id, kind, text, filed_under, recall_count, last_recalled_at "
                      "FROM memory_items ORDER BY id")


def _documents(home: Path) -> dict[str, str]:
    folder = home / "workspace" / "memory"
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _count(store: Store, table: str) -> int:
    return int(store.rows(f"SELECT count(*) FROM {table}")[0][0])


def _audit_details(store: Store, key: str) -> list[str]:
    return [str(r[0]) for r in store.rows("SELECT detail FROM audit WHERE session_key = :k",
                                          k=key)]


def _approved_tools(store: Store, run_id: str) -> list[str]:
    return [r[0] for r in store.rows(
        "SELECT tool FROM approvals WHERE run_id = :r ORDER BY created_at", r=run_id)]


# ---------------------------------------------------------------- the owner at the desk


class Owner(threading.Thread):
    """Answers every approval as it comes: Always for the ordinary change (remembering the
    status that got), Allow once for everything else, until told to stop."""

    def __init__(self, api: Api) -> None:
        super().__init__(daemon=True)
        self.api = api
        self.always_status: int | None = None
        self.always_error: str | None = None
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for approval in self.api.http.get("/api/approvals").json()["approvals"]:
                self._answer(approval)
            time.sleep(0.1)

    def _answer(self, approval: dict[str, Any]) -> None:
        url = f"/api/approvals/{approval['id']}"
        if approval.get("target") == "notes.txt" and self.always_status is None:
            answer = self.api.http.post(url, json={"decision": "allow_always"})
            self.always_status = answer.status_code
            if answer.status_code != 200:
                self.always_error = answer.json()["error"]["code"]
            else:
                return
        self.api.http.post(url, json={"decision": "allow_once"})


# ---------------------------------------------------------------- one chat through it all


def _make_chat(api: Api, store: Store, mode: str) -> str:
    recorded = "persistent" if mode == "unreadable" else mode
    key = api.new_chat(memory_mode=recorded, trust="ask")
    if recorded == "persistent":  # titled, so its one background call is the learning chore
        titled = api.http.patch(f"/api/sessions/{key}", json={"title": "The control chat"})
        assert titled.status_code == 200, titled.text
    if mode == "unreadable":  # a mode this build does not know: nothing can say what it is
        store.rows("UPDATE sessions SET memory_mode = 'from-a-later-version' "
                   "WHERE key = :k RETURNING key", k=key)
    return key


def _run_script(gateway: Gateway, server: ScriptedModelServer, mode: str
                ) -> dict[str, Any]:
    api = gateway.client()
    home = gateway.home
    store = Store(home, gateway.extra_env.get("HEARTH_DATABASE_URL"))
    seeded = api.http.post("/api/memory", json={"text": SEEDED, "kind": "preference"})
    assert seeded.status_code == 201, seeded.text
    other = api.new_chat()  # an ordinary chat, to search from and to be found by
    key = _make_chat(api, store, mode)
    calls = _calls(int(seeded.json()["id"]))
    server.push(Reply(tool_calls=calls), Reply(text="All done."), model="fake-model")
    server.push_chore(Reply(text=LEARNED), model="bg-model", kind="learning")

    before = {"rows": _memory_rows(store), "docs": _documents(home),
              "grants": _count(store, "grants"), "jobs": _count(store, "jobs")}
    owner = Owner(api)
    owner.start()
    try:
        sent = api.send(key, f"Please remember {WORD} and tidy my memory.")
        run = api.wait(sent["run_id"], timeout=60)
    finally:
        owner.done.set()
        owner.join(5)
    assert run["status"] == "complete", run
    return {"api": api, "home": home, "store": store, "key": key, "other": other,
            "run_id": sent["run_id"], "before": before, "owner": owner,
            "messages": api.messages(key)}


def _results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["kind"] == "tool_result"]


def _search_from(api: Api, other: str, words: str) -> str:
    answer = api.http.post(f"/api/sessions/{other}/tools/chat_search",
                           json={"arguments": {"query": words}}, timeout=30)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["output"])


@pytest.fixture(params=ENGINES)
def privacy_gateway(request: pytest.FixtureRequest, gateway_factory: Callable[..., Gateway],
                    model_server: ScriptedModelServer) -> Gateway:
    """A gateway on each engine in turn: its home's SQLite file, then a database on the
    tests' PostgreSQL cluster (where the store's locks are the roles of less privilege)."""
    env = {}
    if request.param == "postgresql":
        why = postgres.unavailable()
        if why is not None:
            pytest.skip(why)
        database = postgres.database()
        database.close()
        env["HEARTH_DATABASE_URL"] = database.url
    return gateway_factory(BACKGROUND.format(url=model_server.openai_base_url), env=env)


@pytest.mark.parametrize("mode", ["incognito", "temporary", "unreadable"])
def test_a_restricted_chat_leaves_nothing_behind(
        mode: str, privacy_gateway: Gateway, model_server: ScriptedModelServer) -> None:
    done = _run_script(privacy_gateway, model_server, mode)
    home, key, api, store = done["home"], done["key"], done["api"], done["store"]
    time.sleep(1.5)  # time for an after-turn chore to run, were one (wrongly) started

    assert _memory_rows(store) == done["before"]["rows"]  # no new row, no recall count
    assert _documents(home) == done["before"]["docs"]  # not a byte changed
    assert {c.model for c in model_server.every_call()} == {"fake-model"}  # the turn's only
    assert _count(store, "grants") == done["before"]["grants"]
    assert _count(store, "jobs") == done["before"]["jobs"]
    assert done["owner"].always_status == 403
    assert done["owner"].always_error == "restricted_session"
    # every refused call was refused before anyone was asked: the approvals asked for are the
    # ordinary change and the disguised command the screen cannot read (the sandbox holds it)
    # (a temporary chat's file calls are asked about too: they go to its own private folder)
    asked = _approved_tools(store, done["run_id"])
    assert not set(asked) & {*KEEPERS, *READERS}
    disguised = ["shell"] if bwrap_works() else []
    if mode != "temporary":
        assert asked == ["write_file", *disguised]

    said = REFUSED_WORDS[mode]
    outputs = {name: [r["text"] for r in _results(done["messages"])
                      if r["content"]["name"] == name]
               for name in (*KEEPERS, *READERS, "write_file", "edit_file", "shell")}
    for name in KEEPERS + (READERS if mode != "incognito" else ()):
        assert outputs[name] and all(said in text for text in outputs[name]), (name, outputs)
    if mode == "incognito":  # reads allowed: recall found the seeded preference
        assert "teal" in outputs["memory_recall"][0]
    if mode != "temporary":  # a temporary chat works in a private folder with no memory in it
        assert said in outputs["write_file"][0] and said in outputs["edit_file"][0]
        assert said in outputs["shell"][0]
    assert WORD not in "".join(_audit_details(store, key))

    listed = api.http.get("/api/sessions").json()["sessions"]
    assert key not in [s["key"] for s in listed]
    searched = api.http.get("/api/sessions", params={"q": WORD}).json()["sessions"]
    assert key not in [s["key"] for s in searched]
    assert key not in _search_from(api, done["other"], WORD)


def test_the_same_paths_write_in_a_persistent_chat(
        privacy_gateway: Gateway, model_server: ScriptedModelServer) -> None:
    """The positive control: the suite would see a leak if the fence let one through."""
    done = _run_script(privacy_gateway, model_server, "persistent")
    home, key, api, store = done["home"], done["key"], done["api"], done["store"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not any(
            "learning:" in str(r) for r in _learned(store)):
        time.sleep(0.2)

    rows = _memory_rows(store)
    assert rows != done["before"]["rows"]
    texts = [r[2] for r in rows]
    assert f"The owner's secret word is {WORD}" in texts  # memory_remember
    assert SEEDED not in texts  # memory_forget
    assert _learned(store), "the after-turn chore wrote nothing"
    docs = _documents(home)
    assert docs["MEMORY.md"] != done["before"]["docs"]["MEMORY.md"]
    assert "bg-model" in {c.model for c in model_server.every_call()}
    assert _count(store, "grants") == done["before"]["grants"] + 1
    assert _count(store, "jobs") == done["before"]["jobs"] + 1
    assert done["owner"].always_status == 200
    assert key in [s["key"] for s in api.http.get("/api/sessions").json()["sessions"]]
    assert key in _search_from(api, done["other"], WORD)
    if bwrap_works():
        assert WORD in (home / "workspace" / "memory" / "projects.md").read_text()


def _learned(store: Store) -> list[tuple[Any, ...]]:
    return store.rows(
        "SELECT id, written_by FROM memory_items WHERE written_by LIKE 'learning:%'")
