"""The Slack channel's doors: `POST /channels/slack/events` (the Events API) and
`POST /channels/slack/actions` (a button pressed: Slack's interactivity requests).

No bearer token: each request is authenticated by Slack's signature alone
(`X-Slack-Request-Timestamp`, `X-Slack-Signature`, checked by the adapter, `channels.slack`).
This module owns the HTTP side (the raw body, the headers, the JSON's or the form's shape);
the adapter decides. In order:

- no `[channels.slack]` in config.toml → 404 `not_found`;
- a signature that is missing, old or wrong → 401 `bad_signature`, nothing taken in;
- a body that is not JSON (events) or has no JSON `payload` field (actions) → 400;
- `url_verification` → 200 `{"challenge"}` (Slack's check of the events URL);
- an event → 200 `{"ok": true, "taken": …}` at once, whether it was admitted now, was
  admitted before (Slack's retry, `X-Slack-Retry-Num`: acknowledged, admitted once) or is not
  a message to answer (an edit, a bot's message);
- a button → 200 `{"text": sentence}` (what the presser is shown).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from hearth.channels.manager import Channels
from hearth.channels.slack import NAME, SlackChannel, form_payload
from hearth.errors import Refusal

router = APIRouter()
EVENTS, ACTIONS = "/channels/slack/events", "/channels/slack/actions"


def _adapter(request: Request) -> SlackChannel:
    channels: Channels = request.app.state.channels
    adapter = channels.adapters.get(NAME)
    if not isinstance(adapter, SlackChannel):
        raise Refusal("not_found", 404,
                      "The Slack channel is not set up: add [channels.slack] to config.toml.")
    return adapter


async def _signed(request: Request) -> tuple[SlackChannel, bytes]:
    adapter = _adapter(request)
    body = await request.body()
    adapter.verify(body, request.headers.get("x-slack-request-timestamp"),
                   request.headers.get("x-slack-signature"))
    return adapter, body


@router.post(EVENTS)
async def take_event(request: Request) -> JSONResponse:
    adapter, body = await _signed(request)
    try:
        envelope: Any = json.loads(body)
    except ValueError:
        raise Refusal("invalid_json", 400, "The event is not JSON.") from None
    if not isinstance(envelope, dict):
        raise Refusal("invalid_json", 400, "The event is not a JSON object.")
    if envelope.get("type") == "url_verification":
        return JSONResponse({"challenge": str(envelope.get("challenge", ""))})
    taken = await adapter.take_event(envelope)
    return JSONResponse({"ok": True, "taken": taken})


@router.post(ACTIONS)
async def take_action(request: Request) -> JSONResponse:
    adapter, body = await _signed(request)
    try:
        payload = form_payload(body)
    except ValueError:
        raise Refusal("invalid_request", 400,
                      "An interactivity request carries its JSON in a `payload` field.") from None
    return JSONResponse({"text": await adapter.take_action(payload)})
