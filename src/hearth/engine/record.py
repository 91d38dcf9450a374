"""The turn's writes: every event a turn produces is appended here, under its writer claim,
and published on the live bus once committed."""

from __future__ import annotations

from typing import Any

from hearth.engine.events import message_frame
from hearth.engine.state import CallScope
from hearth.store import transcript
from hearth.store.transcript import EventRow


def append(
    turn: CallScope,
    kind: str,
    content: dict[str, Any],
    *,
    meta: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> EventRow:
    """Append one event as this run (raises WriterClaimLost if it no longer owns the chat)."""
    with turn.db.write(durable=False) as conn:
        event = transcript.append(
            conn, turn.session_key, kind, content, meta=meta, run_id=turn.run_id,
            writer=turn.run_id, idempotency_key=idempotency_key,
        )
    turn.bus.publish(turn.session_key, message_frame(event))
    return event


def append_many(turn: CallScope, items: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
    """Append several events in one transaction, in order (e.g. a batch's results)."""
    with turn.db.write(durable=False) as conn:
        events = [
            transcript.append(conn, turn.session_key, kind, content, meta=meta,
                              run_id=turn.run_id, writer=turn.run_id)
            for kind, content, meta in items
        ]
    for event in events:
        turn.bus.publish(turn.session_key, message_frame(event))
