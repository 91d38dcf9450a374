"""What an audio call is measured by: the seconds of audio a transcription hears.

Owns `Heard` (a transcription's words and the seconds of audio its provider says it billed;
None when it said nothing) and `seconds_of` (an audio file's length read from its bytes: WAV's
frames and Ogg Opus's last granule position, exact; anything else estimated from its size at
`BYTES_PER_SECOND`, erring towards more). The guard reserves a transcription's cost from it
before the call, and charges it when the provider reports no length.
"""

from __future__ import annotations

import io
import struct
import wave
from dataclasses import dataclass

BYTES_PER_SECOND = 2000  # 16 kbit/s, the low end of speech codecs: a size's seconds, or more
OPUS_RATE = 48_000  # an Ogg Opus stream's granule positions count 48 kHz samples


@dataclass(frozen=True)
class Heard:
    """A transcription: its words, and the seconds its provider billed (None: not said)."""

    text: str
    seconds: float | None = None


def seconds_of(data: bytes) -> float:
    """How long the audio in `data` lasts, in seconds (estimated when its format is not one
    read here)."""
    found = _wav_seconds(data) if data[:4] == b"RIFF" else None
    if found is None and data[:4] == b"OggS":
        found = _opus_seconds(data)
    return found if found is not None else len(data) / BYTES_PER_SECOND


def _wav_seconds(data: bytes) -> float | None:
    try:
        with wave.open(io.BytesIO(data)) as read:
            frames, rate = read.getnframes(), read.getframerate()
    except (wave.Error, EOFError, struct.error):
        return None
    return frames / rate if rate > 0 else None


def _opus_seconds(data: bytes) -> float | None:
    """The last Ogg page's granule position less the pre-skip, at 48 kHz (RFC 7845 §4)."""
    head = data.find(b"OpusHead", 0, 200)
    last = data.rfind(b"OggS")
    if head < 0 or last < 0 or len(data) < last + 14 or len(data) < head + 12:
        return None
    granule = int.from_bytes(data[last + 6:last + 14], "little", signed=True)
    pre_skip = int.from_bytes(data[head + 10:head + 12], "little")
    return (granule - pre_skip) / OPUS_RATE if granule > pre_skip else None
