"""What the model reads of the files a message sent, made just before each model call.

The context holds each user message's files as names (`Message.attached`, from its
`meta.attachments`); here, off the event loop, they become what the model reads:
- an image, an image part (its bytes in base64) for a model whose config says `vision = true`;
  for one without, a line in the message saying an image was sent and not shown, and, for the
  turn's own message, a notice in the chat saying so (never dropped in silence);
- a text file or a PDF, its text, cut to `[attachments] text_chars` with a line saying how
  much was read;
- an audio file, its words (`engine/turn/hearing.py`: heard once by the `transcribe`
  chain's model and kept on its row), or a line saying none could be heard;
- anything else (an archive), a line naming it.
What a message's files read as is kept for the turn alone (`Turn.files_read`: a turn's
later model calls read nothing again) and let go with it, so a chat's images never sit in
the context cache. The files are the chat's own (its folder), so a restricted
chat's reach only the model its turn runs on (the call guard holds that rule for every call).
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, replace
from pathlib import Path

from hearth.engine.turn import hearing, writes
from hearth.engine.turn.turn_state import Turn
from hearth.engine.views import file_size
from hearth.models.types import Attached, ImagePart, Message
from hearth.sessions.attachments import read_text

TEXT_TYPES = ("text/plain", "application/pdf")


@dataclass(frozen=True)
class Reading:
    """What the resolution needs: where the bytes are, whether the model sees images, the
    text budget per file, and the audio files' transcripts (by attachment id)."""

    folder: Path
    vision: bool
    budget: int
    heard: dict[str, str | None]


async def for_model(turn: Turn, messages: list[Message]) -> list[Message]:
    """`messages` with their files read in (the same list when none sent any)."""
    if turn.attachments_dir is None or not any(m.attached for m in messages):
        return messages
    vision = bool(turn.model_config and turn.model_config.vision)
    todo = [m for m in messages if m.attached and (vision, m) not in turn.files_read]
    if todo:
        await _read_in(turn, todo, vision)
    return [turn.files_read[(vision, m)] if m.attached else m for m in messages]


async def _read_in(turn: Turn, todo: list[Message], vision: bool) -> None:
    """Read the files of `todo` into the turn's memo (each message once a turn, for the
    model it runs on), saying in the chat what its own message's files lost."""
    assert turn.attachments_dir is not None
    heard = await hearing.heard(turn, [f for m in todo for f in m.attached
                                       if f.content_type.startswith("audio/") and f.id])
    reading = Reading(turn.attachments_dir, vision, turn.config.attachments.text_chars, heard)
    resolved, unseen, cut = await asyncio.to_thread(_resolve, todo, reading,
                                                    turn.run.user_event_seq)
    turn.files_read.update(((vision, m), r) for m, r in zip(todo, resolved, strict=True))
    if cut and not turn.notes.get("files_cut"):
        turn.notes["files_cut"] = ", ".join(cut)
        await writes.append(turn, "notice", {"text": (
            f"Read in part: {', '.join(cut)}. The agent can read on with open_attachment.")},
            meta={"files_cut": cut})
    if unseen and not turn.notes.get("images_unseen"):
        turn.notes["images_unseen"] = ", ".join(unseen)
        await writes.append(turn, "notice", {"text": (
            f"{turn.provider.model_id} cannot see images, so {', '.join(unseen)} "
            f"{'was' if len(unseen) == 1 else 'were'} not shown to it. Pick a model whose "
            "config says vision = true to have images read.")},
            meta={"images_unseen": unseen})


def _resolve(messages: list[Message], reading: Reading, own_seq: int | None
             ) -> tuple[list[Message], list[str], list[str]]:
    """Each message's files read in; the names of the turn's own images the model cannot
    see, and of its own files read in part (with how much). Blocking: run in a thread."""
    out: list[Message] = []
    unseen: list[str] = []
    cut: list[str] = []
    for message in messages:
        if not message.attached:
            out.append(message)
            continue
        lines: list[str] = []
        images: list[ImagePart] = []
        for file in message.attached:
            if file.content_type.startswith("image/"):
                if reading.vision:
                    try:
                        images.append(_image(reading.folder, file))
                    except OSError:  # gone from the folder (a chat imported without it)
                        lines.append(f"[Hearth: the image {file.name} could not be read.]")
                    continue
                lines.append(f"[Hearth: the image {file.name} was sent with this message; "
                             "this model cannot see images, so it is not shown.]")
                if file.seq == own_seq:
                    unseen.append(file.name)
            elif file.content_type in TEXT_TYPES:
                line, read = _text(reading, file)
                lines.append(line)
                if read is not None and file.seq == own_seq:
                    cut.append(f"{file.name} (its first {read:,} characters)")
            elif file.content_type.startswith("audio/"):
                lines.append(_heard(reading, file))
            else:
                lines.append(f"[Hearth: the file {file.name} ({file.content_type}, "
                             f"{file_size(file.size)}) was sent with this message.]")
        text = "\n\n".join([message.text, *lines]) if message.text else "\n\n".join(lines)
        out.append(replace(message, text=text, images=tuple(images), attached=()))
    return out, unseen, cut


def _image(folder: Path, file: Attached) -> ImagePart:
    data = (folder / file.sha256).read_bytes()
    return ImagePart(file.content_type, base64.b64encode(data).decode("ascii"))


def _text(reading: Reading, file: Attached) -> tuple[str, int | None]:
    """The file's text as a line, and how many characters were read when it was cut."""
    try:
        text, whole = read_text(reading.folder / file.sha256, file.content_type,
                                reading.budget)
    except OSError:
        return f"[Hearth: the file {file.name} could not be read.]", None
    said = f"[Hearth: the file {file.name} ({file_size(file.size)})"
    if not text:
        return f"{said} holds no text Hearth could read.]", None
    if whole:
        return f"{said}:]\n{text}", None
    return (f"{said}, its first {len(text):,} characters (open_attachment reads on):]\n{text}",
            len(text))


def _heard(reading: Reading, file: Attached) -> str:
    """A voice note as the model reads it: its words, or why none were heard."""
    words = reading.heard.get(file.id)
    if words is None:
        return (f"[Hearth: the audio file {file.name} was sent with this message; no "
                "transcription model could hear it ([chains] transcribe), so its words are "
                "not here.]")
    return f"[Hearth: the voice note {file.name} says:]\n{words}" if words.strip() else \
        f"[Hearth: the voice note {file.name} holds no words.]"

