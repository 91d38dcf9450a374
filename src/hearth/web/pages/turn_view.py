"""What a chat page draws for each persisted event, one shape for a reload and for a live frame.

A reload builds the page's items from the chat's events (`page_items`); the live stream renders
each frame with the same macros (`web/templates/_items.html`) through `frame_html`. A tool call
is a card keyed by its run and call id; its result and a pending approval are drawn inside that
card, on a reload from the rows and live by the frame naming the card (`target`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hearth.engine.runtime import Engine
from hearth.engine.turn.approval.gate import shown_target
from hearth.engine.views import file_size, sent_files
from hearth.web.pages.ui import in_local_zone, templates

Item = dict[str, Any]
# how the ending a notice row says can be tried again (Retry); a stale message is not shown
RETRYABLE_OUTCOMES = ("error", "stopped", "abandoned")
SETUP_ENDINGS = ("key_missing",)  # a set-up mistake: trying again changes nothing, no Retry


def card_id(run_id: str | None, call_id: str | None) -> str:
    return f"card-{run_id or 'none'}-{call_id or 'none'}"


def item_of(message: dict[str, Any], *, queued: bool = False) -> Item:
    """One event (as `engine.views.message_view` shows it) as the page draws it."""
    content, meta = message.get("content") or {}, message.get("meta") or {}
    item: Item = {"kind": message["kind"], "seq": message["index"], "run_id": message["run_id"],
                  "text": message["text"], "at": _local(message.get("created_at")),
                  "unreadable": list(message.get("unreadable") or ())}
    if item["kind"] in ("user", "assistant"):
        item["place"] = _place(message)
    if item["kind"] == "user":
        item.update(queued=queued, steered=bool(meta.get("steered")), via=_via(message),
                    files=_files(meta))
    elif item["kind"] == "assistant":
        item.update(partial=bool(meta.get("partial")), telemetry=telemetry_of(meta),
                    fed=_text_or_none(meta.get("context_fed")))
    elif item["kind"] in ("tool_call", "tool_result"):
        item.update(call_id=content.get("call_id"), name=content.get("name"),
                    card=card_id(message["run_id"], content.get("call_id")))
        if item["kind"] == "tool_call":
            arguments = content.get("arguments")
            item.update(arguments=_pretty(arguments), result=None, approval=None,
                        target=shown_target(arguments) if isinstance(arguments, dict) else None)
        else:
            item.update(output=str(content.get("output", "")), is_error=bool(
                content.get("is_error")), receipt=meta.get("receipt"))
    elif item["kind"] == "notice":
        item.update(ending=meta.get("ending"), outcome=meta.get("outcome"))
        item["retry"] = bool(item["ending"] and item["outcome"] in RETRYABLE_OUTCOMES
                             and item["ending"] not in SETUP_ENDINGS and message["run_id"])
    return item


def _files(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The files a message sent, as its line shows them (an image as a picture)."""
    return [{"id": str(f["id"]), "name": str(f.get("name", "file")),
             "image": str(f.get("type", "")).startswith("image/"),
             "audio": str(f.get("type", "")).startswith("audio/"),
             "size": file_size(int(f.get("size") or 0))}
            for f in sent_files(meta) if f.get("id")]


def _via(message: dict[str, Any]) -> dict[str, str | None] | None:
    """Where a message of a channel came from, as its line says it ("Bob via Telegram"):
    the channel, and the sender's name when it was not the owner (`meta.guest`). None for a
    message typed here (only a channel's door writes a thread)."""
    source, meta = message.get("source") or {}, message.get("meta") or {}
    if not source.get("thread"):
        return None
    guest = meta.get("guest")
    return {"channel": str(source.get("channel") or "a channel").title(),
            "guest": str(guest)[:80] if guest else None}


def _place(message: dict[str, Any]) -> dict[str, int] | None:
    """Where a message stands, for its actions (Edit, Regenerate, the variants' pager): its
    visible index, and which of how many variants it is. None when not known (an event read
    without its place): then it has no actions."""
    index = message.get("visible_index")
    if index is None:
        return None
    variants = message.get("variants") or {}
    return {"index": int(index), "count": int(variants.get("count", 1)),
            "at": int(variants.get("index", 0))}


def _local(stamp: str | None) -> datetime | None:
    """An event's time (ISO, UTC) in the gateway's own time zone, as the page shows it (None
    for none, or one the zone's offset carries past the calendar's edge)."""
    return None if stamp is None else in_local_zone(datetime.fromisoformat(stamp))


TELEMETRY_TEXTS = ("model", "chosen_by", "model_substitution", "failover")
TELEMETRY_NUMBERS = ("tokens_in", "tokens_out", "duration_ms", "context_pct")


