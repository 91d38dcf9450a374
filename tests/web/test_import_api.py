"""Chats as JSON Lines over HTTP and from the terminal: `GET /api/sessions/{key}/export?format=
jsonl`, `GET /api/export` (every kept chat) and `POST /api/import` (each chat a new chat; a file
that cannot be imported refused whole, 422 naming its line, nothing written), and `hearth
export` / `hearth import` against a real gateway. An imported chat is read by the model on its
next turn."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from hearth.cli import app
from hearth.client.api import GatewayApi
from hearth.client.transfer import TransferFailed, import_chats
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway, kinds, module_gateway
from tests.support.http import error_of
from tests.web import test_export_api as export_tests

server, gateway, api = module_gateway("import-api")
NDJSON = {"Content-Type": "application/x-ndjson"}


def talked(api: Api, server: ScriptedModelServer, **chat: str) -> str:
    """The export tests' chat; a kept one titled by the owner, so no title chore changes it
    between two exports."""
    key = export_tests.talked(api, server, **chat)
    if chat.get("memory_mode") is None:
        assert api.http.patch(f"/api/sessions/{key}", json={"title": "Trip"}).status_code == 200
    return key


def jsonl_of(api: Api, key: str) -> bytes:
    answer = api.http.get(f"/api/sessions/{key}/export", params={"format": "jsonl"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    assert answer.headers["content-disposition"].endswith('.jsonl"')
    return answer.content


def imported(api: Api, body: bytes) -> list[dict[str, Any]]:
    answer = api.http.post("/api/import", content=body, headers=NDJSON)
    assert answer.status_code == 201, answer.text
    return list(answer.json()["imported"])


def normalized(body: bytes) -> list[dict[str, Any]]:
    """The file's lines with keys, ids and times named by order of appearance."""
    names: dict[str, str] = {}
    out = []
    for raw in body.split(b"\n")[:-1]:
        value = json.loads(raw)
        for name in ("event_id", "parent_event_id", "head_event_id", "run_id"):
            if value.get(name) is not None:
                value[name] = names.setdefault(value[name], f"id{len(names)}")
        for name in ("created_at", "updated_at", "ended_at", "exported_at", "key"):
            value.pop(name, None)
        out.append(value)
    return out


def tally(api: Api) -> tuple[int, int]:
    """How many kept chats and events the gateway holds (read through its own export)."""
    every = api.http.get("/api/export")
    assert every.status_code == 200, every.text
    lines = every.content.split(b"\n")
    return (sum(line.startswith(b'{"type":"chat"') for line in lines),
            sum(line.startswith(b'{"type":"event"') for line in lines))


def test_a_chat_goes_out_and_comes_back_as_a_new_chat(api: Api,
                                                      server: ScriptedModelServer) -> None:
    key = talked(api, server)
    api.http.patch(f"/api/sessions/{key}", json={"title": "Trip", "tags": ["travel"]})
    file = jsonl_of(api, key)
    made = imported(api, file)
    assert len(made) == 1 and made[0]["from"] == key and made[0]["key"] != key
    copy = made[0]["key"]
    assert made[0]["title"] == "Trip" and made[0]["events"] == 4 and made[0]["notes"] == []
    assert normalized(jsonl_of(api, copy)) == normalized(file)
    ours, theirs = api.messages(key), api.messages(copy)
    assert kinds(theirs) == kinds(ours) == ["user", "tool_call", "tool_result", "assistant"]
    assert [m["text"] for m in theirs] == [m["text"] for m in ours]
    assert {m["id"] for m in theirs}.isdisjoint(m["id"] for m in ours)
    listed = api.http.get("/api/sessions", params={"limit": 200}).json()["sessions"]
    assert copy in [chat["key"] for chat in listed]  # in the chat list, as any kept chat
    page = api.http.get(f"/chats/{copy}")
    assert page.status_code == 200 and "I wrote" in page.text  # opens on the dashboard


def test_the_model_reads_an_imported_chat_on_its_next_turn(api: Api,
                                                           server: ScriptedModelServer) -> None:
    copy = imported(api, jsonl_of(api, talked(api, server)))[0]["key"]
    server.push(Reply(text="The hotel is booked."))
    assert api.wait(api.send(copy, "And the hotel?")["run_id"])["status"] == "complete"
    request = server.calls("/v1/chat/completions")[-1]
    said = [(m["role"], m.get("content")) for m in request.messages if m["role"] != "system"]
    assert said[0] == ("user", "Write my trip notes")
    assert ("assistant", "I wrote **notes/trip.md**.") in said
    assert any(m["role"] == "tool" for m in request.messages)
    assert said[-1] == ("user", "And the hotel?")


