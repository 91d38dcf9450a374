"""Archiving a chat (`chats.update(archived=...)`) and what a chat runs on (`runs_on`, checked
against the engine's `Choices`): an archived chat leaves the list, its search and the filing
index, keeps its place by recency, and comes back when restored; a restricted chat is never
archived; a model or agent that is not among the choices changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from hearth.errors import Refusal
from hearth.sessions import chats
from hearth.store.db import Database
from tests.engine_harness import blocking_chats

CHOICES = chats.Choices(models=("local", "cloud"), agents=("default", "coder"))


def listed(db: Database, **filters: Any) -> list[str]:
    rows, _ = blocking_chats.list_chats(db, limit=200, query=None, cursor=None, **filters)
    return [row.key for row in rows]


def test_an_archived_chat_leaves_the_list_and_the_index(db: Database) -> None:
    kept = blocking_chats.open_chat(db).session.key
    gone = blocking_chats.open_chat(db).session
    blocking_chats.update(db, kept, filing={"folder": "Work", "tags": ["q3"]})
    blocking_chats.update(db, gone.key, filing={"folder": "Old", "tags": ["q3"]})
    archived = blocking_chats.update(db, gone.key, archived=True)
    assert archived.archived and archived.updated_at == gone.updated_at  # not activity
    assert listed(db) == [kept] and listed(db, archived=True) == [gone.key]
    assert listed(db, folder="Old") == [] and listed(db, folder="Old", archived=True) == [gone.key]
    index = blocking_chats.filing_index(db)
    assert index.folders == [("Work", 1)] and index.tags == [("q3", 1)]
    blocking_chats.update(db, gone.key, archived=False)
    assert set(listed(db)) == {kept, gone.key} and listed(db, archived=True) == []


@pytest.mark.parametrize("mode", ["incognito", "temporary"])
def test_a_restricted_chat_is_never_archived(db: Database, mode: str) -> None:
    key = blocking_chats.open_chat(db, memory_mode=mode).session.key
    with pytest.raises(Refusal) as refused:
        blocking_chats.update(db, key, archived=True)
    assert (refused.value.code, refused.value.status) == ("restricted_session", 403)
    assert blocking_chats.get_chat(db, key).archived is False


def test_what_a_chat_runs_on_is_one_of_the_choices(db: Database) -> None:
    key = blocking_chats.open_chat(db, memory_mode="temporary").session.key
    changed = blocking_chats.update(db, key, runs_on={"model": "cloud", "agent": "coder"},
                                    choices=CHOICES, trust="trusted")
    assert (changed.model, changed.agent, changed.trust) == ("cloud", "coder", "trusted")
    for runs_on, code in (({"model": "gpt-9"}, "unknown_model"),
                          ({"agent": "ghost"}, "unknown_agent"),
                          ({"model": 5}, "unknown_model"),
                          ({"temperature": 1}, "invalid_request")):
        with pytest.raises(Refusal) as refused:
            blocking_chats.update(db, key, title="Renamed", runs_on=runs_on, choices=CHOICES)
        assert refused.value.code == code
    kept = blocking_chats.get_chat(db, key)
    assert (kept.model, kept.agent, kept.title) == ("cloud", "coder", "Temporary chat")
    back = blocking_chats.update(db, key, runs_on={"model": None, "agent": None},
                                 choices=CHOICES)
    assert (back.model, back.agent) == (None, "default")
