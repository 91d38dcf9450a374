"""`GET /api/approvals`: what waits on the owner across every chat, each with enough for a
dashboard list — the chat's key and title, the tool, target, effect, a `preview` of the call
(a write's path and content, an edit's diff, a command) and `always_allowed` (False where an
"Always" would be refused) — and never a 500, whatever arguments the model sent."""

from __future__ import annotations

from typing import Any

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, module_gateway
from tests.support.approvals import pending_in

server, gateway, api = module_gateway("approvals-api")


def asked(api: Api, server: ScriptedModelServer, call: Call, **chat: str) -> tuple[str, str,
                                                                                dict[str, Any]]:
    """A chat (asking before changes) whose call waits: its key, the run and the approval."""
    key = api.new_chat(trust="ask", **chat)
    server.push(Reply(tool_calls=[call]), Reply(text="ok"))
    run_id = api.send(key, "Please do the thing for me now")["run_id"]
    return key, run_id, pending_in(api, key)


def deny(api: Api, approval: dict[str, Any], run_id: str) -> None:
    answer = api.http.post(f"/api/approvals/{approval['id']}", json={"decision": "deny"})
    assert answer.status_code == 200, answer.text
    api.wait(run_id)


def test_a_write_shows_its_path_and_content_cut_with_a_note(
        api: Api, server: ScriptedModelServer) -> None:
    content = "line\n" * 1000  # 5,000 characters
    key, run_id, approval = asked(api, server,
                                  Call("write_file", {"path": "notes/big.md", "content": content}))
    assert (approval["tool"], approval["target"], approval["effect"]) == (
        "write_file", "notes/big.md", "changes")
    assert approval["title"] == "Please do the thing for me now"  # untitled: its first words
    assert isinstance(approval["created_at"], float)
    assert approval["always_allowed"] is True
    preview = approval["preview"]
    assert preview["kind"] == "write" and preview["path"] == "notes/big.md"
    assert preview["content"] == content[:4000] and preview["truncated"] is True
    assert "4,000 of 5,000" in preview["note"]
    api.http.patch(f"/api/sessions/{key}", json={"title": "Big notes"})
    assert pending_in(api, key)["title"] == "Big notes"
    deny(api, approval, run_id)


def test_an_edit_shows_a_diff_and_a_command_shows_itself(
        api: Api, server: ScriptedModelServer) -> None:
    edit = Call("edit_file", {"path": "app.py", "old_text": "a = 1\nb = 2\n",
                              "new_text": "a = 1\nb = 3\n"})
    _key, run_id, approval = asked(api, server, edit)
    preview = approval["preview"]
    assert preview["kind"] == "edit" and preview["path"] == "app.py"
    assert "-b = 2\n+b = 3\n" in preview["diff"] and preview["diff"].startswith("--- a/app.py")
    assert (preview["old"], preview["new"]) == ("a = 1\nb = 2\n", "a = 1\nb = 3\n")
    deny(api, approval, run_id)

    _key, run_id, approval = asked(api, server, Call("shell", {"command": "rm -rf build"}))
    assert approval["preview"]["kind"] == "command"
    assert approval["preview"]["command"] == "rm -rf build"
    deny(api, approval, run_id)


def test_always_is_not_offered_where_it_would_be_refused(
        api: Api, server: ScriptedModelServer) -> None:
    key, run_id, approval = asked(api, server, Call("write_file", {"path": "a", "content": "b"}),
                                  memory_mode="incognito")
    assert approval["always_allowed"] is False and approval["title"] == "Incognito chat"
    refused = api.http.post(f"/api/approvals/{approval['id']}",
                            json={"decision": "allow_always"})
    assert refused.status_code == 403  # what the flag said: "Always" is refused here
    assert pending_in(api, key)["id"] == approval["id"]  # still waiting
    deny(api, approval, run_id)


def test_hostile_arguments_never_break_the_list(api: Api, server: ScriptedModelServer) -> None:
    """Strings the model sends as JSON escapes of lone surrogates (which UTF-8 cannot carry):
    before, the list answered 500 while such a call waited, so no approval could be seen, and
    the chat's messages (the call among them) could not be read or exported."""
    for tool, raw in (("write_file", '{"path": "a.md", "content": "x\\ud800y"}'),
                      ("edit_file", '{"path": "b.md", "old_text": "\\ud800", "new_text": ""}')):
        key, run_id, approval = asked(api, server, Call(tool, raw))
        assert "\ufffd" in str(approval["preview"]) and "\ufffd" in str(approval["arguments"])
        deny(api, approval, run_id)
        call = next(m for m in api.messages(key) if m["kind"] == "tool_call")
        assert "\ufffd" in str(call["content"])  # was a 500: the chat could not be read
        assert api.http.get(f"/api/sessions/{key}/export").status_code == 200
