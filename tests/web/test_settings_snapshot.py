"""A turn runs from one settings snapshot: a change on the Settings page applies to the next
turn, never to one already running (DESIGN invariant 3: work runs from a snapshot)."""

from __future__ import annotations

import threading
from pathlib import Path

from fastapi.testclient import TestClient

from hearth.config import load_config
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import write_config
from tests.support.dashboard import bearer, dashboard, sign_in


def offered(model_server: ScriptedModelServer, index: int) -> set[str]:
    tools = model_server.requests[index].body.get("tools", [])
    return {tool["function"]["name"] for tool in tools}


def save_agent(client: TestClient, csrf: str, profile: str) -> None:
    answer = client.post("/settings/agents", data={"csrf": csrf, "name": "helper",
                                                   "system_prompt": "", "profile": profile})
    assert answer.status_code == 303, answer.text


def test_an_agent_edited_mid_turn_changes_the_next_turn_not_the_running_one(
        tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """Before: the page changed the shared Config in place, so the running turn's second model
    call already offered the new profile's tools (write_file, shell…)."""
    home = tmp_path / "home"
    write_config(home, model_server.openai_base_url)
    held = threading.Event()
    model_server.push(Reply(tool_calls=[Call("list_dir", {"path": "."})], hold=held),
                      Reply(text="listed"), Reply(text="second"))
    with dashboard(home, load_config(home / "config.toml")) as client:
        csrf = sign_in(client)
        save_agent(client, csrf, "minimal")
        key = client.post("/api/sessions", json={"agent": "helper", "trust": "trusted"},
                          headers=bearer(client)).json()["key"]
        first = client.post(f"/api/sessions/{key}/messages", json={"text": "look"},
                            headers=bearer(client)).json()["run_id"]
        assert model_server.wait_for_requests(1, timeout=10)
        save_agent(client, csrf, "coding")  # while the turn waits on the model
        held.set()
        ended = client.get(f"/api/runs/{first}/wait", params={"timeout": 15},
                           headers=bearer(client)).json()
        assert ended["status"] == "complete", ended
        second = client.post(f"/api/sessions/{key}/messages", json={"text": "again"},
                             headers=bearer(client)).json()["run_id"]
        client.get(f"/api/runs/{second}/wait", params={"timeout": 15}, headers=bearer(client))
    assert "write_file" not in offered(model_server, 0)
    assert offered(model_server, 1) == offered(model_server, 0)  # the running turn's own
    assert {"write_file", "shell"} <= offered(model_server, 2)  # the next turn's
