"""A chat's page: its transcript rendered by the turn templates, the composer, and the
actions a page takes on a turn. The live stream (`web.chat_stream`) renders its frames with the
same templates, so a turn looks the same live and after a reload."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from hearth.engine.background import helper_agents
from hearth.engine.runtime import Engine
from hearth.engine.turn.compaction import on_request
from hearth.engine.views import message_view
from hearth.errors import Refusal
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.http.permissions import PrincipalDep
from hearth.web.http.stream import MAX_SEQ, sse, stream_response
from hearth.web.pages import branching as branching_page, channels_view, privacy_view
from hearth.web.pages.frame import page
from hearth.web.pages.turn_view import chat_state, frame_html, page_items
from hearth.web.pages.ui import csrf_of, form_of

WINDOW = 200  # events a page shows; older ones are a link away
DECISIONS = ("allow_once", "allow_always", "deny")

# what a page action that changed nothing says, by the `note` it sends the page back with
PAGE_NOTES = {"nothing-to-compact": on_request.NOTHING}

pages = APIRouter(dependencies=[Depends(require_token)])


@pages.get("/chats/{key}")
async def chat_page(request: Request, key: str, engine: EngineDep,
                    before: Annotated[int | None, Query(ge=1, le=MAX_SEQ)] = None,
                    note: Annotated[str | None, Query(max_length=40)] = None) -> Response:
    window = await engine.reads.window(key, limit=WINDOW, before=before)
    indexes = window.visible_indexes()
    messages = [message_view(e, visible_index=indexes.get(e.event_id),
                             variants=window.variants.get(e.event_id)) for e in window.events]
    state = await chat_state(engine, key, {m["run_id"] for m in messages if m["run_id"]})
    kind = privacy_view.kinds(engine.config.limits.temporary_idle_seconds).get(
        window.session.memory_mode)  # an Incognito or Temporary chat's banner
    first = window.events[0].seq if window.events else None
    opening = None
    if not window.session.title:  # an untitled chat is called by its first words
        opening = (await engine.reads.openings([key])).get(key)
    choices = engine.choices()  # the snapshot's models and agents, read once
    return await page(request, engine, "chat.html", current=key, chat=window.session,
                      kind=kind, opening=opening,
                      items=page_items(messages, state),
                      ticks=await branching_page.chat_map(engine, key, first, before),
                      last_seq=window.events[-1].seq if window.events else 0,
                      # an earlier window follows what is said from now on, not what came after it
                      live_after=window.session.last_seq if before is not None else 0,
                      earlier=first if window.earlier else None,
                      running=state.running if before is None else None,
                      models=list(choices.models), agents=list(choices.agents),
                      link=await channels_view.link_of(engine, key),  # where it answers
                      helpers=await helper_agents.helpers_of(engine, key),  # the work it handed on
                      channels=channels_view.rows(request),
                      page_note=PAGE_NOTES.get(note or ""),
                      message_id=uuid.uuid4().hex)  # a form sent twice is one message


@pages.get("/chats/{key}/stream")
async def chat_stream(
    request: Request, key: str, engine: EngineDep,
    after: Annotated[int | None, Query(ge=0, le=MAX_SEQ)] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """The page's live stream: the chat's frames, each drawn by the page's own templates."""
    csrf = csrf_of(request)
    return await stream_response(engine, key, after, last_event_id,
                                 lambda source: _drawn(engine, key, csrf, source))


async def _drawn(engine: Engine, key: str, csrf: str,
                 source: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    async for frame in source:
        queued = False
        if frame["type"] == "message" and frame["message"]["kind"] == "user":
            queued = await engine.reads.is_queued(key, frame["run_id"])
        if frame["type"] == "message":  # its actions need its place, as a reload reads it
            frame = {**frame, "message": await branching_page.placed(engine, key,
                                                                     frame["message"])}
        yield sse(frame_html(frame, key=key, csrf=csrf, queued=queued,
                             hears=engine.snapshot.hears()))


@pages.post("/chats/{key}/send")
async def send(request: Request, key: str, engine: EngineDep,
               principal: PrincipalDep) -> Response:
    """The composer's post: admit the message, then back to the chat's page."""
    form = await form_of(request)
    files = tuple(form.get("attachments", "").split()) if form.get("attachments") else ()
    admitted = await engine.send(key, form.get("text", ""), principal=principal,
                                 client_message_id=form.get("client_message_id") or None,
                                 dispatch=False, files=files)
    if not admitted.duplicate:
        engine.dispatch(key)
    return _back(request, key, {"run_id": admitted.run_id, "duplicate": admitted.duplicate})


@pages.post("/chats/{key}/stop")
async def stop(request: Request, key: str, engine: EngineDep) -> Response:
    stopped = await engine.stop(key)
    if (await form_of(request)).get("helpers"):  # "and its helpers at work" was ticked
        for helper in await helper_agents.helpers_of(engine, key):
            if helper["working"]:
                await engine.stop(helper["key"])
    return _back(request, key, {"stopped": stopped})


@pages.post("/chats/{key}/approvals/{approval_id}")
async def answer(request: Request, key: str, approval_id: str, engine: EngineDep) -> Response:
    """Allow once, Always or Deny, from the approval card."""
    form = await form_of(request)
    decision = form.get("decision", "")
    if decision not in DECISIONS:
        raise Refusal("invalid_decision", 422,
                      f"decision must be one of {', '.join(DECISIONS)}.")
    if await engine.reads.approval_chat(approval_id) != key:
        raise Refusal("approval_not_found", 404, "This chat has no such approval.")
    prefix = _prefix(form) if decision == "allow_always" else None
    decided = await engine.desk.decide(approval_id, decision, prefix)
    return _back(request, key, {"status": decided["status"], "prefix": decided["prefix"]})


@pages.post("/chats/{key}/retry/{run_id}")
async def retry(request: Request, key: str, run_id: str, engine: EngineDep) -> Response:
    """Retry from an ending's notice row. When the attempt began a step that may have changed
    something, the answer is 409 with the steps and a confirm value (see engine.repeat_guard)."""
    confirm = (await form_of(request)).get("confirm") or None
    if await engine.reads.run_chat(run_id) != key:
        raise Refusal("run_not_found", 404, "This chat has no such turn.")
    admitted = await engine.retry(run_id, confirm)
    if not admitted.duplicate:
        engine.dispatch(key)
    return _back(request, key, {"run_id": admitted.run_id})


def _prefix(form: dict[str, str]) -> str | None:
    """Always's scope: the targets starting with this (a path or a command), or everything."""
    if form.get("scoped") != "on":
        return None
    prefix = form.get("prefix", "").strip()
    if not prefix or len(prefix) > 500:
        raise Refusal("invalid_prefix", 422,
                      "The scope of Always must be 1 to 500 characters: a path or a command.")
    return prefix


def _back(request: Request, key: str, answer: dict[str, Any]) -> Response:
    """A page's script asked (`X-Requested-With: fetch`): the answer as JSON. A plain form
    post: back to the chat's page."""
    if request.headers.get("x-requested-with") == "fetch":
        return JSONResponse(answer)
    return RedirectResponse(f"/chats/{quote(key)}", status_code=303)
