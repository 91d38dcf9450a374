"""Routes for chats: create/open, list (filtered by folder or tag; archived ones apart), read
a window, export it whole, rename, file (folder, tags, pinned), archive, change what it runs on
(model, agent) and its trust, delete, send a message."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr
from starlette.background import BackgroundTask

from hearth.engine.access import apps
from hearth.engine.background import helper_agents
from hearth.engine.delivery import channel_delivery
from hearth.engine.intake import admission
from hearth.engine.runtime import Engine
from hearth.engine.views import message_view, session_view
from hearth.errors import Refusal
from hearth.sessions import chats
from hearth.web.http.deps import EngineDep
from hearth.web.http.permissions import AppName, PrincipalDep, app_of

router = APIRouter()
MAX_FILES = admission.MAX_FILES  # uploads one message may send
MAX_SEQ = 2**62  # sequence numbers are SQLite integers; larger is not a place in any chat


class CreateSession(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    agent: str | None = Field(None, min_length=1, max_length=100)
    model: str | None = Field(None, min_length=1, max_length=200)
    memory_mode: Literal["persistent", "incognito", "temporary"] | None = None
    workspace_dir: str | None = None
    trust: Literal["ask", "trusted"] | None = None


class PatchSession(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str | None = Field(None, min_length=1, max_length=200, pattern=r"\S")
    trust: Literal["ask", "trusted"] | None = None
    memory_mode: Literal["persistent", "incognito", "temporary"] | None = None  # never changes
    folder: StrictStr | None = None  # null takes the chat out of its folder
    tags: list[StrictStr] | None = None  # the whole list; [] removes them all
    pinned: StrictBool | None = None
    model: StrictStr | None = Field(None, min_length=1, max_length=200)  # null: the chain
    agent: StrictStr | None = Field(None, min_length=1, max_length=100)  # null: the default
    archived: StrictBool | None = None

    def filing(self) -> dict[str, object]:
        """The parts of the chat's filing this request changes (checked by `chats`)."""
        return self._given(chats.FILING)

    def runs_on(self) -> dict[str, object]:
        """What this request changes of what the chat runs on (checked by `chats`)."""
        return self._given(chats.CHOICES)

    def archiving(self) -> bool | None:
        if "archived" in self.model_fields_set and self.archived is None:
            raise Refusal("invalid_archived", 422, "archived must be true or false.")
        return self.archived

    def _given(self, names: tuple[str, ...]) -> dict[str, object]:
        return {name: getattr(self, name) for name in names if name in self.model_fields_set}


class SendMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = ""  # may be empty when the message sends files
    client_message_id: str | None = None
    # uploads to this chat (POST /api/sessions/{key}/attachments) the message sends
    attachments: list[Annotated[str, Field(min_length=1, max_length=40)]] = Field(
        default_factory=list, max_length=MAX_FILES)


@router.post("/api/sessions")
async def create_session(request: Request, engine: EngineDep, app: AppName,
                         body: CreateSession | None = None) -> JSONResponse:
    body = body or CreateSession()
    apps.check_folder(app_of(request), body.workspace_dir)
    opened = await engine.chats.open(
        name=body.name, memory_mode=body.memory_mode, agent=body.agent,
        model=body.model, workspace_dir=body.workspace_dir, trust=body.trust,
        choices=engine.choices(), created_by_app=app,
    )
    return JSONResponse(session_view(opened.session), status_code=201 if opened.created else 200)


@router.get("/api/sessions")
async def list_sessions(
    engine: EngineDep,
    app: AppName,
    q: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    folder: Annotated[str | None, Query(max_length=200)] = None,
    tag: Annotated[str | None, Query(max_length=200)] = None,
    archived: Annotated[bool, Query()] = False,
) -> dict[str, Any]:
    """The listed chats; archived ones only with `archived=true` (then only they); an app's
    own alone for an app."""
    rows, next_cursor = await engine.reads.chats(limit=limit, query=q, cursor=cursor,
                                                 folder=folder, tag=tag, archived=archived,
                                                 by_app=app)
    return {"sessions": [session_view(r) for r in rows], "next_cursor": next_cursor}


@router.get("/api/sessions/{key}")
async def get_session(
    key: str,
    engine: EngineDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    before: Annotated[int | None, Query(ge=1, le=MAX_SEQ)] = None,
) -> dict[str, Any]:
    window = await engine.reads.window(key, limit=limit, before=before)
    current = window.current_run
    indexes = window.visible_indexes()
    return {
        "session": session_view(window.session),
        "messages": [message_view(e, visible_index=indexes.get(e.event_id),
                                  variants=window.variants.get(e.event_id))
                     for e in window.events],
        "running": current is not None,
        "run_id": current.run_id if current else None,
        "link": channel_delivery.link_view(  # where it answers
            await channel_delivery.link_of(engine, key)),
        "helpers": await helper_agents.helpers_of(engine, key),  # the chats it handed work to
    }


