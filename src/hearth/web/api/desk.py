"""The delivery desk's routes (the owner's alone): what the gateway could not deliver or do,
and settling it by hand (`engine.delivery.desk`).

- `GET /api/desk` → `{deliveries: [...], chores: [...], needs_owner}`: the failed and unknown
  deliveries, latest first, and the owed chores, the most tried first.
- `POST /api/deliveries/{id}/retry` → 202 `{delivery}`: owed again, sent by its channel's own
  sender; `/delivered` → it arrived (marked `sent`); `/drop` → given up (`dropped`).
- `POST /api/chores/{id}/retry` → 202 `{chore}`: due now, tried once by the chore loop;
  `/drop` → given up.

An id that is none is 404 (`delivery_not_found`, `chore_not_found`); an action on a row in
another state is 409 with the sentence why (`delivery_pending` while a Retry is being sent,
`delivery_settled`, `channel_not_set_up`, `chore_due`, `chore_running`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse

from hearth.channels.manager import Channels
from hearth.engine.delivery.desk import DeskChore, DeskDelivery
from hearth.engine.views import iso
from hearth.web.http.deps import EngineDep

router = APIRouter()
MAX_ID = 2**62  # ids are SQLite integers; larger is none
RowId = Annotated[int, Path(ge=1, le=MAX_ID)]


def delivery_view(item: DeskDelivery) -> dict[str, Any]:
    row = item.row
    return {"id": row.id, "state": row.status, "channel": row.channel, "thread": row.thread,
            "chat": {"key": row.session_key, "name": item.chat}, "kind": row.kind,
            "part": row.part, "parts": row.parts, "why": row.error, "attempts": row.attempts,
            "at": iso(item.at), "created_at": iso(row.created_at), "preview": item.preview}


def chore_view(item: DeskChore) -> dict[str, Any]:
    row = item.row
    return {"id": row.id, "kind": row.kind, "chat": {"key": row.session_key, "name": item.chat},
            "run_id": row.run_id, "why": row.reason, "attempts": row.attempts,
            "next_at": iso(row.next_at),
            "created_at": iso(row.created_at), "running": item.running,
            "needs_owner": item.needs_owner}


@router.get("/api/desk")
async def desk(engine: EngineDep) -> dict[str, Any]:
    found = await engine.delivery_desk.listing()
    return {"deliveries": [delivery_view(d) for d in found.deliveries],
            "chores": [chore_view(c) for c in found.chores], "needs_owner": found.needs_owner}


@router.post("/api/deliveries/{delivery_id}/retry")
async def retry_delivery(delivery_id: RowId, request: Request) -> JSONResponse:
    """Owed again: its channel's sender sends it (202); refused while a Retry is pending."""
    channels: Channels = request.app.state.channels
    await channels.send_again(delivery_id)
    return JSONResponse({"delivery": {"id": delivery_id, "state": "created"}}, status_code=202)


@router.post("/api/deliveries/{delivery_id}/delivered")
async def mark_delivered(delivery_id: RowId, engine: EngineDep) -> dict[str, Any]:
    await engine.delivery_desk.mark_delivered(delivery_id)
    return {"delivery": {"id": delivery_id, "state": "sent"}}


@router.post("/api/deliveries/{delivery_id}/drop")
async def drop_delivery(delivery_id: RowId, engine: EngineDep) -> dict[str, Any]:
    await engine.delivery_desk.drop(delivery_id)
    return {"delivery": {"id": delivery_id, "state": "dropped"}}


@router.post("/api/chores/{chore_id}/retry")
async def retry_chore(chore_id: RowId, engine: EngineDep) -> JSONResponse:
    """Due now: the chore loop tries it once (202)."""
    row = await engine.delivery_desk.chore_now(chore_id)
    return JSONResponse({"chore": {"id": row.id, "kind": row.kind, "state": "due"}},
                        status_code=202)


@router.post("/api/chores/{chore_id}/drop")
async def drop_chore(chore_id: RowId, engine: EngineDep) -> dict[str, Any]:
    row = await engine.delivery_desk.drop_chore(chore_id)
    return {"chore": {"id": row.id, "kind": row.kind, "state": "dropped"}}
