"""The saved prompts a message can mention (`@name`), for the composer's suggestions and
`hearth chat`'s `/prompts`: `GET /api/prompts`, each prompt's name, description (its first
line) and the placeholders it uses. The files are read off the event loop (see
`engine.intake.mentions`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from hearth.web.http.deps import EngineDep

router = APIRouter()


@router.get("/api/prompts")
async def list_prompts(engine: EngineDep) -> dict[str, Any]:
    saved = await engine.files.saved_prompts()
    return {"prompts": [{"name": p.name, "description": p.description,
                         "placeholders": list(p.placeholders)} for p in saved],
            "folder": str(engine.prompts_dir)}
