"""Files in the chat page, in Chromium: the paperclip, a file dropped on the composer and an
image pasted into the box each upload at once into the tray; the message sends them (with or
without words), and the chat shows them on the message: a picture, or the file's name."""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from PIL import Image  # noqa: E402
from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Gateway  # noqa: E402
from tests.support.browser import open_chat, shots  # noqa: E402
from tests.support.polling import until  # noqa: E402

Shot = Callable[[Page, str], Path]


def png(colour: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), colour).save(out, "PNG")
    return out.getvalue()


def drop_or_paste(page: Page, how: str, name: str, data: bytes, kind: str) -> None:
    """A file dropped on the composer, or pasted into the box, as a browser hands it over."""
    page.evaluate(
        """([how, name, data, kind]) => {
            const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
            const files = new DataTransfer();
            files.items.add(new File([bytes], name, { type: kind }));
            if (how === "drop") {
                const zone = document.querySelector(".composer-box");
                zone.dispatchEvent(new DragEvent("dragover", { dataTransfer: files, bubbles: true,
                                                               cancelable: true }));
                zone.dispatchEvent(new DragEvent("drop", { dataTransfer: files, bubbles: true,
                                                           cancelable: true }));
            } else {
                document.getElementById("text").dispatchEvent(new ClipboardEvent(
                    "paste", { clipboardData: files, bubbles: true, cancelable: true }));
            }
        }""", [how, name, base64.b64encode(data).decode(), kind])


def test_files_chosen_dropped_and_pasted_are_sent_and_shown(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Shot, tmp_path: Path) -> None:
    page = signed_in(gateway)
    key = gateway.client().new_chat()
    model_server.default = Reply(text="Got them.")
    shots(page, gateway, shot, f"/chats/{key}", "attach-tray", then=_fill_tray)
    open_chat(page, gateway, key)
    photo = tmp_path / "garden.png"
    photo.write_bytes(png("seagreen"))
    page.locator("#files").set_input_files(str(photo))
    drop_or_paste(page, "drop", "minutes.txt", b"The meeting moved to Tuesday.\n", "text/plain")
    drop_or_paste(page, "paste", "image.png", png("tomato"), "image/png")
    tray = page.locator("#tray li")
    expect(tray).to_have_count(3)
    expect(page.locator("#tray li[data-id]")).to_have_count(3)  # all three uploaded
    expect(tray.nth(1).locator(".file-name")).to_have_text("minutes.txt")
    page.get_by_label("Message").fill("What are these?")
    page.get_by_label("Message").press("Enter")
    sent = page.locator(".item.user .files li")
    expect(sent).to_have_count(3)
    expect(page.locator(".item.user .files img")).to_have_count(2)
    expect(page.locator(".item.user .files .file-chip .file-name")).to_have_text("minutes.txt")
    expect(page.locator("#tray li")).to_have_count(0)  # the tray is empty for the next message
    expect(page.locator(".item.assistant .markdown")).to_have_text("Got them.")
    [message] = [m for m in gateway.client().messages(key) if m["kind"] == "user"]
    assert [a["name"] for a in message["meta"]["attachments"]] == [
        "garden.png", "minutes.txt", "image.png"]
    shots(page, gateway, shot, f"/chats/{key}", "attach-sent")


def test_a_message_of_files_alone_is_sent_and_a_refused_file_says_why(
        gateway: Gateway, signed_in: Callable[..., Page], tmp_path: Path,
        model_server: ScriptedModelServer) -> None:
    page = signed_in(gateway)
    key = gateway.client().new_chat()
    model_server.default = Reply(text="A picture.")
    open_chat(page, gateway, key)
    drop_or_paste(page, "drop", "fake.png", b"\x89PNG\r\n\x1a\n not an image", "image/png")
    failed = page.locator("#tray li.failed")
    expect(failed).to_have_count(1)
    expect(failed.locator(".file-size")).to_contain_text("does not open as one")
    failed.get_by_role("button", name="Remove fake.png").click()
    drop_or_paste(page, "paste", "only.png", png("navy"), "image/png")
    expect(page.locator("#tray li[data-id]")).to_have_count(1)
    page.get_by_role("button", name="Send").click()  # no words: the picture is the message
    expect(page.locator(".item.user .files img")).to_have_count(1)
    expect(page.locator(".item.assistant .markdown")).to_have_text("A picture.")


