"""The chat's Server-Sent Events route: replay from the store after `after=SEQ`, then live
frames (the stream itself is `web.http.stream`, which the chat page's stream shares).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from hearth.web.http.deps import EngineDep
from hearth.web.http.stream import MAX_SEQ, stream_response

router = APIRouter()


@router.get("/api/sessions/{key}/events")
async def session_events(
    key: str,
    engine: EngineDep,
    after: Annotated[int | None, Query(ge=0, le=MAX_SEQ)] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    return await stream_response(engine, key, after, last_event_id)
