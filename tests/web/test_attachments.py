"""Attachments through the real gateway: a file uploaded to a chat (streamed to its folder,
sniffed, checked), sent by the message that names it, read by the model (an image as an image
part to a model with vision, a line and a notice for one without; a text file or a PDF as
text, cut to its budget), listed and downloaded, refused with a sentence when too large, not
what it says or a bomb (nothing of it kept), and gone with its chat."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from hearth.client.api import GatewayApi
from hearth.client.repl import Repl
from tests.fakes.model_server import SPOKEN, Call, Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway, module_gateway
from tests.support.http import error_of
from tests.support.models import model
from tests.support.sockets import connect, one_answer, parsed, until_closed
from tests.support.terminal import Typed

SETTINGS = """
[chains]
transcribe = ["hearer"]
speak = ["voice"]

[tools]
web_fetch_allow_hosts = ["127.0.0.1"]

[attachments]
max_file_mb = 0.05
max_message_mb = 0.08
text_chars = 1000
"""

NDJSON = {"Content-Type": "application/x-ndjson"}
server, gateway, api = module_gateway("attachments", lambda s: (
    model("eyes", s.openai_base_url, "eyes-model", vision=True)
    + model("hearer", s.openai_base_url, "hear-model")
    + model("voice", s.openai_base_url, "tts-model") + SETTINGS))


@pytest.fixture(autouse=True)
def answers(server: ScriptedModelServer) -> None:
    server.reset()
    server.default = Reply(text="I looked.")
    server.transcriptions.clear()
    server.spoken.clear()
    server.transcript = "Remember to water the tomatoes."


WAV = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00" + bytes(64)


def png(colour: str = "red", size: tuple[int, int] = (8, 8)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "PNG")
    return out.getvalue()


def upload(api: Api, key: str, data: bytes, name: str = "photo.png") -> httpx.Response:
    return api.http.post(f"/api/sessions/{key}/attachments", params={"name": name},
                         content=data)


def sent(api: Api, key: str, ids: list[str], text: str = "what is this?",
         **extra: Any) -> dict[str, Any]:
    answer = api.http.post(f"/api/sessions/{key}/messages",
                           json={"text": text, "attachments": ids, **extra})
    assert answer.status_code == 202, answer.text
    return dict(answer.json())


def seen(request: Any) -> int:
    """How many image parts a model call was sent."""
    return sum(1 for m in request.messages if isinstance(m.get("content"), list)
               for part in m["content"] if part.get("type") == "image_url")


def user_content(server: ScriptedModelServer) -> Any:
    return [m for m in server.requests[-1].messages if m["role"] == "user"][-1]["content"]


def folder(gateway: Gateway, key: str) -> Path:
    return gateway.home / "sessions" / key / "attachments"


def test_an_image_reaches_a_model_with_vision_as_an_image_part(
        api: Api, server: ScriptedModelServer, gateway: Gateway) -> None:
    key = api.new_chat(model="eyes")
    image = png()
    made = upload(api, key, image)
    assert made.status_code == 201, made.text
    held = made.json()
    assert (held["type"], held["size"], held["sent"]) == ("image/png", len(image), False)
    server.responder = lambda request: Reply(text=f"I saw {seen(request)} image(s).")
    run = sent(api, key, [held["id"]])
    assert api.wait(run["run_id"])["status"] == "complete"
    assert [m["text"] for m in api.messages(key) if m["kind"] == "assistant"] == [
        "I saw 1 image(s)."]  # the model answered with what it saw
    parts = user_content(server)
    assert parts[0] == {"type": "text", "text": "what is this?"}
    assert parts[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(
        image).decode()
    [message] = [m for m in api.messages(key) if m["kind"] == "user"]
    assert [a["name"] for a in message["meta"]["attachments"]] == ["photo.png"]
    [listed] = api.http.get(f"/api/sessions/{key}/attachments").json()["attachments"]
    assert listed["sent"] and listed["index"] == message["index"]
    assert (folder(gateway, key) / held["sha256"]).read_bytes() == image


def test_a_model_without_vision_is_told_and_the_chat_says_so(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    held = upload(api, key, png("blue")).json()
    run = sent(api, key, [held["id"]])
    assert api.wait(run["run_id"])["status"] == "complete"
    content = user_content(server)
    assert isinstance(content, str) and "cannot see images" in content
    notices = [m["text"] for m in api.messages(key) if m["kind"] == "notice"]
    assert any("cannot see images" in n and "photo.png" in n for n in notices), notices


def test_a_text_file_is_read_as_text_cut_to_its_budget(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    short = upload(api, key, b"The meeting is on Tuesday.\n", "notes.txt").json()
    long = upload(api, key, ("word " * 600).encode(), "long.txt").json()
    assert short["type"] == "text/plain"
    run = sent(api, key, [short["id"], long["id"]], text="")
    assert api.wait(run["run_id"])["status"] == "complete"
    content = user_content(server)
    assert "The meeting is on Tuesday." in content
    assert "long.txt" in content and "its first 1,000 characters" in content
    notices = [m["text"] for m in api.messages(key) if m["kind"] == "notice"]
    assert notices == ["Read in part: long.txt (its first 1,000 characters). The agent can "
                       "read on with open_attachment."]


def test_a_pdf_is_read_as_text(api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    held = upload(api, key, pdf("Quarterly figures rose"), "report.pdf").json()
    assert held["type"] == "application/pdf"
    run = sent(api, key, [held["id"]])
    assert api.wait(run["run_id"])["status"] == "complete"
    assert "Quarterly figures rose" in user_content(server)


def test_what_is_refused_leaves_nothing_behind(api: Api, gateway: Gateway) -> None:
    key = api.new_chat()
    error_of(upload(api, key, b"x" * 60_000, "big.txt"), 413, "attachment_too_large",
             "nothing of it was kept")
    error_of(upload(api, key, b"\x89PNG\r\n\x1a\n" + b"not really an image" * 10), 415,
             "attachment_unreadable")
    error_of(upload(api, key, png_claiming(8_000, 8_000)), 413, "attachment_too_large",
             "8000 x 8000 pixels")  # past Hearth's limit
    error_of(upload(api, key, png_claiming(50_000, 50_000)), 413, "attachment_too_large",
             "far larger when opened")  # past Pillow's own
    error_of(upload(api, key, b""), 422, "empty_attachment")
    kept = folder(gateway, key)
    assert not kept.exists() or list(kept.iterdir()) == []
    assert api.http.get(f"/api/sessions/{key}/attachments").json()["attachments"] == []


def test_names_are_cleaned_and_bytes_kept_once(api: Api, gateway: Gateway) -> None:
    key = api.new_chat()
    first = upload(api, key, b"same bytes", "../../etc/pass\x00wd\n.txt").json()
    second = upload(api, key, b"same bytes", "again.txt").json()
    assert first["name"] == "passwd.txt"
    assert first["sha256"] == second["sha256"] and first["id"] != second["id"]
    assert [p.name for p in folder(gateway, key).iterdir()] == [first["sha256"]]


def held_files(api: Api, gateway: Gateway, key: str) -> tuple[list[Any], list[str]]:
    """The chat's attachments as listed, and the files in its folder."""
    kept = folder(gateway, key)
    return (api.http.get(f"/api/sessions/{key}/attachments").json()["attachments"],
            sorted(p.name for p in kept.iterdir()) if kept.exists() else [])


