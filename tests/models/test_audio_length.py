"""A voice note's seconds read from its bytes (`models.audio.seconds_of`), for the guard to
reserve and, when the provider says none, charge: a WAV's frames, an Ogg Opus stream's last
granule position less its pre-skip, and anything else by its size at a low bitrate (more
seconds, never fewer, than a speech recording lasts)."""

from __future__ import annotations

import io
import struct
import wave

import pytest

from hearth.models import audio


def _ogg_page(granule: int, payload: bytes) -> bytes:
    """One Ogg page (RFC 3533 §6): its header, one segment, `payload`."""
    return (b"OggS" + bytes([0, 0]) + struct.pack("<q", granule) + bytes(12)
            + bytes([1, len(payload)]) + payload)


def test_an_ogg_opus_notes_length_is_its_last_granule_less_the_pre_skip() -> None:
    head = b"OpusHead" + bytes([1, 1]) + struct.pack("<H", 312) + bytes(7)
    note = (_ogg_page(0, head) + _ogg_page(0, b"OpusTags" + bytes(8))
            + _ogg_page(48_000, bytes(60)) + _ogg_page(2 * 48_000 + 312, bytes(60)))
    assert audio.seconds_of(note) == pytest.approx(2.0)


def test_a_wavs_length_is_its_frames_at_its_rate() -> None:
    out = io.BytesIO()
    with wave.open(out, "wb") as written:
        written.setnchannels(2)
        written.setsampwidth(2)
        written.setframerate(16_000)
        written.writeframes(bytes(4 * 24_000))
    assert audio.seconds_of(out.getvalue()) == pytest.approx(1.5)


def test_anything_else_is_estimated_from_its_size_erring_long() -> None:
    mp3 = b"ID3" + bytes(63_997)  # 64 kB: 4 s at 128 kbit/s, reckoned at 16 kbit/s
    assert audio.seconds_of(mp3) == 64_000 / audio.BYTES_PER_SECOND == 32.0
    broken = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(20)  # a header that does not open
    assert audio.seconds_of(broken) == len(broken) / audio.BYTES_PER_SECOND
