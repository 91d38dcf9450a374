"""`PATCH /api/sessions/{key}` for what a chat runs on (model, agent) and whether it is
archived, and `POST /api/sessions` checking its agent: a change applies to the next turn,
never to one already running; an unknown model or agent is refused with the known ones named;
an archived chat leaves the list and `?archived=true` lists it; a restricted chat may change
its trust, model and agent but is never archived (it is never listed)."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, module_gateway
from tests.support.http import error_of

HELPER_PROMPT = "You are the helper agent of this test."


def two_models_and_a_helper(server: ScriptedModelServer) -> str:
    """Beside "fake" (first in the chain, over the OpenAI protocol), "claude" over Anthropic's,
    and a second agent, "helper"."""
    return (f'[[models]]\nid = "claude"\nprovider = "anthropic"\n'
            f'base_url = "{server.anthropic_base_url}"\napi_key = "sk-ant-test"\n'
            f'model = "claude-test"\n\n[agents.helper]\nsystem_prompt = "{HELPER_PROMPT}"\n')


server, gateway, api = module_gateway("session-patch", two_models_and_a_helper)


def patch(api: Api, key: str, **body: Any) -> httpx.Response:
    return api.http.patch(f"/api/sessions/{key}", json=body)


def session(api: Api, key: str) -> dict[str, Any]:
    return dict(api.http.get(f"/api/sessions/{key}").json()["session"])


def listed(api: Api, **params: Any) -> list[str]:
    answer = api.http.get("/api/sessions", params={"limit": 200, **params})
    assert answer.status_code == 200, answer.text
    return [s["key"] for s in answer.json()["sessions"]]


def system_prompt(server: ScriptedModelServer, index: int) -> str:
    request = server.requests[index]
    if request.path == "/v1/messages":
        system = request.body["system"]
        return system if isinstance(system, str) else " ".join(b["text"] for b in system)
    return str(request.messages[0]["content"])


# ---------------------------------------------------------------- model


def test_a_model_changed_mid_turn_answers_the_next_turn_not_the_running_one(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    start = len(server.requests)
    held = threading.Event()
    server.push(Reply(tool_calls=[Call("list_dir", {"path": "."})], hold=held),
                Reply(text="listed"))
    first = api.send(key, "look")["run_id"]
    assert server.wait_for_requests(start + 1, timeout=10)
    changed = patch(api, key, model="claude")
    assert changed.status_code == 200 and changed.json()["model"] == "claude"
    held.set()
    assert api.wait(first)["model"] == "fake"  # the running turn keeps the model it began on
    assert [r.path for r in server.requests[start:]] == ["/v1/chat/completions"] * 2

    server.push(Reply(text="from claude"))
    second = api.wait(api.send(key, "again")["run_id"])
    assert second["status"] == "complete" and second["model"] == "claude"
    assert server.requests[-1].path == "/v1/messages"
    assert api.messages(key)[-1]["text"] == "from claude"

    back = patch(api, key, model=None)
    assert back.status_code == 200 and back.json()["model"] is None  # the chat chain again
    server.push(Reply(text="from the chain"))
    assert api.wait(api.send(key, "and again")["run_id"])["model"] == "fake"
    assert server.requests[-1].path == "/v1/chat/completions"


def test_an_unknown_model_is_refused_naming_the_known_ones(api: Api) -> None:
    key = api.new_chat()
    assert patch(api, key, model="claude").status_code == 200
    message = error_of(patch(api, key, model="gpt-9"), 422, "unknown_model")
    assert "gpt-9" in message and "fake" in message and "claude" in message
    error_of(patch(api, key, model="gpt-9", title="Renamed"), 422, "unknown_model")
    kept = session(api, key)
    assert kept["model"] == "claude" and kept["title"] != "Renamed"  # nothing changed
    for bad in ("", 5, ["fake"], "x" * 201):
        assert patch(api, key, model=bad).status_code == 422
    error_of(patch(api, "no-such-chat", model="fake"), 404, "session_not_found")


# ---------------------------------------------------------------- agent


def test_an_agent_change_gives_the_next_turn_that_agents_prompt(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    server.push(Reply(text="plain"))
    api.wait(api.send(key, "hello")["run_id"])
    assert HELPER_PROMPT not in system_prompt(server, -1)
    changed = patch(api, key, agent="helper")
    assert changed.status_code == 200 and changed.json()["agent"] == "helper"
    server.push(Reply(text="helped"))
    api.wait(api.send(key, "hello again")["run_id"])
    assert HELPER_PROMPT in system_prompt(server, -1)
    back = patch(api, key, agent=None)
    assert back.status_code == 200 and back.json()["agent"] == "default"


def test_an_unknown_agent_is_refused_on_patch_and_on_create(api: Api) -> None:
    key = api.new_chat()
    message = error_of(patch(api, key, agent="ghost"), 422, "unknown_agent")
    assert "ghost" in message and "default" in message and "helper" in message
    assert session(api, key)["agent"] == "default"
    before = listed(api)
    error_of(api.http.post("/api/sessions", json={"agent": "ghost"}), 422, "unknown_agent")
    error_of(api.http.post("/api/sessions", json={"model": "gpt-9"}), 422, "unknown_model")
    assert listed(api) == before  # no chat was made
    made = api.http.post("/api/sessions", json={"agent": "helper", "model": "claude"})
    assert made.status_code == 201, made.text
    assert made.json()["agent"] == "helper" and made.json()["model"] == "claude"


# ---------------------------------------------------------------- archived


def test_an_archived_chat_leaves_the_list_and_comes_back_when_restored(api: Api) -> None:
    kept, archived = api.new_chat(), api.new_chat()
    answer = patch(api, archived, archived=True)
    assert answer.status_code == 200 and answer.json()["archived"] is True
    assert kept in listed(api) and archived not in listed(api)
    only = listed(api, archived="true")
    assert archived in only and kept not in only
    assert archived not in listed(api, q=archived)  # nor found by search of the list
    assert session(api, archived)["archived"] is True  # still readable by its key
    restored = patch(api, archived, archived=False)
    assert restored.status_code == 200 and restored.json()["archived"] is False
    assert archived in listed(api) and archived not in listed(api, archived="true")


def test_bad_archived_values_are_refused(api: Api) -> None:
    key = api.new_chat()
    for bad in (None, "yes", 1):
        assert patch(api, key, archived=bad).status_code == 422
    assert api.http.get("/api/sessions", params={"archived": "banana"}).status_code == 422
    assert session(api, key)["archived"] is False


# ---------------------------------------------------------------- restricted chats


def test_a_restricted_chat_changes_trust_model_and_agent_but_is_never_archived(
        api: Api) -> None:
    for mode in ("incognito", "temporary"):
        key = api.new_chat(memory_mode=mode)
        changed = patch(api, key, trust="ask", model="claude", agent="helper")
        assert changed.status_code == 200, changed.text
        view = changed.json()
        assert (view["trust"], view["model"], view["agent"]) == ("ask", "claude", "helper")
        message = error_of(patch(api, key, archived=True), 403, "restricted_session")
        assert "archived" in message
        assert session(api, key)["archived"] is False
