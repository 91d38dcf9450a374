"""The docs' webhook example (docs/channels.md) runs as written: its Python, with the secret in the
environment, signs a message the gateway takes in (202, a run)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Gateway

CHANNELS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "channels.md"  # the channels' page
SECRET = "readme-example-secret-0123456789"


def _example() -> str:
    section = CHANNELS_PAGE.read_text(encoding="utf-8").split("## Webhook channel", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "the webhook section has no Python example"
    return found.group(1)


def test_the_readme_webhook_example_is_taken_in(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="Two meetings.")
    gateway = gateway_factory(config='[channels.webhook]\ncallback_url = "http://127.0.0.1:9/"\n'
                                     'owner_ids = ["alice"]\n',
                              env={"HEARTH_WEBHOOK_SECRET": SECRET})
    code = _example().replace("http://127.0.0.1:8765", gateway.url)
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30, env={**os.environ, "HEARTH_WEBHOOK_SECRET": SECRET})
    assert ran.returncode == 0, ran.stderr
    assert '"run_id"' in ran.stdout and '"chat"' in ran.stdout
    chats = gateway.client().http.get("/api/sessions").json()["sessions"]
    assert [c["origin"] for c in chats] == ["webhook"]
