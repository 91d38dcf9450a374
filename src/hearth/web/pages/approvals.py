"""The dashboard's Approvals page: every tool call waiting on the owner, from every chat, newest
first, each as the chat page's approval card (what the call will do, and Allow once / Always /
Deny), answered here with a form post that comes back to this page; then the standing
"Always" grants, each with the chat it came from and a Revoke button.

The page owns `GET /approvals`, `POST /approvals/{id}` (the same decisions and Always scope as
the chat page's answer) and `POST /grants/{id}/revoke`. What goes wrong (an approval already
answered or gone, a grant already revoked, a bad decision) comes back as this page with the
sentence and the refusal's status, not as JSON.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from markupsafe import Markup

from hearth.engine.runtime import Engine
from hearth.errors import Refusal
from hearth.sessions.naming import shown_name
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.pages.chat import DECISIONS, _prefix as always_scope
from hearth.web.pages.frame import page
from hearth.web.pages.ui import csrf_of, form_of, templates

pages = APIRouter(dependencies=[Depends(require_token)])

MAX_ID = 2**62  # grant ids are SQLite integers; larger is no grant
MAX_APPROVAL_ID = 200  # approval ids are short hex strings; longer is no approval
_DIGITS = re.compile(r"[0-9]{1,19}")

# What the page says after an answer (`?done=`); anything else says nothing.
DONE = {
    "allow_once": "Allowed once. The call runs now and its chat goes on.",
    "allow_always": "Allowed. From now on calls like it run without asking; the grant is "
                    "listed under Always allowed.",
    "deny": "Denied. The agent is told the call was refused.",
    "revoked": "Revoked. The next call it covered is asked about again.",
}

def _card(view: dict[str, Any], csrf: str) -> Markup:
    """The chat page's approval card (`_items.html`'s `approval` macro), answered here."""
    here = f'/approvals/{quote(view["id"], safe="")}'  # answered on this page's own route
    drawn = templates().get_template("_items.html").module.approval(  # type: ignore[attr-defined]
        view, view["session"], csrf, here)
    return Markup(str(drawn))


async def chat_names(engine: Engine, keys: set[str]) -> dict[str, str]:
    """What each of these chats is called on a page (its title, else its first words); a chat
    that is gone is left out. The Memory page names the chats its items are filed under so."""
    found = {}
    for key in sorted(keys):
        try:
            found[key] = await engine.reads.chat(key)
        except Refusal:
            continue  # deleted, or a Temporary chat that ended
    untitled = [key for key, chat in found.items() if not chat.title]
    openings = await engine.reads.openings(untitled) if untitled else {}
    return {key: shown_name(chat.title, openings.get(key), key) for key, chat in found.items()}


def _grant_id(raw: str) -> int:
    """A grant's id from the address (404 `grant_not_found` for what is none)."""
    if _DIGITS.fullmatch(raw) and 1 <= int(raw) <= MAX_ID:
        return int(raw)
    raise Refusal("grant_not_found", 404, f"There is no standing grant {raw[:40]}.")


def _stamp(iso: str | None) -> float | None:
    return datetime.fromisoformat(iso).timestamp() if iso else None


async def _approvals_page(request: Request, engine: EngineDep, *, status: int = 200,
                          problem: str | None = None, done: str | None = None) -> Response:
    csrf = csrf_of(request)
    waiting = sorted(await engine.desk.pending(), key=lambda a: a["created_at"], reverse=True)
    standing = await engine.reads.grants()
    names = await chat_names(engine, {g["session"] for g in standing if g["session"]})
    asks = [{**a, "chat": shown_name(a.get("title"), None, a["session"]),
             "card": _card(a, csrf)} for a in waiting]
    held = [{**g, "made": _stamp(g["created_at"]), "chat": names.get(g["session"] or "")}
            for g in standing]
    return await page(request, engine, "approvals.html", status=status, asks=asks,
                      grants=held, problem=problem, done=DONE.get(done or ""))


@pages.get("/approvals")
async def approvals_page(request: Request, engine: EngineDep,
                         done: str | None = None) -> Response:
    """What waits, then the grants; `done` names what the last form did, to say so."""
    return await _approvals_page(request, engine, done=done)


@pages.post("/approvals/{approval_id}")
async def answer(request: Request, engine: EngineDep, approval_id: str) -> Response:
    """Allow once, Always (for any target or those starting with a prefix) or Deny, then
    back to this page."""
    form = await form_of(request)
    decision = form.get("decision", "")
    try:
        if decision not in DECISIONS:
            raise Refusal("invalid_decision", 422,
                          f"decision must be one of {', '.join(DECISIONS)}.")
        if len(approval_id) > MAX_APPROVAL_ID or \
                await engine.reads.approval_chat(approval_id) is None:
            raise Refusal("approval_not_found", 404,
                          "There is no such approval: it may have been answered in its chat, "
                          "or its chat was deleted.")
        prefix = always_scope(form) if decision == "allow_always" else None
        await engine.desk.decide(approval_id, decision, prefix)
    except Refusal as refused:
        return await _approvals_page(request, engine, status=refused.status,
                                     problem=refused.sentence)
    return RedirectResponse(f"/approvals?done={decision}", status_code=303)


@pages.post("/grants/{grant_id}/revoke")
async def revoke(request: Request, engine: EngineDep, grant_id: str) -> Response:
    """Revoke a standing grant: the next call it covered is asked about again. An id that is
    no grant's (whatever it is) is this page saying so."""
    try:
        await engine.access.revoke_grant(_grant_id(grant_id))
    except Refusal as refused:
        return await _approvals_page(request, engine, status=refused.status,
                                     problem=f"{refused.sentence} It may have been revoked "
                                             "already.")
    return RedirectResponse("/approvals?done=revoked#grants", status_code=303)
