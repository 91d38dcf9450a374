"""The dashboard's Not delivered page (the delivery desk): the deliveries a channel refused or may
not have taken (channel, thread, chat, when, why, the first words), each with Retry, Mark
delivered and Drop; then the owed chores (a title, learning, a summary no model could do), each
with Retry now and Drop. Both are the engine's delivery desk (`engine.delivery.desk`); a Retry
of a delivery goes through its channel's own sender (`Channels.send_again`).

The page owns `GET /desk` and `POST /desk/deliveries/{id}/{action}` (retry, delivered, drop),
`POST /desk/chores/{id}/{action}` (retry, drop): form posts that come back to this page. What
is refused (a row that is gone, one being sent again, a channel not set up) comes back as this
page with the sentence and the refusal's status.
"""

from __future__ import annotations

import re
import time

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from hearth.channels.manager import Channels
from hearth.engine.delivery.desk import CHORE_NEEDS_OWNER
from hearth.errors import Refusal
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.pages.frame import page
from hearth.web.pages.ui import form_of

pages = APIRouter(dependencies=[Depends(require_token)])

MAX_ID = 2**62
_DIGITS = re.compile(r"[0-9]{1,19}")
CHORES = {"title": "Title", "learning": "Learning", "summary": "Summary"}
DONE = {
    "retry": "Sending it again. It leaves this list once its channel takes it; if it fails "
             "again it comes back.",
    "delivered": "Marked delivered. It will not be sent again.",
    "drop": "Dropped. It will not be sent.",
    "chore-retry": "Due now: the gateway tries it at its next pass, once a model can be "
                   "called.",
    "chore-drop": "Dropped. The chore will not be tried again.",
}
DELIVERY_ACTIONS = ("retry", "delivered", "drop")
CHORE_ACTIONS = ("retry", "drop")


async def _desk_page(request: Request, engine: EngineDep, *, status: int = 200,
                     problem: str | None = None, done: str | None = None) -> Response:
    found = await engine.delivery_desk.listing()
    return await page(request, engine, "desk.html", status=status, problem=problem,
                      done=DONE.get(done or ""), deliveries=found.deliveries,
                      chores=found.chores, chore_names=CHORES, chore_tries=CHORE_NEEDS_OWNER,
                      now=time.time())


@pages.get("/desk")
async def desk_page(request: Request, engine: EngineDep, done: str | None = None) -> Response:
    return await _desk_page(request, engine, done=done)


def _number(raw: str, what: str, code: str) -> int:
    """A row's id from the address (404 with `code` for what is none)."""
    if _DIGITS.fullmatch(raw) and 1 <= int(raw) <= MAX_ID:
        return int(raw)
    raise Refusal(code, 404, f"There is no {what} #{raw[:40]}.")


@pages.post("/desk/deliveries/{delivery_id}/{action}")
async def settle_delivery(request: Request, engine: EngineDep, delivery_id: str,
                          action: str) -> Response:
    """Retry, mark delivered or drop a delivery, then back to this page."""
    await form_of(request)
    try:
        if action not in DELIVERY_ACTIONS:
            raise Refusal("not_found", 404, "There is no such thing to do to a delivery.")
        number = _number(delivery_id, "delivery", "delivery_not_found")
        if action == "retry":
            channels: Channels = request.app.state.channels
            await channels.send_again(number)
        elif action == "delivered":
            await engine.delivery_desk.mark_delivered(number)
        else:
            await engine.delivery_desk.drop(number)
    except Refusal as refused:
        return await _desk_page(request, engine, status=refused.status,
                                problem=refused.sentence)
    return RedirectResponse(f"/desk?done={action}", status_code=303)


@pages.post("/desk/chores/{chore_id}/{action}")
async def settle_chore(request: Request, engine: EngineDep, chore_id: str,
                       action: str) -> Response:
    """Make an owed chore due now, or drop it, then back to this page."""
    await form_of(request)
    try:
        if action not in CHORE_ACTIONS:
            raise Refusal("not_found", 404, "There is no such thing to do to a chore.")
        number = _number(chore_id, "owed chore", "chore_not_found")
        if action == "retry":
            await engine.delivery_desk.chore_now(number)
        else:
            await engine.delivery_desk.drop_chore(number)
    except Refusal as refused:
        return await _desk_page(request, engine, status=refused.status,
                                problem=refused.sentence)
    return RedirectResponse(f"/desk?done=chore-{action}#chores", status_code=303)