def _fill_tray(page: Page) -> None:
    """A tray with a picture and a text file in it, uploaded (for the screenshots)."""
    drop_or_paste(page, "paste", "garden.png", png("seagreen"), "image/png")
    drop_or_paste(page, "drop", "minutes.txt", b"The meeting moved to Tuesday.\n", "text/plain")
    expect(page.locator("#tray li[data-id]")).to_have_count(2)


def test_a_voice_note_recorded_is_sent_and_heard(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        shot: Shot) -> None:
    page = signed_in(gateway)
    key = gateway.client().new_chat()
    model_server.default = Reply(text="Noted.")
    open_chat(page, gateway, key)
    microphone = page.get_by_role("button", name="Record a voice note")
    microphone.click()
    stop = page.get_by_role("button", name="Stop recording")
    expect(stop).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#record .recording-time")).to_have_text("0:01", timeout=5000)
    shot(page, "record-voice-note")
    stop.click()
    chip = page.locator("#tray li[data-id]")
    expect(chip).to_have_count(1)
    expect(chip.locator(".file-name")).to_contain_text("voice note")
    page.get_by_role("button", name="Send").click()  # the note alone
    expect(page.locator(".item.user .files audio")).to_have_count(1)  # a player, to hear it
    expect(page.locator(".item.assistant .markdown")).to_have_text("Noted.")
    note = page.locator(".item.user .file-audio")
    expect(note.locator(".audio-length")).to_have_text(re.compile(r"^0:0[1-9]$"))  # not 0:00
    expect(note.locator(".heard.unheard")).to_contain_text(  # no transcribe chain here
        "Not transcribed: no model is set up to hear voice notes")
    shots(page, gateway, shot, f"/chats/{key}", "voice-note-sent")
    [message] = [m for m in gateway.client().messages(key) if m["kind"] == "user"]
    [note] = message["meta"]["attachments"]
    assert note["type"] == "audio/webm" and note["size"] > 500


def test_read_aloud_uses_the_browsers_voice_when_no_speak_model_is_set_up(
        gateway: Gateway, model_server: ScriptedModelServer,
        signed_in: Callable[..., Page]) -> None:
    page = signed_in(gateway)
    page.add_init_script("""
        window.__spoken = [];
        window.speechSynthesis.speak = (utterance) => {
            window.__spoken.push(utterance.text);
            setTimeout(() => utterance.dispatchEvent(new Event("end")), 50);
        };""")
    key = gateway.client().new_chat()
    model_server.default = Reply(text="Water them at dawn.")
    gateway.client().wait(gateway.client().send(key, "When?")["run_id"])
    open_chat(page, gateway, key)
    button = page.get_by_role("button", name="Read aloud the answer")
    button.click()
    # polled from here: the page's policy refuses the eval wait_for_function would need
    until(lambda: page.evaluate("window.__spoken.length") == 1, what="the answer spoken")
    assert page.evaluate("window.__spoken") == ["Water them at dawn."]
    expect(button).to_have_attribute("aria-pressed", "false")  # it ended


def test_a_new_chat_starts_with_files(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: Callable[..., Page],
        tmp_path: Path, shot: Shot) -> None:
    page = signed_in(gateway)  # the new-chat page
    model_server.default = Reply(text="A fine garden.")
    photo = tmp_path / "garden.png"
    photo.write_bytes(png("seagreen"))
    page.locator("#files").set_input_files(str(photo))
    expect(page.locator("#tray li")).to_have_count(1)
    expect(page.locator("#tray .file-name")).to_have_text("garden.png")
    shot(page, "start-with-a-file")
    page.get_by_label("Message").fill("Look at my garden")
    page.get_by_role("button", name="Send").click()
    page.wait_for_url(re.compile(r"/chats/[^/]+$"))
    expect(page.locator(".item.user .files img")).to_have_count(1)
    expect(page.locator(".item.assistant .markdown")).to_have_text("A fine garden.")
    key = page.url.rsplit("/", 1)[1]
    [message] = [m for m in gateway.client().messages(key) if m["kind"] == "user"]
    assert message["text"] == "Look at my garden"
    assert [a["name"] for a in message["meta"]["attachments"]] == ["garden.png"]