@router.get("/api/sessions/{key}/export")
async def export_session(
    key: str,
    engine: EngineDep,
    format: Annotated[Literal["json", "markdown", "jsonl"], Query()] = "json",  # noqa: A002
) -> Response:
    """The whole chat as a download (409 `export_refused` for a chat that keeps nothing)."""
    export = await engine.chats.export(key, format)
    return Response(export.body, media_type=export.media_type, headers={
        "Content-Disposition": f'attachment; filename="{export.filename}"'})


@router.patch("/api/sessions/{key}")
async def patch_session(key: str, body: PatchSession, engine: EngineDep) -> dict[str, Any]:
    """Change what the body names; a model or agent change applies from the next turn (a
    running turn keeps what it started with)."""
    filing, runs_on, archived = body.filing(), body.runs_on(), body.archiving()
    changes = (body.title is not None or body.trust is not None or bool(filing)
               or bool(runs_on) or archived is not None)
    if body.memory_mode is not None:
        await _same_mode(engine, key, body.memory_mode)
        if not changes:
            return session_view(await engine.reads.chat(key))  # nothing to change
    if not changes:
        raise Refusal("invalid_request", 422,
                      "Send a title, a trust setting, a model, an agent, a folder, tags, pinned "
                      "or archived to change.")
    row = await engine.chats.update(key, title=body.title, trust=body.trust,
                                    filing=filing, runs_on=runs_on, choices=engine.choices(),
                                    archived=archived)
    return session_view(row)


async def _same_mode(engine: Engine, key: str, memory_mode: str) -> None:
    """A chat's memory mode is fixed when it is made: asking for another is refused."""
    kept = await engine.reads.chat(key)
    if memory_mode != kept.memory_mode:
        raise chats.ChatError(
            "memory_mode_fixed", 409,
            f"Chat {key!r} is {kept.memory_mode}; a chat's memory mode is fixed when it is "
            "made. Start a new chat for another mode.",
        )


@router.delete("/api/sessions/{key}")
async def delete_session(key: str, engine: EngineDep) -> dict[str, Any]:
    """Delete the chat: its messages, turns, tool calls, approvals, own folder and the memory
    filed under it alone (409 `session_not_deleted`, still kept, when a part could not go)."""
    report = await engine.delete_chat(key)
    return report.view()


@router.post("/api/sessions/{key}/messages")
async def send_message(
    key: str, body: SendMessage, engine: EngineDep, principal: PrincipalDep
) -> JSONResponse:
    admitted = await engine.send(key, body.text, principal=principal,
                                 client_message_id=body.client_message_id, dispatch=False,
                                 files=tuple(body.attachments))
    payload = {"run_id": admitted.run_id, "status": admitted.status, "seq": admitted.seq,
               "duplicate": admitted.duplicate}
    # persist, acknowledge, then dispatch: the turn starts once the 202 is on its way
    wake = None if admitted.duplicate else BackgroundTask(_wake, engine, key)
    return JSONResponse(payload, status_code=202, background=wake)


async def _wake(engine: Engine, key: str) -> None:
    engine.dispatch(key)  # async so it runs on the event loop, not in a worker thread


@router.post("/api/sessions/{key}/compact")
async def compact_session(key: str, engine: EngineDep) -> dict[str, Any]:
    """Compact what the chat's model reads now (`engine.turn.compaction.on_request`); the
    transcript stays."""
    done = await engine.chats.compact(key)
    return done.as_dict()


class StopChat(BaseModel):
    model_config = ConfigDict(extra="forbid")
    helpers: bool = False  # stop the chat's helpers at work too


@router.post("/api/sessions/{key}/stop")
async def stop_session(key: str, engine: EngineDep,
                       body: StopChat | None = None) -> dict[str, Any]:
    await engine.reads.chat(key)
    stopped = await engine.stop(key)
    if body is None or not body.helpers:
        return {"stopped": stopped}
    working = [h["key"] for h in await helper_agents.helpers_of(engine, key) if h["working"]]
    return {"stopped": stopped, "helpers_stopped": [
        run for run in [await engine.stop(helper) for helper in working] if run]}


class InvokeTool(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arguments: dict[str, Any] = Field(default_factory=dict)


@router.get("/api/sessions/{key}/tools")
async def session_tools(key: str, engine: EngineDep) -> dict[str, Any]:
    """The tools this chat's agent may use (what `hearth mcp` serves)."""
    return {"tools": await engine.tools_for(key)}


@router.post("/api/sessions/{key}/tools/{name}")
async def call_session_tool(key: str, name: str, body: InvokeTool, engine: EngineDep,
                            principal: PrincipalDep) -> dict[str, Any]:
    """Run one tool call as this chat (for an agent CLI); waits while the owner is asked."""
    return await engine.invoke_tool(key, name, body.arguments, principal=principal)
