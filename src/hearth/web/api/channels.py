"""The channels' routes: their health, and where a chat answers (its link).

- `GET /api/channels` → `{channels: [{name, state, sentence, can_continue}]}`
- `PUT /api/sessions/{key}/link` `{channel}` → the chat continues on the owner's own chat on
  that channel ("Continue on …"); the owner's chat it left is told once where it went.
- `DELETE /api/sessions/{key}/link` → the chat answers on no channel.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from hearth.channels.manager import Channels
from hearth.engine.delivery import channel_delivery

router = APIRouter()


class LinkTo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    channel: str = Field(min_length=1, max_length=40)


def _channels(request: Request) -> Channels:
    channels: Channels = request.app.state.channels
    return channels


@router.get("/api/channels")
async def list_channels(request: Request) -> dict[str, Any]:
    channels = _channels(request)
    return {"channels": [
        {"name": name, **health,
         "can_continue": channels.adapters[name].owner_thread() is not None}
        for name, health in channels.health().items()]}


@router.put("/api/sessions/{key}/link")
async def link_session(key: str, body: LinkTo, request: Request) -> dict[str, Any]:
    moved = await _channels(request).continue_on(key, body.channel)
    return {"link": channel_delivery.link_view(moved.link)}


@router.delete("/api/sessions/{key}/link")
async def unlink_session(key: str, request: Request) -> dict[str, Any]:
    await _channels(request).answer_here(key)
    return {"link": None}