def test_a_file_sent_as_a_form_is_kept_as_the_file(api: Api, gateway: Gateway) -> None:
    """As browsers, `curl -F file=@x.png` and the SDKs send it: the file part's bytes are
    the file, its filename the name (`?name=` still wins). Before: the whole form, its
    boundaries and part headers, was kept as a text file."""
    key = api.new_chat()
    image = png("purple")
    made = api.http.post(f"/api/sessions/{key}/attachments",
                         files={"file": ("x.png", image, "image/png")},
                         data={"purpose": "a field beside the file"})
    assert made.status_code == 201, made.text
    held = made.json()
    assert (held["name"], held["type"], held["size"]) == ("x.png", "image/png", len(image))
    assert held["sha256"] == hashlib.sha256(image).hexdigest()
    got = api.http.get(f"/api/sessions/{key}/attachments/{held['id']}")
    assert got.content == image
    named = api.http.post(f"/api/sessions/{key}/attachments", params={"name": "notes.txt"},
                          files={"upload": ("ignored.bin", b"Tuesday at ten.")}).json()
    assert (named["name"], named["type"]) == ("notes.txt", "text/plain")
    assert (folder(gateway, key) / named["sha256"]).read_bytes() == b"Tuesday at ten."


def test_a_form_that_is_not_one_file_is_refused_and_keeps_nothing(
        api: Api, gateway: Gateway) -> None:
    key = api.new_chat()
    url = f"/api/sessions/{key}/attachments"
    error_of(api.http.post(url, files={"note": (None, "only a field")}), 400,
             "no_file_in_form", "curl -F file=@")
    error_of(api.http.post(url, files=[("a", ("a.txt", b"one")), ("b", ("b.txt", b"two"))]),
             400, "one_file_per_upload")
    error_of(api.http.post(url, files={"file": ("big.txt", b"x" * 60_000)}), 413,
             "attachment_too_large")
    error_of(api.http.post(url, files={"field": (None, "x" * 70_000),
                                       "file": ("a.txt", b"small")}), 413,
             "request_too_large")
    cut = b'--edge\r\nContent-Disposition: form-data; name="f"; filename="a.txt"\r\n\r\nhalf'
    error_of(api.http.post(url, content=cut,
                           headers={"Content-Type": "multipart/form-data; boundary=edge"}),
             400, "invalid_form", "closing boundary")
    error_of(api.http.post(url, content=b"x", headers={"Content-Type": "multipart/form-data"}),
             400, "invalid_form", "no boundary")
    error_of(api.http.post(url, content=b"--edge--\r\n",
                           headers={"Content-Type": "multipart/mixed; boundary=edge"}),
             415, "unsupported_media_type")
    assert held_files(api, gateway, key) == ([], [])