def test_a_file_imported_twice_makes_two_chats_and_touches_neither(
        api: Api, server: ScriptedModelServer) -> None:
    key = talked(api, server)
    file = jsonl_of(api, key)
    first, second = imported(api, file)[0]["key"], imported(api, file)[0]["key"]
    assert len({key, first, second}) == 3
    assert normalized(jsonl_of(api, key)) == normalized(file)
    assert jsonl_of(api, key).split(b"\n")[1:] == file.split(b"\n")[1:]  # byte for byte


def _line_5_broken(file: bytes) -> bytes:
    lines = file.split(b"\n")
    lines[4] = lines[4][:-7]  # line 5 cut: not JSON
    return b"\n".join(lines)


def _chain_broken(file: bytes) -> tuple[bytes, int]:
    lines = file.split(b"\n")
    number = next(n for n, line in enumerate(lines, start=1)
                  if b'"kind":"assistant"' in line)
    event = json.loads(lines[number - 1])
    event["parent_event_id"] = "f" * 32  # an event this chat does not have
    lines[number - 1] = json.dumps(event).encode()
    return b"\n".join(lines), number


def test_a_file_that_cannot_be_imported_is_refused_naming_its_line_and_writes_nothing(
        api: Api, server: ScriptedModelServer) -> None:
    file = jsonl_of(api, talked(api, server))
    chained, number = _chain_broken(file)
    before = tally(api)
    message = error_of(api.http.post("/api/import", content=_line_5_broken(file),
                                     headers=NDJSON), 422, "import_invalid")
    assert message.startswith("Line 5: it is not valid JSON")
    assert "Nothing was imported" in message
    message = error_of(api.http.post("/api/import", content=chained, headers=NDJSON), 422,
                       "import_invalid")
    assert message.startswith(f"Line {number}: ") and "no earlier event" in message
    assert "trip" not in message.lower()  # names the line, never quotes the chat
    assert tally(api) == before


def test_a_chat_that_keeps_nothing_is_never_exported_nor_imported(
        api: Api, server: ScriptedModelServer) -> None:
    kept = jsonl_of(api, talked(api, server))
    key = talked(api, server, memory_mode="incognito")
    message = error_of(api.http.get(f"/api/sessions/{key}/export", params={"format": "jsonl"}),
                       409, "export_refused")
    assert "trip" not in message.lower()
    assert key.encode() not in api.http.get("/api/export").content
    lines = kept.split(b"\n")
    chat = json.loads(lines[1])
    lines[1] = json.dumps({**chat, "memory_mode": "incognito"}).encode()
    before = tally(api)
    message = error_of(api.http.post("/api/import", content=b"\n".join(lines), headers=NDJSON),
                       422, "import_invalid")
    assert message.startswith("Line 2: ") and "never imported" in message
    assert tally(api) == before


def test_every_kept_chat_goes_out_in_one_file(api: Api, server: ScriptedModelServer) -> None:
    key = talked(api, server)
    api.http.patch(f"/api/sessions/{key}", json={"archived": True})
    every = api.http.get("/api/export")
    assert every.status_code == 200
    assert every.headers["content-disposition"].startswith('attachment; filename="hearth-export-')
    lines = [json.loads(line) for line in every.content.split(b"\n")[:-1]]
    chats = [line for line in lines if line.get("type") == "chat"]
    assert lines[0]["chats"] == len(chats) and key in [c["key"] for c in chats]
    assert next(c for c in chats if c["key"] == key)["archived"] is True


def test_what_is_not_an_import_is_refused_and_writes_nothing(
        api: Api, server: ScriptedModelServer) -> None:
    file = jsonl_of(api, talked(api, server))
    before = tally(api)
    error_of(api.http.post("/api/import", content=file,
                           headers={"Content-Type": "image/png"}), 415, "unsupported_media_type")
    too_big = file + b"\n" * (4 * 1024 * 1024)
    error_of(api.http.post("/api/import", content=too_big, headers=NDJSON), 413,
             "request_too_large")
    checked = api.http.post("/api/import", params={"dry_run": "true"}, content=file,
                            headers={"Content-Type": "text/plain"})
    assert checked.status_code == 200 and checked.json() == {"chats": 1, "imported": []}
    error_of(api.http.post("/api/import", content=b"", headers=NDJSON), 422, "import_invalid")
    error_of(api.http.post("/api/import", params={"line_offset": -1}, content=file,
                           headers=NDJSON), 422, "invalid_request")
    assert tally(api) == before


