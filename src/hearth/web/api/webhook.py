"""The webhook channel's door: `POST /channels/webhook`, where an app sends a message in.

No bearer token: the request is authenticated by its signature alone (`X-Hearth-Timestamp`,
`X-Hearth-Signature`; `channels.signing`). This module owns the HTTP side (the raw body, the
headers, the JSON's shape); the adapter (`channels.webhook`) decides. In order:

- no `[channels.webhook]` in config.toml → 404 `not_found`;
- a signature that is missing, old or wrong → 401 (`missing_timestamp`, `bad_timestamp`,
  `stale_timestamp`, `missing_signature`, `bad_signature`), nothing taken in;
- a body not of the shape below → 400 `invalid_json` / 422 `invalid_request`;
- an `id` taken in before → 401 `replayed`;
- an `approval` answer → 200 `{"answered": sentence}` from an owner, 403 `not_owner` else;
- a message → 202 `{"run_id", "chat", "status"}` (or 200 `{"answered"}` when the owner's
  reply word answered the approval waiting in the thread).

Body: `{"id", "thread", "sender", "sender_name"?, "text", "attachments"?: [{"name",
"data"?}], "approval"?: {"id", "decision": "allow_once" | "allow_always" | "deny"}}`; an
attachment's `data` (its bytes, base64) keeps it in the chat as the message's file, one
without is only named.
"""

from __future__ import annotations

import base64
import binascii
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from hearth.channels import signing
from hearth.channels.manager import Channels
from hearth.channels.webhook import NAME, Message, WebhookChannel
from hearth.errors import Refusal

router = APIRouter()
PATH = "/channels/webhook"


class Attachment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: StrictStr = Field(min_length=1, max_length=255)
    data: StrictStr | None = None  # the file's bytes in base64: kept in the chat; else named


class ApprovalAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: StrictStr = Field(min_length=1, max_length=64)
    decision: Literal["allow_once", "allow_always", "deny"]


class WebhookMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: StrictStr = Field(min_length=1, max_length=200)
    thread: StrictStr = Field(min_length=1, max_length=200)
    sender: StrictStr = Field(min_length=1, max_length=200)
    sender_name: StrictStr | None = Field(None, max_length=200)
    text: StrictStr = ""
    attachments: list[Attachment] = Field(default_factory=list, max_length=20)
    approval: ApprovalAnswer | None = None


def _decoded(index: int, data: str) -> bytes:
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise Refusal("invalid_request", 422,
                      f"attachments[{index}].data is not valid base64.") from None
    if not decoded:
        raise Refusal("invalid_request", 422, f"attachments[{index}].data is empty.")
    return decoded


def _adapter(request: Request) -> WebhookChannel:
    channels: Channels = request.app.state.channels
    adapter = channels.adapters.get(NAME)
    if not isinstance(adapter, WebhookChannel):
        raise Refusal("not_found", 404,
                      "The webhook channel is not set up: add [channels.webhook] to "
                      "config.toml.")
    return adapter


def _parsed(body: bytes) -> WebhookMessage:
    try:
        return WebhookMessage.model_validate_json(body)
    except ValidationError as invalid:
        raise RequestValidationError(invalid.errors()) from None


@router.post(PATH)
async def take(request: Request) -> JSONResponse:
    adapter = _adapter(request)
    body = await request.body()
    signed_at = adapter.verify(body, request.headers.get(signing.TIMESTAMP),
                               request.headers.get(signing.SIGNATURE))
    message = _parsed(body)
    if message.approval is not None:
        taken = await adapter.take_answer(message.id, signed_at, message.sender,
                                          message.approval.id, message.approval.decision)
    else:
        taken = await adapter.take_message(Message(
            id=message.id, thread=message.thread, sender=message.sender,
            sender_name=message.sender_name or message.sender, text=message.text,
            attachments=tuple(a.name for a in message.attachments if a.data is None),
            files=tuple((a.name, _decoded(n, a.data)) for n, a in enumerate(message.attachments)
                        if a.data is not None)), signed_at)
    return JSONResponse(taken.body, status_code=taken.status)
