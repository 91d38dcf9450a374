"""What an untitled chat is called by (`transcript.openings`), on each engine: the first of
the owner's messages on the chat's path; its text, or the names of the files it sent when it
said nothing; an edit of it once the head has left the first one; none for a chat whose
messages are all off the path or were never the owner's."""

from __future__ import annotations

from sqlalchemy import Connection

from hearth.store import branches, sessions, transcript
from hearth.store.db import Database


def _histories(conn: Connection) -> None:
    for key in ("said", "files", "edited", "answered"):
        sessions.insert(conn, key=key, tab_id="t", memory_mode="persistent", chat_number=None)
    transcript.append(conn, "said", "user", {"text": "Plan a trip"})
    transcript.append(conn, "said", "assistant", {"text": "Sure."})
    transcript.append(conn, "files", "user", {"text": "  "}, meta={"attachments": [
        {"name": "plan.pdf"}, {"name": "map.png"}, "not a file"]})
    first = transcript.append(conn, "edited", "user", {"text": "Recipe for pancakes"})
    transcript.append(conn, "edited", "assistant", {"text": "Mix."})
    branches.move_head(conn, "edited", first.parent_event_id)  # the edit: a new branch
    transcript.append(conn, "edited", "user", {"text": "Recipe for waffles"})
    transcript.append(conn, "answered", "assistant", {"text": "Hi"})


def test_the_first_message_on_the_path_names_an_untitled_chat(db: Database) -> None:
    with db.write() as conn:
        _histories(conn)
    with db.read() as conn:
        found = transcript.openings(conn, ["said", "files", "edited", "answered", "none"])
    assert found == {"said": "Plan a trip", "files": "plan.pdf, map.png",
                     "edited": "Recipe for waffles"}