def telemetry_of(meta: dict[str, Any]) -> dict[str, Any] | None:
    """An answer's `meta.turn_telemetry` as its details draw it: each field of the type the
    page formats it as (a stored value of another type left out), None when it is no object."""
    found = meta.get("turn_telemetry")
    if not isinstance(found, dict):
        return None
    texts = {name: str(found[name]) for name in TELEMETRY_TEXTS if found.get(name) is not None}
    numbers = {name: found[name] for name in TELEMETRY_NUMBERS
               if isinstance(found.get(name), int | float) and not isinstance(found[name], bool)
               and math.isfinite(found[name])}
    return {**texts, **numbers}


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _pretty(arguments: Any) -> str:
    return json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=True)


@dataclass
class ChatState:
    """What a page needs besides the events: queued runs, pending approvals, the running run."""

    running: str | None = None
    queued: set[str] = field(default_factory=set)
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)  # card id -> approval
    heard: dict[str, str] = field(default_factory=dict)  # voice notes' words, by file id
    hears: bool = True  # a model is set up to hear voice notes


async def chat_state(engine: Engine, key: str, run_ids: set[str]) -> ChatState:
    running, queued, views = await engine.reads.activity(key, run_ids)
    pending = {item["card"]: item for item in (approval_item(view) for view in views)}
    return ChatState(running=running, queued=queued, pending=pending,
                     heard=await engine.reads.heard(key), hears=engine.snapshot.hears())


def approval_item(view: dict[str, Any]) -> dict[str, Any]:
    """An approval (as `engine.turn.approval.desk.approval_view` shows it) as its card draws it."""
    return {"id": view["id"], "tool": view["tool"], "target": view["target"],
            "effect": view["effect"], "status": view["status"],
            "preview": view.get("preview"), "asked_by": view.get("asked_by"),
            "always_allowed": view.get("always_allowed", True) and not view.get("asked_by"),
            "asked_at": view.get("created_at"),  # the waiting line counts from it, reloads too
            "card": card_id(view["run_id"], view["call_id"])}


def by_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with each turn's kept together, turns in the order they began: a message
    sent while a turn ran is stored before that turn's answer (admitted first), and is drawn
    after it, where it was answered. A message of no run stays after what came before it."""
    rank: dict[str, int] = {}
    keyed = []
    for position, message in enumerate(messages):
        run = message["run_id"]
        if run is not None:
            rank.setdefault(run, len(rank))
        keyed.append(((rank[run] if run is not None else len(rank) - 1), position, message))
    return [message for _, _, message in sorted(keyed, key=lambda k: (k[0], k[1]))]


def page_items(messages: list[dict[str, Any]], state: ChatState) -> list[Item]:
    """The page's items in turn order (`by_turn`); results and approvals are folded into
    their call's card."""
    cards: dict[str, Item] = {}
    items: list[Item] = []
    for message in by_turn(messages):
        item = item_of(message, queued=message["run_id"] in state.queued)
        _mark_heard(item, state.heard, state.hears)
        if item["kind"] == "tool_call":
            item["approval"] = state.pending.get(item["card"])
            cards[item["card"]] = item
        elif item["kind"] == "tool_result" and item["card"] in cards:
            cards[item["card"]]["result"] = item
            continue
        items.append(item)
    return items


def _mark_heard(item: Item, heard: dict[str, str], hears: bool) -> None:
    """Each of the item's voice notes given its words (`heard`, by file id), or `unheard`
    when no model is set up to hear it (the note says so)."""
    for file in item.get("files", ()):
        file["heard"] = heard.get(file["id"])
        file["unheard"] = bool(file.get("audio")) and not file["heard"] and not hears


def _macro(name: str, *args: Any) -> str:
    return str(getattr(templates().get_template("_items.html").module, name)(*args))


def frame_html(frame: dict[str, Any], *, key: str, csrf: str, queued: bool,
               hears: bool = True) -> dict[str, Any]:
    """A live frame with the markup a reload would draw for it (`html`, and `target`: the card
    it belongs in; `hears`: whether a model is set up to hear its voice notes)."""
    if frame["type"] == "message":
        item = item_of(frame["message"], queued=queued)
        _mark_heard(item, {}, hears)
        if item["kind"] == "tool_result":
            return {**frame, "target": item["card"], "html": _macro("result", item),
                    "orphan_html": _macro("item", item, key, csrf)}
        return {**frame, "html": _macro("item", item, key, csrf)}
    if frame["type"] == "approval":
        approval = approval_item(frame["approval"])
        pending = approval["status"] == "pending"
        return {**frame, "target": approval["card"],
                "html": _macro("approval", approval, key, csrf) if pending else ""}
    return frame