def test_a_refusal_before_the_body_ends_closes_its_connection(
        api: Api, gateway: Gateway) -> None:
    """An upload refused before its body's end (here: the form's second file, its headers
    sent and the rest not yet) ends its connection, and the answer says so. Before, the
    connection stayed open: a client that kept it for its next request got a reset
    (`ReadError`) instead of an answer. A kept upload leaves the connection open."""
    key = api.new_chat()
    head = (b'--edge\r\nContent-Disposition: form-data; name="a"; filename="a.txt"\r\n\r\n'
            b'one\r\n--edge\r\nContent-Disposition: form-data; name="b"; filename="b.txt"'
            b"\r\n\r\n")
    sock = connect(gateway.port)
    sock.sendall(f"POST /api/sessions/{key}/attachments HTTP/1.1\r\nHost: x\r\n"
                 f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(head) + 9000}\r\n"
                 "Content-Type: multipart/form-data; boundary=edge\r\n\r\n".encode() + head)
    answer = parsed(one_answer(sock))
    assert (answer.status, answer.json()["error"]["code"]) == (400, "one_file_per_upload")
    assert answer.headers["connection"] == "close"
    until_closed(sock, within=5)
    unread = api.http.post(f"/api/sessions/{key}/attachments", content=b"--edge--\r\n",
                           headers={"Content-Type": "multipart/mixed; boundary=edge"})
    assert (unread.status_code, unread.headers.get("connection")) == (415, "close")
    kept = upload(api, key, b"hello", "a.txt")
    assert kept.status_code == 201 and kept.headers.get("connection") != "close"


def test_an_upload_is_sent_once_and_only_by_its_own_chat(api: Api) -> None:
    key, other = api.new_chat(), api.new_chat()
    held = upload(api, key, b"hello", "a.txt").json()
    refused = api.http.post(f"/api/sessions/{other}/messages",
                            json={"text": "mine?", "attachments": [held["id"]]})
    error_of(refused, 404, "attachment_not_found")
    first = sent(api, key, [held["id"]], client_message_id="m-1")
    again = sent(api, key, [held["id"]], client_message_id="m-1")
    assert again["duplicate"] and again["run_id"] == first["run_id"]
    reused = api.http.post(f"/api/sessions/{key}/messages",
                           json={"text": "twice", "attachments": [held["id"]]})
    assert reused.status_code == 404
    api.wait(first["run_id"])


