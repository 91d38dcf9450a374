"""Uploads are held to quotas, through the real gateway: uploads waiting to be sent in one chat
(`[attachments] held_per_chat`, 429 with Retry-After), the bytes of every file one chat keeps
(`chat_max_mb`, 413) and of every file in the chats one app started (`[apps] attachments_mb`,
429); each refusal says which quota and how to raise it, and keeps nothing of the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.gateway import Api, Gateway, module_gateway
from tests.support.apps import app_token
from tests.support.http import error_of

KB = 1024
server, gateway, api = module_gateway("attachment-quotas", config="""
[attachments]
max_file_mb = 0.05
max_message_mb = 0.1
chat_max_mb = 0.1
held_per_chat = 3

[apps]
attachments_mb = 0.15
""")


def upload(client: httpx.Client, key: str, data: bytes, name: str = "a.txt") -> httpx.Response:
    return client.post(f"/api/sessions/{key}/attachments", params={"name": name}, content=data)


def files_of(gateway: Gateway, key: str) -> list[str]:
    kept: Path = gateway.home / "sessions" / key / "attachments"
    return sorted(p.name for p in kept.iterdir()) if kept.exists() else []


def send(api: Api, key: str, ids: list[str]) -> dict[str, Any]:
    answer = api.http.post(f"/api/sessions/{key}/messages",
                           json={"text": "these", "attachments": ids})
    assert answer.status_code == 202, answer.text
    return dict(answer.json())


def test_a_chat_holds_so_many_uploads_not_sent(api: Api, gateway: Gateway) -> None:
    """Before: a chat held any number of uploads never sent."""
    key = api.new_chat()
    held = [upload(api.http, key, f"note {n}".encode()).json()["id"] for n in range(3)]
    kept = files_of(gateway, key)
    refused = upload(api.http, key, b"one more")
    error_of(refused, 429, "too_many_held", "`held_per_chat` = 3", "[attachments]",
             "Nothing of this file was kept")
    assert 1 <= int(refused.headers["retry-after"]) <= 24 * 3600
    assert files_of(gateway, key) == kept
    api.wait(send(api, key, held[:1])["run_id"])  # one sent: room for one more
    assert upload(api.http, key, b"one more").status_code == 201


def test_a_chat_keeps_so_many_bytes_of_files(api: Api, gateway: Gateway) -> None:
    """Sent and held files count alike; another chat has room of its own. Before: a chat kept
    any number of bytes."""
    key, other = api.new_chat(), api.new_chat()
    first = upload(api.http, key, b"1" * (45 * KB)).json()["id"]
    api.wait(send(api, key, [first])["run_id"])
    assert upload(api.http, key, b"2" * (45 * KB)).status_code == 201
    kept = files_of(gateway, key)
    refused = upload(api.http, key, b"3" * (20 * KB))
    error_of(refused, 413, "chat_files_full", "`chat_max_mb` = 0.1", "Nothing of this file")
    assert files_of(gateway, key) == kept
    assert upload(api.http, other, b"3" * (20 * KB)).status_code == 201


def test_an_apps_chats_keep_so_many_bytes_of_files(api: Api, gateway: Gateway) -> None:
    """Every chat an app started counts together, and the owner's chats not at all. Before:
    an app could fill the disk by making chats and uploading to each."""
    token = app_token(api, "uploader", "send_messages", "read_chats")
    with httpx.Client(base_url=gateway.url, timeout=10,
                      headers={"Authorization": f"Bearer {token}"}) as app:
        chats = [app.post("/api/sessions", json={"name": f"box-{n}"}).json()["key"]
                 for n in range(3)]
        for n, key in enumerate(chats):
            assert upload(app, key, bytes([65 + n]) * (45 * KB)).status_code == 201
        kept = files_of(gateway, chats[2])
        refused = upload(app, chats[2], b"Z" * (30 * KB))
    error_of(refused, 429, "quota_exceeded", "'uploader'", "`attachments_mb` = 0.15",
             "[apps]")
    assert files_of(gateway, chats[2]) == kept
    mine = api.new_chat()
    assert upload(api.http, mine, b"Z" * (30 * KB)).status_code == 201
