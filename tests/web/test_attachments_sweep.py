"""Uploads never sent are removed after `[attachments] held_seconds`, through the real gateway
(here 1.5 s, passed on the gateway's fake clock): the held upload's row and file go, in any
chat (an Incognito one too); a sent file stays, and so do the bytes a held upload shared with
a sent one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.gateway import Api, Gateway, module_gateway
from tests.support.clock import FakeClock
from tests.support.polling import until

HELD_SECONDS = 1.5
CLOCK = FakeClock()  # the sweep looks as the test advances it
server, gateway, api = module_gateway(
    "attachment-sweep", config=f"[attachments]\nheld_seconds = {HELD_SECONDS}\n", clock=CLOCK)


def upload(api: Api, key: str, data: bytes, name: str) -> dict[str, Any]:
    answer = api.http.post(f"/api/sessions/{key}/attachments", params={"name": name},
                           content=data)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def listed(api: Api, key: str) -> dict[str, dict[str, Any]]:
    answer = api.http.get(f"/api/sessions/{key}/attachments")
    return {a["name"]: a for a in answer.json()["attachments"]}


def files_of(gateway: Gateway, key: str) -> set[str]:
    kept: Path = gateway.home / "sessions" / key / "attachments"
    return {p.name for p in kept.iterdir()} if kept.exists() else set()


def test_an_upload_never_sent_is_removed_and_sent_files_stay(
        api: Api, gateway: Gateway) -> None:
    """Before: an upload never sent stayed with its chat until the chat was deleted."""
    key, hidden = api.new_chat(), api.new_chat(memory_mode="incognito")
    forgotten = upload(api, key, b"never sent", "forgotten.txt")
    sent = upload(api, key, b"sent with a message", "sent.txt")
    answer = api.http.post(f"/api/sessions/{key}/messages",
                           json={"text": "here", "attachments": [sent["id"]]})
    assert answer.status_code == 202, answer.text
    api.wait(answer.json()["run_id"])
    twin = upload(api, key, b"sent with a message", "twin.txt")  # the sent file's bytes
    secret = upload(api, hidden, b"an incognito upload", "secret.txt")

    until(lambda: CLOCK.paused("sweep:held-uploads"), what="the sweep's pause")
    CLOCK.advance(HELD_SECONDS + 0.5)  # past the uploads' time, and the sweep has looked
    assert set(listed(api, key)) == {"sent.txt"} and listed(api, hidden) == {}
    assert files_of(gateway, key) == {sent["sha256"]}  # the twin's bytes are the sent file's
    assert twin["sha256"] == sent["sha256"] and forgotten["sha256"] not in files_of(gateway, key)
    assert secret["sha256"] not in files_of(gateway, hidden)
    got = api.http.get(f"/api/sessions/{key}/attachments/{sent['id']}")
    assert got.status_code == 200 and got.content == b"sent with a message"
    refused = api.http.post(f"/api/sessions/{key}/messages",
                            json={"text": "late", "attachments": [forgotten["id"]]})
    assert refused.status_code == 404  # removed: nothing left to send
