"""The chat page's branching: its forms (Regenerate, Edit and send, Rewind to here, a variant
chosen, Fork from here) as page routes over the engine's doors, each message's place for the
page to draw them (`placed`), and the session map's rail (`map_ticks`).

A message is addressed by its visible index (`visible_index` of `engine.views.message_view`),
the coordinate the doors speak. Every route is a form post carrying the page's CSRF token: a
page's script (`X-Requested-With: fetch`) gets JSON, a plain form post goes back to the chat
(303), or for a fork to the new chat. A refusal is answered as the rest of the dashboard's are
(`web.http.errors`): a sentence on a page, or the envelope to a script; the repeat guard's 409
carries its steps and confirm value, which the page's script asks about and sends back.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from hearth.engine.operations.branching import Moved
from hearth.engine.runtime import Engine
from hearth.engine.views import message_view
from hearth.errors import Refusal
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.http.permissions import PrincipalDep
from hearth.web.pages.ui import form_of

MAX_INDEX = 10_000_000
MAX_VARIANT = 10_000
MAX_CONFIRM = 100
VISIBLE = ("user", "assistant")
DOTS = ("tool", "approval", "error")  # the marks inside an exchange its tick shows

pages = APIRouter(dependencies=[Depends(require_token)])


# ------------------------------------------------------------------ the forms


@pages.post("/chats/{key}/regenerate")
async def regenerate(request: Request, key: str, engine: EngineDep) -> Response:
    """Answer again: the answer at `index` (none: the last) is kept as a variant."""
    form = await form_of(request)
    index = _number(form, "index", MAX_INDEX) if form.get("index", "").strip() else None
    admitted = await engine.regenerate(key, index, _confirm(form))
    return _back(request, key, {"run_id": admitted.run_id})


@pages.post("/chats/{key}/edit")
async def edit(request: Request, key: str, engine: EngineDep,
               principal: PrincipalDep) -> Response:
    """Send `text` in place of the owner's message at `index` (a new branch)."""
    form = await form_of(request)
    index = _number(form, "index", MAX_INDEX)
    admitted = await engine.edit(key, index, form.get("text", ""), _confirm(form),
                                 principal=principal)
    return _back(request, key, {"run_id": admitted.run_id})


@pages.post("/chats/{key}/rewind")
async def rewind(request: Request, key: str, engine: EngineDep) -> Response:
    """Move the chat back to the message at `index`; one of the owner's is answered again."""
    form = await form_of(request)
    moved = await engine.rewind(key, _number(form, "index", MAX_INDEX), _confirm(form))
    return _back(request, key, _moved(moved))


@pages.post("/chats/{key}/variant")
async def choose_variant(request: Request, key: str, engine: EngineDep) -> Response:
    """Show variant `variant` (from 0) of the message at `index` (the pager's ‹ and ›)."""
    form = await form_of(request)
    moved = await engine.choose_variant(key, _number(form, "index", MAX_INDEX),
                                        _number(form, "variant", MAX_VARIANT))
    return _back(request, key, _moved(moved))


@pages.post("/chats/{key}/fork")
async def fork(request: Request, key: str, engine: EngineDep) -> Response:
    """A new chat holding this one's messages up to `index`, opened at once."""
    form = await form_of(request)
    made = await engine.fork(key, _number(form, "index", MAX_INDEX), None)
    url = f"/chats/{quote(made.key, safe='')}"
    if request.headers.get("x-requested-with") == "fetch":
        return JSONResponse({"key": made.key, "url": url}, status_code=201)
    return RedirectResponse(url, status_code=303)


def _number(form: dict[str, str], name: str, most: int) -> int:
    """A whole number from 0 to `most` posted as `name`."""
    raw = form.get(name, "").strip()
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 12) or int(raw) > most:
        raise Refusal(f"invalid_{name}", 422,
                      f"{name} must be a whole number from 0 to {most:,}.")
    return int(raw)


def _confirm(form: dict[str, str]) -> str | None:
    confirm = form.get("confirm", "").strip()
    if len(confirm) > MAX_CONFIRM:
        raise Refusal("invalid_confirm", 422,
                      f"confirm must be at most {MAX_CONFIRM} characters: the value the "
                      "question gave.")
    return confirm or None


def _moved(moved: Moved) -> dict[str, Any]:
    run_id = moved.admitted.run_id if moved.admitted is not None else None
    return {"head_index": moved.head_index, "run_id": run_id}


def _back(request: Request, key: str, answer: dict[str, Any]) -> Response:
    """A page's script asked: the answer as JSON. A plain form post: back to the chat."""
    if request.headers.get("x-requested-with") == "fetch":
        return JSONResponse(answer)
    return RedirectResponse(f"/chats/{quote(key, safe='')}", status_code=303)


# ------------------------------------------------------------------ a live message's place


async def placed(engine: Engine, key: str, message: dict[str, Any]) -> dict[str, Any]:
    """A live frame's message with its place as a reload reads it (`visible_index`, `variants`),
    so that its actions are drawn live as after a reload. Unchanged for an event that is not a
    message or answer, or no longer on the chat's path."""
    if message.get("kind") not in VISIBLE:
        return message
    try:
        window = await engine.reads.window(key, limit=1, before=int(message["index"]) + 1)
    except Refusal:  # the chat was deleted meanwhile: nothing to act on
        return message
    found = window.events[0] if window.events else None
    if found is None or found.seq != message["index"]:
        return message
    view = message_view(found, visible_index=window.visible_indexes().get(found.event_id),
                        variants=window.variants.get(found.event_id))
    return {**message, "visible_index": view["visible_index"], "variants": view["variants"]}


# ------------------------------------------------------------------ the session map's rail


async def chat_map(engine: Engine, key: str, first_seq: int | None, before: int | None
                   ) -> list[dict[str, Any]]:
    """The rail's ticks for a page showing the events from seq `first_seq` (before `before`)."""
    return map_ticks(await engine.reads.chat_map(key), key, first_seq, before)


def map_ticks(marks: list[dict[str, Any]], key: str, first_seq: int | None,
              before: int | None) -> list[dict[str, Any]]:
    """One tick per exchange (a message of the owner's and what answered it): the message's
    seq and preview, the kinds of the marks inside it (tool calls, approvals, errors), and
    where a click goes — the item on this page, or the page of the chat that holds it."""
    ticks: list[dict[str, Any]] = []
    for mark in marks:
        if mark["kind"] == "user" or not ticks:
            ticks.append({"seq": mark["seq"], "number": len(ticks) + 1, "dots": [],
                          "preview": mark["preview"] if mark["kind"] == "user" else ""})
        if mark["kind"] in DOTS:
            ticks[-1]["dots"].append(mark["kind"])
    for tick in ticks:
        tick["href"] = _href(key, tick["seq"], first_seq, before)
        tick["label"] = _label(tick)
    return ticks


def _href(key: str, seq: int, first_seq: int | None, before: int | None) -> str:
    shown = first_seq is not None and seq >= first_seq and (before is None or seq < before)
    if shown:
        return f"#seq-{seq}"
    return f"/chats/{quote(key, safe='')}?before={seq + 1}#seq-{seq}"


def _label(tick: dict[str, Any]) -> str:
    said = tick["preview"] or "(no message)"
    counts = [(tick["dots"].count(kind), noun) for kind, noun in
              (("tool", "tool call"), ("approval", "approval"), ("error", "error"))]
    inside = ", ".join(f"{n} {noun}{'s' if n != 1 else ''}" for n, noun in counts if n)
    return f"{tick['number']}. {said}" + (f" ({inside})" if inside else "")
