"""Settings → an agent's files: each workspace file shown and saved whole from the page, read by
the agent's next turn (before the safety rules), an unreadable one said and replaceable, an
emptied one removed; files of an agent that does not exist and names that are not an agent's
files are refused with the envelope, never written. An agent's voice is kept with its prompt.
In-process (Starlette's TestClient) against the scripted model server over loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hearth.config import load_config
from hearth.engine.turn.agents import SAFETY_RULES
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import write_config
from tests.support.dashboard import INLINE_SCRIPT, dashboard, main_of, sign_in


@pytest.fixture
def client(home: Path, model_server: ScriptedModelServer) -> Iterator[TestClient]:
    write_config(home, model_server.openai_base_url,
                 '[agents.poet]\nsystem_prompt = "You write poems."\nmodel = "fake"\n')
    with dashboard(home, load_config(home / "config.toml")) as test_client:
        yield test_client


def _turn(client: TestClient, csrf: str, agent: str) -> None:
    headers = {"X-CSRF-Token": csrf}
    key = client.post("/api/sessions", json={"agent": agent}, headers=headers).json()["key"]
    sent = client.post(f"/api/sessions/{key}/messages", json={"text": "hi"}, headers=headers)
    client.get(f"/api/runs/{sent.json()['run_id']}/wait", params={"timeout": 20})


def test_a_file_saved_on_the_page_is_read_by_the_next_turn(
        client: TestClient, model_server: ScriptedModelServer, home: Path) -> None:
    csrf = sign_in(client)
    shown = client.get("/settings/agents/poet/files")
    assert shown.status_code == 200
    page = main_of(shown.text)
    assert [name for name in ("AGENTS.md", "SOUL.md", "MEMORY.md") if name in page] == [
        "AGENTS.md", "SOUL.md", "MEMORY.md"]
    assert not INLINE_SCRIPT.search(shown.text)
    saved = client.post("/settings/agents/poet/files/SOUL.md",
                        data={"csrf": csrf, "text": "You love <b>rhyme</b>, {{user_name}}."})
    assert saved.status_code == 303
    assert (home / "agents" / "poet" / "SOUL.md").read_text() == (
        "You love <b>rhyme</b>, {{user_name}}.")
    assert "You love &lt;b&gt;rhyme&lt;/b&gt;" in client.get(saved.headers["location"]).text
    model_server.push(Reply(text="ok"))
    _turn(client, csrf, "poet")
    system = model_server.requests[-1].system
    assert "## SOUL.md\n\nYou love <b>rhyme</b>, the owner." in system
    assert system.index("## SOUL.md") < system.index(SAFETY_RULES)
    emptied = client.post("/settings/agents/poet/files/SOUL.md", data={"csrf": csrf, "text": " "})
    assert emptied.status_code == 303 and not (home / "agents" / "poet" / "SOUL.md").exists()


def test_an_unreadable_file_is_said_and_can_be_replaced(client: TestClient, home: Path) -> None:
    csrf = sign_in(client)
    folder = home / "agents" / "default"
    folder.mkdir(parents=True)
    (folder / "USER.md").write_bytes(b"\xff\xfe")
    page = main_of(client.get("/settings/agents/default/files").text)
    assert "It cannot be read (it is not UTF-8 text)" in page
    client.post("/settings/agents/default/files/USER.md", data={"csrf": csrf, "text": "Ann."})
    assert (folder / "USER.md").read_text() == "Ann."


def test_what_is_not_an_agents_file_is_refused(client: TestClient, home: Path) -> None:
    csrf = sign_in(client)
    token = (home / "token").read_text()
    cases = [("/settings/agents/nobody/files", None, 404),
             ("/settings/agents/nobody/files/SOUL.md", "x", 404),
             ("/settings/agents/poet/files/..%2F..%2Ftoken", "x", 404),  # no such route
             ("/settings/agents/poet/files/notes.md", "x", 422),
             ("/settings/agents/poet/files/SOUL.md", "x" * 70_000, 413)]
    for path, text, status in cases:
        answer = (client.get(path) if text is None
                  else client.post(path, data={"csrf": csrf, "text": text}))
        assert answer.status_code == status, (path, answer.text[:200])
    assert not (home / "agents" / "nobody").exists()
    assert not list(home.glob("agents/**/*.md")) and (home / "token").read_text() == token


def test_an_agents_voice_is_kept_with_its_prompt_and_its_model_pin(
        client: TestClient, model_server: ScriptedModelServer) -> None:
    csrf = sign_in(client)
    saved = client.post("/settings/agents", data={
        "csrf": csrf, "name": "poet", "system_prompt": "You write poems.",
        "voice": "Warm and brief.", "profile": ""})
    assert saved.status_code == 303
    agent = client.app.state.engine.config.agents["poet"]  # type: ignore[attr-defined]
    assert agent.voice == "Warm and brief." and agent.model == "fake"
    model_server.push(Reply(text="ok"))
    _turn(client, csrf, "poet")
    system = model_server.requests[-1].system
    assert system.index("You write poems.") < system.index("Warm and brief.")
