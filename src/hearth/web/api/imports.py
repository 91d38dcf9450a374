"""Routes for chats as JSON Lines (`engine.operations.jsonl`, `engine.operations.importing`): every
kept chat as one download, streamed (`GET /api/export`), and a file of them imported as new chats
(`POST /api/import`: 201 with the chats made; a file that cannot be imported is refused whole,
422 `import_invalid` naming its line; a body over the gateway's limit is 413
`request_too_large`, answered by `web.http.limits` before this reads it). One chat's file is
`GET /api/sessions/{key}/export?format=jsonl` (`web.api.sessions`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from hearth.engine.operations import jsonl
from hearth.errors import Refusal
from hearth.web.http.deps import EngineDep

router = APIRouter()
# what a JSON Lines body is sent as: its own types, or text (a browser's upload of a .jsonl)
BODY_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-lines",
              "application/octet-stream")
MAX_LINE_OFFSET = 10**9


@router.get("/api/export")
async def export_all(engine: EngineDep) -> StreamingResponse:
    """Every kept chat (archived ones too; never an Incognito or Temporary one), with each
    one's variant tree, as JSON Lines, written as it is read."""
    name = f"hearth-export-{datetime.now(UTC):%Y-%m-%d}.jsonl"
    return StreamingResponse(engine.chats.export_all(), media_type=jsonl.MEDIA_TYPE,
                             headers={"Content-Disposition": f'attachment; filename="{name}"'})


@router.post("/api/import")
async def import_chats(
    request: Request,
    engine: EngineDep,
    dry_run: Annotated[bool, Query()] = False,
    line_offset: Annotated[int, Query(ge=0, le=MAX_LINE_OFFSET)] = 0,
) -> JSONResponse:
    """Import a JSON Lines export: each chat a new chat (201, `imported`: their keys); with
    `dry_run` the file is only checked (200). `line_offset` is for a part of a longer file
    (`hearth import` sends one in parts): the part's line k > 1 is that file's line
    k + line_offset, which a refusal names."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind not in BODY_TYPES and not kind.startswith("text/"):
        raise Refusal("unsupported_media_type", 415,
                      "Send the export's JSON Lines as the body, with Content-Type "
                      "application/x-ndjson (or text/plain).")
    result = await engine.chats.import_file(engine.choices(), await request.body(),
                                            line_offset=line_offset, dry_run=dry_run)
    return JSONResponse(result.view(), status_code=200 if dry_run else 201)
