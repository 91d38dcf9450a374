"""A chat's attachments: `POST /api/sessions/{key}/attachments?name=…` uploads one file (the
request's body, or the one file part of a `multipart/form-data` form, its filename the name
unless `?name=` says one: `web.http.uploads`; its type sniffed from the bytes), answered 201
with its id; a message sends it by naming that id (`POST /api/sessions/{key}/messages`,
`attachments: [id]`). `GET …/attachments` lists the chat's files, sent and held;
`GET …/attachments/{id}` answers one's bytes, as a download, never rendered as a page.
The body is streamed to disk as it arrives (`engine.attachments`), never held whole.
`POST /api/sessions/{key}/speech` `{index}` reads one message aloud (the `speak` chain)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from hearth.engine.views import attachment_view
from hearth.web.http.deps import EngineDep
from hearth.web.http.permissions import PrincipalDep
from hearth.web.http.uploads import upload_of

router = APIRouter()


@router.post("/api/sessions/{key}/attachments")
async def upload(key: str, request: Request, engine: EngineDep,
                 name: str | None = Query(default=None, max_length=1000)) -> JSONResponse:
    sent = await upload_of(request)
    row = await engine.attachments.receive(key, name or sent.name, sent.chunks)
    return JSONResponse(attachment_view(row), status_code=201)


@router.get("/api/sessions/{key}/attachments")
async def listed(key: str, engine: EngineDep) -> dict[str, Any]:
    return {"attachments": [attachment_view(row)
                            for row in await engine.attachments.listed(key)]}


@router.get("/api/sessions/{key}/attachments/{attachment_id}")
async def download(key: str, attachment_id: str, engine: EngineDep) -> FileResponse:
    row, path = await engine.attachments.opened(key, attachment_id)
    return FileResponse(path, media_type=row.content_type, headers={
        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(row.name)}",
        "Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"})


class ReadAloud(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: int = Field(ge=1, le=2**62)


@router.post("/api/sessions/{key}/speech")
async def speech(key: str, body: ReadAloud, engine: EngineDep,
                 principal: PrincipalDep) -> Response:
    """The message at `index` read aloud by the `speak` chain: MP3, and which model spoke
    (`X-Hearth-Spoken-By`). 404 `no_speak_model` when none is set up."""
    spoken = await engine.read_aloud(key, body.index, principal)
    return Response(spoken.audio, media_type="audio/mpeg", headers={
        "X-Hearth-Spoken-By": spoken.model_id, "Cache-Control": "no-store",
        "X-Hearth-Cut": "true" if spoken.cut else "false"})
