"""Attachments' bytes: kept in the chat's own folder, content-addressed, checked on the way in.

A file sent to a chat is streamed to disk as it arrives (`Receiving`: never held whole in
memory), hashed on the way, and refused past the size limit (nothing of it kept). Its type is
sniffed from its first bytes, never taken from its name or the sender's word. An image must
decode as what its bytes say, within `MAX_PIXELS` (a decompression bomb is refused with a
sentence). The bytes are synced and renamed to `<chat>/attachments/<sha256>`, so a file sent
twice is kept once; the name the sender gave is cleaned (`clean_name`: no path separator or
control character reaches the disk or a page) and kept on the row (`store/attachments.py`).
The chat's folder goes with the chat (`sessions/forget.py`), and its attachments with it.

`read_text` gives the model a text file or a PDF as text, cut to a budget.
"""

from __future__ import annotations

import hashlib
import io
import os
import unicodedata
import uuid
from dataclasses import dataclass
from pathlib import Path

from hearth.atomic import sync_folder
from hearth.errors import Refusal
from hearth.sessions.folders import chat_folder

FOLDER = "attachments"
MAX_PIXELS = 40_000_000  # an image larger than this when decoded is refused (a bomb)
SNIFF_BYTES = 4096
NAME_CHARS = 200
IMAGE_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif",
               "WEBP": "image/webp"}


class AttachmentRefused(Refusal):
    """A file the gateway will not keep, and why."""


def folder_of(chats_dir: Path, key: str) -> Path:
    return chat_folder(chats_dir, key) / FOLDER


def path_of(chats_dir: Path, key: str, sha256: str) -> Path:
    if len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256):
        raise ValueError(f"{sha256!r} is not a SHA-256")
    return folder_of(chats_dir, key) / sha256


def clean_name(name: str | None) -> str:
    """The sender's name for a file, safe to keep and show: its last path part, without
    control characters, at most NAME_CHARS long ("file" when nothing is left)."""
    text = unicodedata.normalize("NFC", name or "")
    text = text.replace("\\", "/").rsplit("/", 1)[-1]
    text = "".join(c for c in text if unicodedata.category(c)[0] != "C").strip().strip(".")
    if len(text) > NAME_CHARS:
        stem, dot, ext = text.rpartition(".")
        text = (stem[:NAME_CHARS - len(ext) - 1] + dot + ext) if dot and len(ext) < 10 \
            else text[:NAME_CHARS]
    return text or "file"


def sniff(head: bytes) -> str:
    """The content type the first bytes say (application/octet-stream when none)."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] in (b"WEBP", b"WAVE"):
        return "image/webp" if head[8:12] == b"WEBP" else "audio/wav"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"ID3") or head[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "audio/mpeg"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "audio/webm"  # Matroska: what a browser's MediaRecorder records
    if head[4:8] == b"ftyp":
        return "audio/mp4" if head[8:11] == b"M4A" else "video/mp4"
    if head.startswith(b"PK\x03\x04"):
        return "application/zip"
    return "text/plain" if _is_text(head) else "application/octet-stream"


def _is_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as cut:
        return cut.start >= len(head) - 3  # only a character cut at the sniff's end
    return True


@dataclass(frozen=True)
class Kept:
    """A file kept: its hash, size and sniffed type."""

    sha256: str
    size: int
    content_type: str


class Receiving:
    """One file streamed to disk (`add` each chunk, then `keep` or `discard`); blocking:
    call it from a thread."""

    def __init__(self, folder: Path, max_bytes: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.max_bytes = max_bytes
        self._temp = folder / f".incoming-{uuid.uuid4().hex}"
        self._file = open(self._temp, "wb")  # noqa: SIM115 - closed by keep or discard
        self._hash = hashlib.sha256()
        self._head = b""
        self.size = 0

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            self.discard()
            raise too_large(self.max_bytes)
        if len(self._head) < SNIFF_BYTES:
            self._head += chunk[:SNIFF_BYTES - len(self._head)]
        self._hash.update(chunk)
        self._file.write(chunk)

    def keep(self) -> Kept:
        """Check what arrived, sync it and put it in its place (refused: nothing kept)."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        content_type = sniff(self._head)
        try:
            if content_type.startswith("image/"):
                _check_image(self._temp, content_type)
        except AttachmentRefused:
            self.discard()
            raise
        sha256 = self._hash.hexdigest()
        final = self.folder / sha256
        if final.exists():
            self._temp.unlink()
        else:
            self._temp.rename(final)
            sync_folder(self.folder)
        return Kept(sha256, self.size, content_type)

    def discard(self) -> None:
        if not self._file.closed:
            self._file.close()
        self._temp.unlink(missing_ok=True)


def too_large(limit: int) -> AttachmentRefused:
    return AttachmentRefused("attachment_too_large", 413,
                             f"This file is larger than {limit // (1024 * 1024)} MB, the "
                             "most one file may be; nothing of it was kept.")


def _check_image(path: Path, content_type: str) -> None:
    """The image must decode as the type its bytes say, within MAX_PIXELS."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            said = IMAGE_TYPES.get(image.format or "")
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise _bomb(width, height)
            image.verify()
    except Image.DecompressionBombError as error:  # Pillow's own, past twice its limit
        raise AttachmentRefused("attachment_too_large", 413,
                                "This image is far larger when opened than Hearth opens; "
                                "nothing of it was kept.") from error
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise AttachmentRefused("attachment_unreadable", 415,
                                "This file says it is an image but does not open as one; "
                                "nothing of it was kept.") from error
    if said != content_type:
        raise AttachmentRefused("attachment_unreadable", 415,
                                "This image is not what its first bytes say it is; nothing "
                                "of it was kept.")


def _bomb(width: int, height: int) -> AttachmentRefused:
    return AttachmentRefused("attachment_too_large", 413,
                             f"This image is {width} x {height} pixels when opened, more "
                             "than Hearth opens; nothing of it was kept.")


def read_text(path: Path, content_type: str, budget: int) -> tuple[str, bool]:
    """The file's text for the model, at most `budget` characters; whether it was read whole
    (a PDF page by page). Blocking: call it from a thread."""
    if content_type == "application/pdf":
        return _pdf_text(path, budget)
    with open(path, "rb") as file:
        raw = file.read(budget * 4 + 4)
    text = raw.decode("utf-8", errors="replace")
    whole = len(raw) < budget * 4 + 4 and len(text) <= budget
    return text[:budget], whole


def _pdf_text(path: Path, budget: int) -> tuple[str, bool]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(path.read_bytes()))
        parts: list[str] = []
        size = 0
        for page in reader.pages:
            text = page.extract_text() or ""
            parts.append(text)
            size += len(text)
            if size > budget:
                return "\n".join(parts)[:budget], False
        return "\n".join(parts), True
    except (PdfReadError, ValueError, KeyError, OSError):
        return "", False
