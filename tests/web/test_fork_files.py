"""A fork holds its parent's files, through the real gateway: forked after a message that sent
a file, the fork lists it, downloads it through its own URL and its model reads it (in the
message's context and with open_attachment); the bytes are one file on disk, linked into both
chats' folders, so deleting the parent leaves the fork's files whole, and deleting both leaves
no byte of them."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway, module_gateway

NOTES = b"The spare key is under the third flowerpot.\n"
DIGEST = hashlib.sha256(NOTES).hexdigest()
server, gateway, api = module_gateway("fork-files")


@pytest.fixture(autouse=True)
def answers(server: ScriptedModelServer) -> None:
    server.reset()
    server.default = Reply(text="Got it.")


def chat_with_a_file(api: Api) -> str:
    """A chat whose first message sent notes.txt, then one message more (four messages)."""
    key = api.new_chat()
    held = api.http.post(f"/api/sessions/{key}/attachments", params={"name": "notes.txt"},
                         content=NOTES)
    assert held.status_code == 201, held.text
    sent = api.http.post(f"/api/sessions/{key}/messages",
                         json={"text": "keep this", "attachments": [held.json()["id"]]})
    assert sent.status_code == 202, sent.text
    api.wait(sent.json()["run_id"])
    api.wait(api.send(key, "and remember it")["run_id"])
    return key


def forked(api: Api, key: str, index: int) -> str:
    made = api.http.post(f"/api/sessions/{key}/fork", json={"index": index})
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


def sent_file(api: Api, key: str) -> dict[str, Any]:
    """The file the chat's first message sent, as its meta names it."""
    first = next(m for m in api.messages(key) if m["kind"] == "user")
    [file] = first["meta"]["attachments"]
    return dict(file)


def stored(gateway: Gateway, key: str) -> Path:
    return gateway.home / "sessions" / key / "attachments" / DIGEST


def model_reads_the_file(api: Api, server: ScriptedModelServer, key: str) -> None:
    """The fork's next turn reads the file with its message, and open_attachment reads it."""
    server.reset()
    server.push(Reply(tool_calls=[Call("open_attachment", {"name": "notes.txt"})]),
                Reply(text="Under the flowerpot."))
    assert api.wait(api.send(key, "where is the key?")["run_id"])["status"] == "complete"
    [first, *_] = [m for m in server.requests[0].messages if m["role"] == "user"]
    assert NOTES.decode().strip() in str(first["content"])  # the message's file, read in
    [result] = [m for m in api.messages(key) if m["kind"] == "tool_result"]
    assert NOTES.decode().strip() in result["content"]["output"]


def test_a_fork_downloads_its_parents_file_through_its_own_url(
        api: Api, gateway: Gateway) -> None:
    key = chat_with_a_file(api)
    fork = forked(api, key, 1)  # through the answer to the message that sent it
    file = sent_file(api, fork)
    assert file["id"] != sent_file(api, key)["id"]  # the fork's own row
    [listed] = api.http.get(f"/api/sessions/{fork}/attachments").json()["attachments"]
    assert (listed["id"], listed["name"], listed["sent"]) == (file["id"], "notes.txt", True)
    got = api.http.get(f"/api/sessions/{fork}/attachments/{file['id']}")
    assert got.status_code == 200 and got.content == NOTES
    assert stored(gateway, fork).stat().st_ino == stored(gateway, key).stat().st_ino  # linked


def test_a_forks_model_reads_its_parents_file(api: Api, server: ScriptedModelServer) -> None:
    key = chat_with_a_file(api)
    model_reads_the_file(api, server, forked(api, key, 1))


def test_deleting_the_parent_leaves_the_forks_files_and_deleting_both_leaves_none(
        api: Api, server: ScriptedModelServer, gateway: Gateway) -> None:
    key = chat_with_a_file(api)
    fork = forked(api, key, 1)
    assert stored(gateway, fork).stat().st_nlink == 2  # one file, held by both chats
    assert api.http.delete(f"/api/sessions/{key}").status_code == 200
    assert not stored(gateway, key).exists()
    got = api.http.get(f"/api/sessions/{fork}/attachments/{sent_file(api, fork)['id']}")
    assert got.status_code == 200 and got.content == NOTES
    model_reads_the_file(api, server, fork)
    assert stored(gateway, fork).stat().st_nlink == 1  # the fork holds the bytes alone now
    assert api.http.delete(f"/api/sessions/{fork}").status_code == 200
    assert not stored(gateway, fork).exists()  # its last name gone: the bytes are freed