def test_the_dashboard_offers_the_download_and_the_import(api: Api,
                                                          server: ScriptedModelServer) -> None:
    key = talked(api, server)
    page = api.http.get(f"/chats/{key}")
    assert f'href="/api/sessions/{key}/export?format=jsonl"' in page.text
    listing = api.http.get("/chats")
    assert "data-import-form" in listing.text and 'src="/static/import.js?v=' in listing.text
    assert api.http.get("/static/import.js").status_code == 200


# ------------------------------------------------------------------ the terminal


def hearth(gateway: Gateway, *args: str) -> Any:
    return CliRunner().invoke(app, [*args, "--url", gateway.url],
                              env={"HEARTH_HOME": str(gateway.home), "HEARTH_TOKEN": TOKEN})


def test_hearth_export_and_import_write_and_read_a_file(
        api: Api, server: ScriptedModelServer, gateway: Gateway, tmp_path: Path) -> None:
    key = talked(api, server)
    one = tmp_path / "one.jsonl"
    done = hearth(gateway, "export", key, "--out", str(one))
    assert done.exit_code == 0, done.output
    assert normalized(one.read_bytes()) == normalized(jsonl_of(api, key))
    every = tmp_path / "every.jsonl"
    done = hearth(gateway, "export", "--all", "--out", str(every))
    assert done.exit_code == 0, done.output
    declared = json.loads(every.read_bytes().split(b"\n")[0])["chats"]
    assert f"Exported {declared} chats to {every}." in done.output
    done = hearth(gateway, "import", str(one))
    assert done.exit_code == 0, done.output
    assert "Imported 1 chat from" in done.output
    copy = done.output.split("\n  ")[1].split()[0]
    assert copy != key and normalized(jsonl_of(api, copy)) == normalized(one.read_bytes())
    assert set(tmp_path.iterdir()) == {one, every}  # nothing left beside them


def test_hearth_export_refuses_what_it_cannot_do(
        api: Api, server: ScriptedModelServer, gateway: Gateway, tmp_path: Path) -> None:
    key = talked(api, server, memory_mode="temporary")
    out = tmp_path / "secret.jsonl"
    done = hearth(gateway, "export", key, "--out", str(out))
    assert done.exit_code == 1 and "409" in done.output and "exported" in done.output
    assert not out.exists() and list(tmp_path.iterdir()) == []  # no half file either
    done = hearth(gateway, "export")
    assert done.exit_code == 2 and "--all" in done.output
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(_line_5_broken(jsonl_of(api, talked(api, server))))
    before = tally(api)
    done = hearth(gateway, "import", str(broken))
    assert done.exit_code == 1 and "Line 5: it is not valid JSON" in done.output
    assert tally(api) == before


def test_a_long_file_goes_in_parts_checked_whole_before_any_is_written(
        api: Api, server: ScriptedModelServer, gateway: Gateway, tmp_path: Path) -> None:
    keys = [talked(api, server) for _ in range(3)]
    parts = [jsonl_of(api, key).split(b"\n") for key in keys]
    file = tmp_path / "three.jsonl"
    header = json.dumps({"hearth_export": 1, "chats": 3}).encode()
    lines = [header] + [line for part in parts for line in part[1:-1]]
    file.write_bytes(b"\n".join(lines) + b"\n")
    client = GatewayApi(gateway.url, TOKEN)
    quiet = Console(file=io.StringIO())  # the bars, unseen
    try:
        made = import_chats(client, file, quiet, part_bytes=200)  # a part per chat
        assert [chat["from"] for chat in made] == keys
        number = len(lines) - 1  # the last chat's last event but one
        event = json.loads(lines[number - 1])
        lines[number - 1] = json.dumps({**event, "kind": "thought"}).encode()
        file.write_bytes(b"\n".join(lines) + b"\n")
        before = tally(api)
        with pytest.raises(TransferFailed) as failed:
            import_chats(client, file, quiet, part_bytes=200)
        assert f"Line {number}: its kind is 'thought'" in str(failed.value)
        assert tally(api) == before  # the first parts were good, and were not written
    finally:
        client.close()