def test_a_message_may_not_send_more_than_its_limit(api: Api) -> None:
    key = api.new_chat()
    ids = [upload(api, key, bytes([n]) * 45_000, f"{n}.bin").json()["id"] for n in (1, 2)]
    answer = api.http.post(f"/api/sessions/{key}/messages", json={"text": "both",
                                                                   "attachments": ids})
    error_of(answer, 413, "attachments_too_large")
    assert [m for m in api.messages(key) if m["kind"] == "user"] == []


def test_a_download_is_served_as_a_file_never_as_a_page(api: Api) -> None:
    key = api.new_chat()
    held = upload(api, key, b"<script>alert(1)</script>", "page.html").json()
    assert held["type"] == "text/plain"
    got = api.http.get(f"/api/sessions/{key}/attachments/{held['id']}")
    assert got.status_code == 200 and got.content == b"<script>alert(1)</script>"
    assert got.headers["content-type"].startswith("text/plain")
    assert got.headers["content-disposition"].startswith("attachment;")
    assert got.headers["content-security-policy"].startswith("sandbox")  # and the app's own
    missing = api.http.get(f"/api/sessions/{key}/attachments/att_nothing")
    assert missing.status_code == 404


def test_deleting_the_chat_leaves_no_byte_of_its_files(api: Api, gateway: Gateway) -> None:
    key = api.new_chat()
    held = upload(api, key, png("green")).json()
    api.wait(sent(api, key, [held["id"]])["run_id"])
    assert folder(gateway, key).exists()
    assert api.http.delete(f"/api/sessions/{key}").status_code == 200
    assert not (gateway.home / "sessions" / key).exists()


