"""The turn's writes: every event a turn produces is appended here, under its writer claim,
and published on the live bus once committed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from hearth.engine.delivery.events import message_frame
from hearth.engine.turn.turn_state import CallScope
from hearth.store import transcript
from hearth.store.transcript import EventRow


async def append(
    turn: CallScope,
    kind: str,
    content: dict[str, Any],
    *,
    meta: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> EventRow:
    """Append one event as this run (raises WriterClaimLost if it no longer owns the chat)."""
    def write(conn: Connection) -> EventRow:
        return transcript.append(
            conn, turn.session_key, kind, content, meta=meta, run_id=turn.run_id,
            writer=turn.run_id, idempotency_key=idempotency_key,
        )

    event = await turn.db.writing(write, durable=False)
    turn.bus.publish(turn.session_key, message_frame(event))
    return event


async def append_many(turn: CallScope,
                      items: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
    """Append several events in one transaction, in order (e.g. a batch's results)."""
    def write(conn: Connection) -> list[EventRow]:
        return [transcript.append(conn, turn.session_key, kind, content, meta=meta,
                                  run_id=turn.run_id, writer=turn.run_id)
                for kind, content, meta in items]

    events = await turn.db.writing(write, durable=False)
    for event in events:
        turn.bus.publish(turn.session_key, message_frame(event))
