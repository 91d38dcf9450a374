"""A chat downloaded as JSONL from its menu and imported from the chat list, in Chromium: the
import lists the new chat with a link, the link opens it with its messages (the variant kept
beside its answer), and a file with a broken line shows the gateway's sentence."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Gateway  # noqa: E402

Shot = Callable[[Page, str], Path]
SignedIn = Callable[[Gateway], Page]


def test_download_a_chat_then_import_it_from_the_list(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn, shot: Shot,
        console_errors: list[str], tmp_path: Path) -> None:
    api = gateway.client()
    key = api.new_chat()
    model_server.push(Reply(text="Red."))
    assert api.wait(api.send(key, "name a colour")["run_id"])["status"] == "complete"
    model_server.push(Reply(text="Blue."))
    again = api.http.post(f"/api/sessions/{key}/regenerate", json={})
    assert again.status_code == 202, again.text
    assert api.wait(again.json()["run_id"])["status"] == "complete"
    api.http.patch(f"/api/sessions/{key}", json={"title": "Colours"})

    page = signed_in(gateway)
    page.goto(f"{gateway.url}/chats/{key}")
    page.get_by_label("Chat options", exact=True).first.click()
    with page.expect_download() as downloading:
        page.get_by_role("link", name="Download (JSONL)").click()
    file = tmp_path / downloading.value.suggested_filename
    downloading.value.save_as(file)
    assert file.name == "Colours.jsonl" and file.read_bytes().count(b'"type":"event"') == 3

    page.goto(f"{gateway.url}/chats")
    page.get_by_text("Import chats").click()
    page.get_by_label("A file of chats exported from Hearth (JSONL)").set_input_files(file)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_text("Imported 1 chat.")).to_be_visible()
    shot(page, "import-done")
    link = page.locator("[data-import-result] a")
    expect(link).to_have_text("Colours")
    copy = str(link.get_attribute("href")).rsplit("/", 1)[1]
    assert copy != key
    link.click()
    expect(page.locator(".item.assistant .markdown")).to_have_text(["Blue."])
    answer = next(m for m in api.messages(copy) if m["kind"] == "assistant")
    assert answer["variants"] == {"count": 2, "index": 1}  # Red. kept beside it

    broken = tmp_path / "broken.jsonl"
    lines = file.read_bytes().split(b"\n")
    lines[3] = b"{ not json"
    broken.write_bytes(b"\n".join(lines))
    page.goto(f"{gateway.url}/chats")
    page.get_by_text("Import chats").click()
    page.get_by_label("A file of chats exported from Hearth (JSONL)").set_input_files(broken)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("[data-import-result] .error")).to_contain_text(
        "Line 4: it is not valid JSON")
    shot(page, "import-refused")
    # the browser logs the refused request itself; nothing else (a CSP violation, a script error)
    assert [e for e in console_errors if "status of 422" not in e] == []
