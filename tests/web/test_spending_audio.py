"""Read aloud and voice notes are priced, recorded and held by the spending limits, as a
turn's model call is: before the call, a limit it would pass refuses it (read aloud: 429
`spending_limit` with the limit's sentence and `Retry-After`, nothing sent; a voice note: the
turn ends `spending_limit`); after it, a row of `model_calls` (purpose `speech` or
`transcription`) priced per character spoken or per minute heard (a model's
`price_speech_per_mchar` / `price_audio_per_minute`, else OpenAI's tts-1 and whisper-1
prices), counted for the account that asked: the owner, or the app. A real gateway (in this
process, over HTTP) against the scripted model server's audio endpoints."""

from __future__ import annotations

import io
import wave
from collections.abc import Callable
from typing import Any

import pytest

from hearth.models import pricing
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.apps import app_token
from tests.support.http import error_of
from tests.support.polling import until
from tests.support.store import db_rows

ANSWER = "Water the tomatoes at dawn, not at noon."  # 40 characters read aloud


def _audio_models(server: ScriptedModelServer, speech_price: str = "") -> str:
    """A speak and a transcribe model on the scripted server (the chat model, `fake`, has
    no price: turns are never held), learning left for later."""
    base = (f'provider = "openai"\nbase_url = "{server.openai_base_url}"\n'
            'api_key = "sk-test"\n')
    return (f'[[models]]\nid = "voice"\n{base}model = "tts-model"\n{speech_price}\n'
            f'[[models]]\nid = "hearer"\n{base}model = "hear-model"\n\n'
            '[chains]\nchat = ["fake"]\nspeak = ["voice"]\ntranscribe = ["hearer"]\n\n'
            '[learning]\nevery_turns = 1000\n\n')


def _answered(api: Api, server: ScriptedModelServer, key: str) -> int:
    """The index of the agent's answer to one turn in chat `key`."""
    server.default = Reply(text=ANSWER)
    ended = api.wait(api.send(key, "When should I water?")["run_id"])
    assert ended["status"] == "complete", ended
    return int([m for m in api.messages(key) if m["kind"] == "assistant"][-1]["index"])


def _speech(api: Api, key: str, index: int) -> Any:
    return api.http.post(f"/api/sessions/{key}/speech", json={"index": index})


def _calls(gateway: Gateway, purpose: str, count: int) -> list[tuple[Any, ...]]:
    """The recorded calls for `purpose` (written soon after each call), once `count` are."""
    sql = ("SELECT model_id, outcome, cost_usd, app, estimated FROM model_calls "
           "WHERE purpose = ? ORDER BY id")
    until(lambda: len(db_rows(gateway, sql, purpose)) >= count, what=f"{count} {purpose} rows")
    return db_rows(gateway, sql, purpose)


def _wav(seconds: float, rate: int = 8000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as written:
        written.setnchannels(1)
        written.setsampwidth(2)
        written.setframerate(rate)
        written.writeframes(bytes(2 * round(seconds * rate)))
    return out.getvalue()


def test_read_aloud_past_a_zero_daily_limit_is_a_429_with_the_limits_sentence(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(_audio_models(model_server) + "[limits]\nusd_per_day = 0\n")
    api = gateway.client()
    key = api.new_chat()
    index = _answered(api, model_server, key)  # the chat's model has no price: it answers
    model_server.spoken.clear()
    refused = _speech(api, key, index)
    sentence = error_of(refused, 429, "spending_limit",
                        "The daily spending limit overall ($0.00) is reached: $0.00 spent "
                        "today, and this call could cost up to $0.0006", "It resets at")
    assert "[limits]" in sentence
    assert int(refused.headers["Retry-After"]) > 0
    assert model_server.spoken == []  # nothing was sent to the speak model


def test_an_app_reading_aloud_is_stopped_at_its_limit_and_the_owner_is_not(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    """An app with read_chats repeats read aloud: each uncached call is charged to the app
    ($30 per million characters here: $0.0012 a read), so its $0.003 a day allows two."""
    gateway = gateway_factory(_audio_models(model_server, "price_speech_per_mchar = 30.0\n")
                              + "[limits.apps.reader]\nusd_per_day = 0.003\n")
    api = gateway.client()
    reader = gateway.client(app_token(api, "reader", "send_messages", "read_chats"))
    key = reader.new_chat()
    index = _answered(reader, model_server, key)
    model_server.spoken.clear()
    answers = [_speech(reader, key, index) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 429, 429]
    error_of(answers[2], 429, "spending_limit",
             'The daily spending limit for the app "reader" ($0.003) is reached: $0.0024 '
             "spent today, and this call could cost up to $0.0012")
    assert len(model_server.spoken) == 2  # the refused reads never reached the model
    assert _speech(api, key, index).status_code == 200  # the owner's own read: not the app's
    rows = _calls(gateway, "speech", 3)
    cost = len(ANSWER) * 30.0 / 1e6
    assert [(r[0], r[1], r[3]) for r in rows] == [("voice", "ok", "reader")] * 2 + [
        ("voice", "ok", None)]
    assert [r[2] for r in rows] == pytest.approx([cost] * 3)
    usage = api.http.get("/api/usage").json()["purposes"]
    speech = next(p for p in usage if p["purpose"] == "speech")
    assert speech["calls"] == 3 and speech["cost_usd"] == pytest.approx(3 * cost)


@pytest.mark.parametrize("reported", [4.5, None], ids=["reported", "measured"])
def test_a_voice_note_is_recorded_and_priced_by_the_seconds_heard(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer,
        reported: float | None) -> None:
    """Priced by the seconds the provider says it billed, or, when it says none, by the
    file's own length (3 s of WAV), said to be an estimate."""
    gateway = gateway_factory(_audio_models(model_server))
    model_server.transcript_seconds = reported
    api = gateway.client()
    key = api.new_chat()
    note = api.http.post(f"/api/sessions/{key}/attachments", params={"name": "note.wav"},
                         content=_wav(3.0))
    assert note.status_code == 201, note.text
    sent = api.send(key, "", attachments=[note.json()["id"]])
    assert api.wait(sent["run_id"])["status"] == "complete"
    [row] = _calls(gateway, "transcription", 1)
    seconds = 3.0 if reported is None else reported
    assert row[:2] == ("hearer", "ok") and row[3] is None
    assert row[2] == pytest.approx(seconds / 60 * pricing.AUDIO_PER_MINUTE)
    assert bool(row[4]) is (reported is None)


def test_a_voice_note_past_a_limit_is_not_sent_and_the_turn_ends_spending_limit(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(_audio_models(model_server) + "[limits]\nusd_per_day = 0\n")
    api = gateway.client()
    key = api.new_chat()
    note = api.http.post(f"/api/sessions/{key}/attachments", params={"name": "note.wav"},
                         content=_wav(2.0))
    assert note.status_code == 201, note.text
    model_server.transcriptions.clear()
    ended = api.wait(api.send(key, "", attachments=[note.json()["id"]])["run_id"])
    assert ended["ending"] == "spending_limit", ended
    assert "The daily spending limit overall ($0.00) is reached" in ended["sentence"]
    assert model_server.transcriptions == []  # the audio never left