def png_claiming(width: int, height: int) -> bytes:
    """A small PNG whose header claims `width` x `height` pixels (a decompression bomb)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def pdf(words: str) -> bytes:
    """A one-page PDF saying `words` in Helvetica."""
    stream = f"BT /F1 24 Tf 72 720 Td ({words}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    table = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, table)
    return bytes(out)


@pytest.fixture
def picture_server() -> Iterator[str]:
    """A web server on this machine answering /garden.png (allowed by the config above)."""
    image = png("seagreen")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200 if self.path == "/garden.png" else 404)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(image)))
            self.end_headers()
            self.wfile.write(image)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server_ = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server_.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server_.server_address[1]}"
    server_.shutdown()


def v1(api: Api, content: list[dict[str, Any]], **headers: str) -> httpx.Response:
    return api.http.post("/v1/chat/completions", headers=headers, json={
        "model": "eyes", "messages": [{"role": "user", "content": content}]})


def test_v1_image_parts_reach_the_model_and_a_stateless_chat_keeps_none(
        api: Api, server: ScriptedModelServer, gateway: Gateway, picture_server: str) -> None:
    inline = png("tomato")
    before = chat_folders(gateway)
    answer = v1(api, [
        {"type": "text", "text": "Compare these."},
        {"type": "image_url", "image_url": {
            "url": "data:image/png;base64," + base64.b64encode(inline).decode()}},
        {"type": "image_url", "image_url": {"url": f"{picture_server}/garden.png"}}])
    assert answer.status_code == 200, answer.text
    parts = user_content(server)
    assert parts[0] == {"type": "text", "text": "Compare these."}
    urls = [p["image_url"]["url"] for p in parts[1:]]
    assert urls == ["data:image/png;base64," + base64.b64encode(image).decode()
                    for image in (inline, png("seagreen"))]
    assert chat_folders(gateway) == before  # the Temporary chat is gone, its files with it


def test_v1_files_are_kept_in_a_named_chat(api: Api, server: ScriptedModelServer) -> None:
    answer = v1(api, [
        {"type": "text", "text": "Read the notes and hear this."},
        {"type": "file", "file": {"filename": "notes.txt", "file_data":
                                  "data:text/plain;base64," + base64.b64encode(
                                      b"Buy seeds on Friday.").decode()}},
        {"type": "input_audio", "input_audio": {"data": base64.b64encode(
            b"RIFF\x24\x00\x00\x00WAVEfmt ").decode(), "format": "wav"}}],
        **{"X-Hearth-Session": "garden-notes"})
    assert answer.status_code == 200, answer.text
    content = user_content(server)
    assert "Buy seeds on Friday." in content and "voice note audio-2.wav says" in content
    key = answer.headers["X-Hearth-Session"]
    listed = api.http.get(f"/api/sessions/{key}/attachments").json()["attachments"]
    assert [(a["name"], a["type"], a["sent"]) for a in listed] == [
        ("notes.txt", "text/plain", True), ("audio-2.wav", "audio/wav", True)]


def test_a_v1_image_that_cannot_be_fetched_leaves_nothing(
        api: Api, gateway: Gateway, picture_server: str) -> None:
    before = chat_folders(gateway)
    answer = v1(api, [{"type": "image_url", "image_url": {
        "url": f"{picture_server}/missing.png"}}])
    assert answer.status_code == 400
    assert "HTTP 404" in answer.json()["error"]["message"]
    assert chat_folders(gateway) == before


def chat_folders(gateway: Gateway) -> set[str]:
    folder = gateway.home / "sessions"
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def test_export_then_import_keeps_the_files_byte_for_byte(
        api: Api, server: ScriptedModelServer, gateway: Gateway) -> None:
    key = api.new_chat(model="eyes")
    image, notes = png("orange"), b"Seeds: carrots, beans.\n"
    ids = [upload(api, key, image).json()["id"],
           upload(api, key, notes, "seeds.txt").json()["id"]]
    api.wait(sent(api, key, ids)["run_id"])
    exported = api.http.get(f"/api/sessions/{key}/export", params={"format": "jsonl"})
    assert exported.status_code == 200
    lines = [json.loads(line) for line in exported.content.splitlines()]
    assert lines[1]["files"] == 2
    assert [x["name"] for x in lines if x.get("type") == "file"] == ["photo.png", "seeds.txt"]
    made = api.http.post("/api/import", content=exported.content, headers=NDJSON)
    assert made.status_code == 201, made.text
    copy = made.json()["imported"][0]["key"]
    listed = api.http.get(f"/api/sessions/{copy}/attachments").json()["attachments"]
    assert {a["id"] for a in listed}.isdisjoint(ids)
    assert [api.http.get(f"/api/sessions/{copy}/attachments/{a['id']}").content
            for a in listed] == [image, notes]
    [message] = [m for m in api.messages(copy) if m["kind"] == "user"]
    assert [a["id"] for a in message["meta"]["attachments"]] == [a["id"] for a in listed]
    server.reset()
    api.wait(api.send(copy, "and again?")["run_id"])  # the copy's model reads its files
    history = [m for m in server.requests[-1].messages if m["role"] == "user"]
    assert history[0]["content"][1]["image_url"]["url"].endswith(
        base64.b64encode(image).decode())


def test_an_import_whose_file_was_changed_is_refused_whole(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    held = upload(api, key, b"original words", "a.txt").json()
    api.wait(sent(api, key, [held["id"]])["run_id"])
    exported = api.http.get(f"/api/sessions/{key}/export", params={"format": "jsonl"})
    lines = exported.content.splitlines()
    file = json.loads(lines[-1])
    file["data"] = base64.b64encode(b"changed words!").decode()
    changed = b"\n".join([*lines[:-1], json.dumps(file).encode()]) + b"\n"
    before = len(api.http.get("/api/sessions").json()["sessions"])
    refused = api.http.post("/api/import", content=changed, headers=NDJSON)
    error_of(refused, 422, "import_invalid", "not the file its size and sha256 say")
    assert len(api.http.get("/api/sessions").json()["sessions"]) == before



def test_hearth_chat_attach_sends_a_file_with_the_next_message(
        gateway: Gateway, server: ScriptedModelServer, tmp_path: Path) -> None:
    notes = tmp_path / "shopping list.txt"
    notes.write_text("Buy seeds and twine.\n")
    screen = Typed("/attach", f"/attach {tmp_path / 'nothing.txt'}", f"/attach {notes}",
                   "What do I need to buy?", "and now?")
    client = GatewayApi(gateway.url, TOKEN)
    try:
        assert Repl(client, screen, "attach-terminal").run() == 0
    finally:
        client.close()
    said = screen.err.getvalue()
    assert "Give the file's path" in said and "There is no file at" in said
    assert "Attached shopping list.txt (text/plain, 21 bytes)" in said
    first, second = [[m["content"] for m in r.messages if m["role"] == "user"]
                     for r in server.requests[-2:]]
    assert "Buy seeds and twine." in first[-1]
    assert second[-1] == "and now?" and "Buy seeds and twine." in second[0]  # sent once
    users = [m for m in gateway.client().messages("attach-terminal") if m["kind"] == "user"]
    assert [len(m["meta"].get("attachments", [])) for m in users] == [1, 0]


def test_a_voice_note_is_heard_once_and_its_words_are_the_message(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    note = upload(api, key, WAV, "note.wav").json()
    assert note["type"] == "audio/wav"
    api.wait(sent(api, key, [note["id"]], text="")["run_id"])  # a voice note alone
    assert "the voice note note.wav says:]\nRemember to water the tomatoes." in \
        user_content(server)
    assert server.transcriptions == [("hear-model", "note.wav", WAV)]
    api.wait(api.send(key, "and then?")["run_id"])  # read again, never heard again
    assert len(server.transcriptions) == 1
    [listed] = api.http.get(f"/api/sessions/{key}/attachments").json()["attachments"]
    assert listed["transcript"] == "Remember to water the tomatoes."
    page = api.http.get(f"/chats/{key}").text  # the chat's page shows what was heard
    assert '<p class="heard"><span class="visually-hidden">Heard: </span>Remember to water ' \
        'the tomatoes.</p>' in page and "<audio controls" in page
    assert [m for m in api.messages(key) if m["kind"] == "notice"] == []  # a kept chat


def test_a_restricted_chats_voice_note_says_which_model_heard_it(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat(memory_mode="incognito")
    note = upload(api, key, WAV, "secret.wav").json()
    run = sent(api, key, [note["id"]], text="")
    assert api.wait(run["run_id"])["status"] == "complete"
    notices = [m["text"] for m in api.messages(key) if m["kind"] == "notice"]
    assert notices == ["The voice note secret.wav was transcribed by hearer, the model set "
                       "up to hear voice notes; nothing else of this chat was sent to it."]
    assert {c.model for c in server.every_call()} == {"fake-model"}  # the turn's own model


def test_a_voice_note_no_model_could_hear_is_said_so(
        api: Api, server: ScriptedModelServer) -> None:
    server.transcript = None  # the transcription server fails
    key = api.new_chat()
    note = upload(api, key, WAV, "lost.wav").json()
    api.wait(sent(api, key, [note["id"]], text="")["run_id"])
    assert "no transcription model could hear it" in user_content(server)


def test_read_aloud_speaks_a_message_with_the_speak_chains_model(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat(memory_mode="incognito")
    server.default = Reply(text="Water them at dawn.")
    run = api.send(key, "When should I water?")
    api.wait(run["run_id"])
    [answer] = [m for m in api.messages(key) if m["kind"] == "assistant"]
    spoken = api.http.post(f"/api/sessions/{key}/speech", json={"index": answer["index"]})
    assert spoken.status_code == 200, spoken.text
    assert spoken.headers["content-type"] == "audio/mpeg" and spoken.content == SPOKEN
    assert spoken.headers["x-hearth-spoken-by"] == "voice"
    assert server.spoken == [("tts-model", "Water them at dawn.")]
    error_of(api.http.post(f"/api/sessions/{key}/speech", json={"index": 999}), 404,
             "message_not_found")
    error_of(api.http.post(f"/api/sessions/{key}/speech", json={"index": "x"}), 422)


def test_the_agent_opens_a_sent_file_by_its_name(api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    held = upload(api, key, ("line " * 400).encode() + b"THE END", "long.txt").json()
    api.wait(sent(api, key, [held["id"]])["run_id"])
    server.push(Reply(tool_calls=[Call("open_attachment", {"name": "LONG.txt", "offset": 1990}),
                                  Call("open_attachment", {"name": "../etc/passwd"})]),
                Reply(text="Read it."))
    api.wait(api.send(key, "read the end of it")["run_id"])
    results = [m for m in api.messages(key) if m["kind"] == "tool_result"]
    assert results[0]["content"]["output"].endswith("THE END")
    assert "was sent no file called '../etc/passwd'" in results[1]["content"]["output"]
