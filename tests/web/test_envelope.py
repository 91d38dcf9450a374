"""The sentence a client shows for a gateway's error answer: the envelope's message, else the
start of whatever came back, else the status's reason phrase."""

from __future__ import annotations

import httpx

from hearth.client.envelope import BODY_SHOWN, error_sentence


def test_the_envelopes_message_is_said() -> None:
    answer = httpx.Response(409, json={"error": {"code": "x", "message": "It is busy."}})
    assert error_sentence(answer) == "The gateway answered 409: It is busy."


def test_a_body_that_is_not_the_envelope_is_said_in_part() -> None:
    answer = httpx.Response(502, text="<html>" + "x" * 500)
    said = error_sentence(answer)
    assert said.startswith("The gateway answered 502: <html>")
    assert len(said) == len("The gateway answered 502: ") + BODY_SHOWN


def test_an_empty_body_says_the_reason_phrase() -> None:
    assert error_sentence(httpx.Response(502)) == "The gateway answered 502: Bad Gateway"
    assert error_sentence(httpx.Response(500, json={"error": "flat"})) == \
        'The gateway answered 500: {"error":"flat"}'
