"""Files sent on Telegram: a photo, a document and a voice note are fetched (getFile, then
the file's URL) and kept in the thread's chat as attachments of the message; the model sees
the photo (a model with vision), reads the document and hears the voice note; a message of a
file alone is taken in; a file that cannot be fetched is named in the message, saying so."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from PIL import Image

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.fakes.telegram_server import FakeTelegram
from tests.gateway import Api, Gateway
from tests.support.models import model
from tests.support.polling import until
from tests.support.telegram import OWNER, chats, telegram_config

CHAINS = """
[chains]
chat = ["eyes"]
transcribe = ["hearer"]
"""
OGG = b"OggS\x00\x02" + bytes(120)


def jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), "gold").save(out, "JPEG")
    return out.getvalue()


def users(api: Api) -> list[dict[str, Any]]:
    [chat] = until(lambda: chats(api), what="the thread's chat")
    return [m for m in api.messages(chat["key"]) if m["kind"] == "user"]


def test_a_photo_a_document_and_a_voice_note_are_kept_and_read(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="Got it.")
    url = model_server.openai_base_url
    gateway = gateway_factory(config=telegram_config(telegram) + model(
        "eyes", url, "eyes-model", vision=True) + model("hearer", url, "hear-model") + CHAINS)
    api = gateway.client()
    photo = jpeg()
    telegram.push_file(OWNER, OWNER, "photo", photo, caption="What is this?")
    telegram.wait_sent(1, chat_id=OWNER)
    parts = [m for m in model_server.requests[-1].messages if m["role"] == "user"][-1][
        "content"]
    assert parts[0]["text"] == "What is this?"
    assert parts[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    telegram.push_file(OWNER, OWNER, "document", b"Plant beans in May.\n",
                       file_name="garden.txt", mime_type="text/plain")
    telegram.wait_sent(2, chat_id=OWNER)
    assert "Plant beans in May." in model_server.requests[-1].messages[-1]["content"]
    telegram.push_file(OWNER, OWNER, "voice", OGG)
    telegram.wait_sent(3, chat_id=OWNER)
    assert "Remember to water the tomatoes." in model_server.requests[-1].messages[-1]["content"]
    sent = [[a["name"] for a in m["meta"].get("attachments", [])] for m in users(api)]
    assert sent[0] == [sent[0][0]] and sent[0][0].endswith(".jpg")
    assert sent[1] == ["garden.txt"] and sent[2][0].startswith("voice note")
    key = chats(api)[0]["key"]
    kept = api.http.get(f"/api/sessions/{key}/attachments").json()["attachments"]
    assert [a["type"] for a in kept] == ["image/jpeg", "text/plain", "audio/ogg"]
    assert api.http.get(f"/api/sessions/{key}/attachments/{kept[0]['id']}").content == photo


def test_a_file_that_cannot_be_fetched_is_named_saying_so(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="Sorry.")
    gateway = gateway_factory(config=telegram_config(telegram))
    telegram.fail("getFile", 400, "Bad Request: file is too big")
    telegram.push_file(OWNER, OWNER, "document", b"x" * 10, file_name="huge.bin")
    telegram.wait_sent(1, chat_id=OWNER)
    [message] = users(gateway.client())
    assert "huge.bin (it could not be fetched)" in message["text"]
    assert "attachments" not in message["meta"] or message["meta"]["attachments"] == [
        "huge.bin (it could not be fetched)"]
