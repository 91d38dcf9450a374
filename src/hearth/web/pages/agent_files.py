"""The Settings page's agent files: an agent's workspace files (AGENTS.md … MEMORY.md), each
shown and edited in its own form, kept whole (`engine.turn.agents.write_file`); what its next turn
reads. A file that cannot be read says why and can be written over."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from hearth.engine.turn import agents
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.pages.frame import page
from hearth.web.pages.ui import form_of

pages = APIRouter(dependencies=[Depends(require_token)])


@pages.get("/settings/agents/{name}/files")
async def agent_files(request: Request, name: str, engine: EngineDep,
                      saved: str | None = None) -> Response:
    agent = agents.known_agent(engine.config, name)
    files = await engine.files.agent_files(agent)
    return await page(request, engine, "agent_files.html", agent=agent, files=files,
                      saved=saved if saved in agents.FILES else None,
                      limit=agents.FILE_MAX, order=" → ".join(agents.FILES))


@pages.post("/settings/agents/{name}/files/{file}")
async def save_agent_file(request: Request, name: str, file: str,
                          engine: EngineDep) -> Response:
    agent = agents.known_agent(engine.config, name)
    text = (await form_of(request)).get("text", "")
    await engine.files.write_agent_file(agent, file, text)
    return RedirectResponse(f"/settings/agents/{quote(agent)}/files?saved={quote(file)}"
                            f"#file-{quote(file)}", status_code=303)
