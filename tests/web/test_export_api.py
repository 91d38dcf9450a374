"""`GET /api/sessions/{key}/export?format=json|markdown`: the chat as a download (a file name
from its title), every message; a chat that keeps nothing is refused (409 export_refused);
an unknown chat is 404 and a format there is not 422, in the error envelope."""

from __future__ import annotations

import json

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, module_gateway
from tests.support.http import error_of

server, gateway, api = module_gateway("export-api")


def talked(api: Api, server: ScriptedModelServer, **chat: str) -> str:
    key = api.new_chat(**chat)
    server.push(Reply(tool_calls=[Call("write_file", {"path": "notes/trip.md",
                                                      "content": "Lisbon"})]),
                Reply(text="I wrote **notes/trip.md**."))
    assert api.wait(api.send(key, "Write my trip notes")["run_id"])["status"] == "complete"
    return key


def test_json_export_is_the_chat_and_every_message(api: Api, server: ScriptedModelServer) -> None:
    key = talked(api, server)
    api.http.patch(f"/api/sessions/{key}", json={"title": "Trip: Lisbon / 2025"})
    answer = api.http.get(f"/api/sessions/{key}/export")  # json by default
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.headers["content-disposition"] == (
        'attachment; filename="Trip-Lisbon-2025.json"')
    body = json.loads(answer.content)
    assert body["session"]["key"] == key and body["session"]["title"] == "Trip: Lisbon / 2025"
    assert body["messages"] == api.messages(key)
    assert [m["kind"] for m in body["messages"]] == [
        "user", "tool_call", "tool_result", "assistant"]


def test_markdown_export_reads_as_the_conversation(api: Api, server: ScriptedModelServer) -> None:
    key = talked(api, server)
    answer = api.http.get(f"/api/sessions/{key}/export", params={"format": "markdown"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/markdown")
    assert answer.headers["content-disposition"].endswith('.md"')
    text = answer.text
    lines = text.splitlines()
    assert lines[0].startswith("# ")
    assert "## You (" in text and "Write my trip notes" in text
    assert "## Assistant (" in text and "I wrote **notes/trip.md**." in text
    assert "- Tool call: `write_file` `notes/trip.md`" in lines
    assert text.index("Write my trip notes") < text.index("Tool call") < text.index("I wrote")


def test_a_chat_that_keeps_nothing_is_not_exported(api: Api, server: ScriptedModelServer) -> None:
    for mode in ("incognito", "temporary"):
        key = talked(api, server, memory_mode=mode)
        for fmt in ("json", "markdown"):
            answer = api.http.get(f"/api/sessions/{key}/export", params={"format": fmt})
            message = error_of(answer, 409, "export_refused")
            assert "trip" not in message.lower() and "content-disposition" not in answer.headers


def test_unknown_chats_and_formats_are_refused(api: Api) -> None:
    error_of(api.http.get("/api/sessions/no-such-chat/export"), 404, "session_not_found")
    key = api.new_chat()
    error_of(api.http.get(f"/api/sessions/{key}/export", params={"format": "pdf"}), 422,
             "invalid_request")
    empty = api.http.get(f"/api/sessions/{key}/export", params={"format": "markdown"})
    assert empty.status_code == 200 and empty.text.startswith(f"# {key}\n")
