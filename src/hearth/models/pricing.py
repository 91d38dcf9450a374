"""What a model call cost: its tokens at the prices of the model that answered
(`price_in_per_mtok`, `price_out_per_mtok` of its entry). A model with no price, or with only
one of the two, is unpriced: None, never 0.

Audio is priced by what it is billed by: read aloud per character spoken
(`price_speech_per_mchar`, US dollars per million characters), a voice note per minute heard
(`price_audio_per_minute`). A model with neither set is priced as OpenAI prices `tts-1`
(`SPEECH_PER_MCHAR`) and `whisper-1` (`AUDIO_PER_MINUTE`), so read aloud and transcription
are never free unless a price of 0 is set.

The call guard prices each call once, when it ends, and writes the figure on the call's row
(`models.calls`); Usage adds the rows up. Nothing else prices a call.
"""

from __future__ import annotations

from hearth.config import ModelConfig
from hearth.models.types import Usage
from hearth.store.usage import cost_of

SPEECH_PER_MCHAR = 15.0  # OpenAI's tts-1: $15.00 per million characters
AUDIO_PER_MINUTE = 0.006  # OpenAI's whisper-1: $0.006 per minute


def price(model: ModelConfig | None, usage: Usage) -> float | None:
    """US dollars for one call's `usage` at `model`'s prices; None when it has none."""
    if model is None:
        return None
    if usage.chars or usage.seconds:
        return audio_price(model, usage)
    return cost_of(usage.tokens_in, usage.tokens_out, model.price_in_per_mtok,
                   model.price_out_per_mtok)


def audio_price(model: ModelConfig, usage: Usage) -> float:
    """US dollars for the characters `usage` read aloud and the seconds it heard."""
    per_mchar = SPEECH_PER_MCHAR if model.price_speech_per_mchar is None \
        else model.price_speech_per_mchar
    per_minute = AUDIO_PER_MINUTE if model.price_audio_per_minute is None \
        else model.price_audio_per_minute
    return usage.chars * per_mchar / 1_000_000 + usage.seconds / 60 * per_minute
