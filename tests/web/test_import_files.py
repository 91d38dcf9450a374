"""The files of an imported chat, through the real gateway: each file's type is read from its
bytes (never from what the export's lines say), each is checked as an upload is, and an import
with a file that does not open (missing from the file, an image that does not decode) is
refused whole, naming the file, with nothing of it kept: no chat, no row, no byte on disk."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Api, Gateway, module_gateway
from tests.support.http import error_of
from tests.support.models import model

NDJSON = {"Content-Type": "application/x-ndjson"}
NOTES = b"Plant the beans after the last frost.\n"
server, gateway, api = module_gateway("import-files", lambda s: model(
    "eyes", s.openai_base_url, "eyes-model", vision=True))


@pytest.fixture(autouse=True)
def answers(server: ScriptedModelServer) -> None:
    server.reset()
    server.default = Reply(text="Noted.")


def png(colour: str = "green") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (6, 6), colour).save(out, "PNG")
    return out.getvalue()


def exported_with(api: Api, files: dict[str, bytes], model_id: str | None = None) -> bytes:
    """The JSON Lines export of a new chat whose first message sent `files` (name: bytes)."""
    key = api.new_chat(**({"model": model_id} if model_id else {}))
    ids = []
    for name, data in files.items():
        held = api.http.post(f"/api/sessions/{key}/attachments", params={"name": name},
                             content=data)
        assert held.status_code == 201, held.text
        ids.append(held.json()["id"])
    sent = api.http.post(f"/api/sessions/{key}/messages",
                         json={"text": "keep these", "attachments": ids})
    assert sent.status_code == 202, sent.text
    api.wait(sent.json()["run_id"])
    exported = api.http.get(f"/api/sessions/{key}/export", params={"format": "jsonl"})
    assert exported.status_code == 200
    return exported.content


def lines_of(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in body.splitlines()]


def body_of(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def with_data(line: dict[str, Any], data: bytes) -> dict[str, Any]:
    """A file line carrying `data`, its size and sha256 made to match (so only what the bytes
    are can refuse it)."""
    return {**line, "data": base64.b64encode(data).decode(), "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


def chat_keys(api: Api) -> set[str]:
    return {s["key"] for s in api.http.get("/api/sessions").json()["sessions"]}


def on_disk(gateway: Gateway) -> set[str]:
    return {str(p.relative_to(gateway.home)) for p in (gateway.home / "sessions").rglob("*")}


def test_an_imported_files_type_is_read_from_its_bytes_never_from_its_line(
        api: Api, server: ScriptedModelServer) -> None:
    lines = lines_of(exported_with(api, {"notes.txt": NOTES, "leaf.png": png()}, "eyes"))
    for line in lines:  # every line says the text is an image and the image is text
        if line.get("type") == "file":
            line["content_type"] = "image/png" if line["name"] == "notes.txt" else "text/plain"
        for sent in (line.get("meta") or {}).get("attachments", []):
            sent["type"] = "image/png" if sent["name"] == "notes.txt" else "text/plain"
    made = api.http.post("/api/import", content=body_of(lines), headers=NDJSON)
    assert made.status_code == 201, made.text
    copy = made.json()["imported"][0]["key"]
    listed = api.http.get(f"/api/sessions/{copy}/attachments").json()["attachments"]
    assert {a["name"]: a["type"] for a in listed} == {"notes.txt": "text/plain",
                                                      "leaf.png": "image/png"}
    [message] = [m for m in api.messages(copy) if m["kind"] == "user"]
    assert {a["name"]: a["type"] for a in message["meta"]["attachments"]} == {
        "notes.txt": "text/plain", "leaf.png": "image/png"}
    server.reset()
    api.wait(api.send(copy, "what did I keep?")["run_id"])
    [first, *_] = [m for m in server.requests[-1].messages if m["role"] == "user"]
    parts = first["content"]
    assert NOTES.decode().strip() in parts[0]["text"]  # the text read as text
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_an_import_whose_image_does_not_open_is_refused_whole_naming_it(
        api: Api, gateway: Gateway) -> None:
    first = lines_of(exported_with(api, {"notes.txt": NOTES}))
    second = lines_of(exported_with(api, {"leaf.png": png()}))
    broken = png()[:40] + b"\x00" * 200  # a PNG's signature, and then nothing that decodes
    second = [with_data(line, broken) if line.get("type") == "file" else line
              for line in second]
    both = [{**first[0], "chats": 2}, *first[1:], *second[1:]]
    keys, files = chat_keys(api), on_disk(gateway)
    for params in ({"dry_run": "true"}, {}):
        refused = api.http.post("/api/import", params=params, content=body_of(both),
                                headers=NDJSON)
        message = error_of(refused, 422, "import_invalid")
        assert "leaf.png" in message and "Nothing was imported" in message
    assert chat_keys(api) == keys  # not even the first chat, whose file was whole
    assert on_disk(gateway) == files  # and no byte of either


def test_an_import_missing_a_file_its_message_sent_is_refused_whole_naming_it(
        api: Api, gateway: Gateway) -> None:
    lines = lines_of(exported_with(api, {"notes.txt": NOTES, "leaf.png": png()}))
    cut = [line for line in lines if line.get("name") != "leaf.png"]  # its file line gone
    cut[1]["files"] = 1  # and the chat line counts what is left
    keys, files = chat_keys(api), on_disk(gateway)
    refused = api.http.post("/api/import", content=body_of(cut), headers=NDJSON)
    message = error_of(refused, 422, "import_invalid")
    assert "leaf.png" in message and "Nothing was imported" in message
    assert chat_keys(api) == keys and on_disk(gateway) == files


def test_a_whole_import_leaves_no_staging_behind(api: Api, gateway: Gateway) -> None:
    body = exported_with(api, {"notes.txt": NOTES})
    before = on_disk(gateway)
    checked = api.http.post("/api/import", params={"dry_run": "true"}, content=body,
                            headers=NDJSON)
    assert checked.status_code == 200, checked.text
    assert on_disk(gateway) == before  # a check writes nothing
    made = api.http.post("/api/import", content=body, headers=NDJSON)
    copy = made.json()["imported"][0]["key"]
    added = on_disk(gateway) - before
    digest = hashlib.sha256(NOTES).hexdigest()
    assert added == {f"sessions/{copy}", f"sessions/{copy}/attachments",
                     f"sessions/{copy}/attachments/{digest}"}
    assert (gateway.home / "sessions" / copy / "attachments" / digest).read_bytes() == NOTES
    assert not any(Path(p).name.startswith(".") for p in on_disk(gateway))
