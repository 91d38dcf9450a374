"""The sessions aggregate: one row per chat, its name, mode, title, filing (folder, tags,
pinned) and writer claim."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    cast,
    false,
    func,
    or_,
    select,
    update,
)

from hearth.store.db import now
from hearth.store.schema import sessions

TITLE_BY_OWNER = "owner"  # `title_by`: the owner renamed the chat
TITLE_BY_CHORE = "chore"  # the title chore made it from the first exchange


@dataclass(frozen=True)
class SessionRow:
    key: str
    tab_id: str
    title: str | None
    memory_mode: str
    agent: str
    model: str | None
    workspace_dir: str | None
    origin: str
    generation: int
    writer_run_id: str | None
    last_seq: int
    message_count: int
    created_at: float
    updated_at: float
    archived: bool
    trust: str
    folder: str | None = None
    tags: tuple[str, ...] = ()
    pinned: bool = False
    created_by_app: str | None = None  # the app whose token started it; None: the owner
    parent_key: str | None = None  # a helper's chat: the chat that started it

    @classmethod
    def of(cls, row: Any) -> SessionRow:
        m = row._mapping
        values = {name: m[name] for name in cls.__dataclass_fields__}
        values["tags"] = tuple(values["tags"] or ())
        values["pinned"] = bool(values["pinned"])
        return cls(**values)


# Statements on the hot paths are built once: building one costs more than running it. A
# row is read as `SessionRow` holds it: a column it does not hold (learning's cursor, read by
# `store.learned`) is left out.
_ROW = select(*(sessions.c[name] for name in SessionRow.__dataclass_fields__))
_GET = _ROW.where(sessions.c.key == bindparam("b_key"))


def get(conn: Connection, key: str) -> SessionRow | None:
    row = conn.execute(_GET, {"b_key": key}).first()
    return SessionRow.of(row) if row else None


def exists(conn: Connection, key: str) -> bool:
    return conn.execute(select(sessions.c.key).where(sessions.c.key == key)).first() is not None


def highest_chat_number(conn: Connection) -> int:
    return int(conn.execute(select(func.max(sessions.c.chat_number))).scalar() or 0)


def insert(
    conn: Connection,
    *,
    key: str,
    tab_id: str,
    memory_mode: str,
    chat_number: int | None,
    agent: str = "default",
    model: str | None = None,
    workspace_dir: str | None = None,
    origin: str = "api",
    title: str | None = None,
    trust: str = "ask",
    created_by_app: str | None = None,
) -> SessionRow:
    stamp = now()
    conn.execute(
        sessions.insert().values(
            key=key,
            tab_id=tab_id,
            memory_mode=memory_mode,
            chat_number=chat_number,
            agent=agent,
            model=model,
            workspace_dir=workspace_dir,
            origin=origin,
            title=title,
            trust=trust,
            created_by_app=created_by_app,
            tags=[],
            created_at=stamp,
            updated_at=stamp,
        )
    )
    row = get(conn, key)
    assert row is not None
    return row


Position = tuple[bool, float, str]  # (pinned, updated_at, key): where a page of a list ends


def list_page(
    conn: Connection,
    *,
    modes: tuple[str, ...],
    limit: int,
    query: str | None = None,
    folder: str | None = None,
    tag: str | None = None,
    after: Position | None = None,
    archived: bool | None = None,
    by_app: str | None = None,
) -> list[SessionRow]:
    """Pinned first, then newest first: by (pinned, updated_at, key), all descending; `after`
    is the position of the last row of the previous page. `archived` keeps only the archived
    chats (True) or only the others (False); None lists both. `by_app` keeps only the chats
    that app started (None: every chat)."""
    stmt = _ROW.where(sessions.c.memory_mode.in_(modes))
    if by_app is not None:
        stmt = stmt.where(sessions.c.created_by_app == by_app)
    if archived is not None:
        stmt = stmt.where(sessions.c.archived == archived)
    if query:
        pattern = f"%{query.replace('%', '').replace('_', '')}%"
        stmt = stmt.where(or_(sessions.c.title.ilike(pattern), sessions.c.key.ilike(pattern)))
    if folder is not None:
        stmt = stmt.where(sessions.c.folder == folder)
    if tag is not None:
        stmt = stmt.where(_has_tag(conn, tag))
    if after is not None:
        stmt = stmt.where(_after(after))
    stmt = stmt.order_by(
        sessions.c.pinned.desc(), sessions.c.updated_at.desc(), sessions.c.key.desc()
    ).limit(limit)
    return [SessionRow.of(row) for row in conn.execute(stmt)]


def _after(position: Position) -> ColumnElement[bool]:
    """Rows that sort after `position` in (pinned, updated_at, key) descending order."""
    pinned, stamp, key = position
    later_in_group = or_(
        sessions.c.updated_at < stamp,
        and_(sessions.c.updated_at == stamp, sessions.c.key < key),
    )
    same_group = and_(sessions.c.pinned == pinned, later_in_group)
    if pinned:
        return or_(sessions.c.pinned == false(), same_group)
    return same_group


def _has_tag(conn: Connection, tag: str) -> ColumnElement[bool]:
    """The chat's tags list holds `tag` (JSON, so the test is the dialect's own)."""
    if conn.dialect.name == "sqlite":
        each = func.json_each(sessions.c.tags).table_valued("value")
        return select(each.c.value).where(each.c.value == tag).exists()
    from sqlalchemy.dialects.postgresql import JSONB  # only PostgreSQL reads tags this way

    return cast(sessions.c.tags, JSONB).contains([tag])


def filing_counts(
    conn: Connection, *, modes: tuple[str, ...], archived: bool | None = None
) -> tuple[dict[str, int], dict[str, int]]:
    """How many chats in `modes` (and archived or not, when `archived` says) are in each
    folder and carry each tag."""
    folders: dict[str, int] = {}
    tags: dict[str, int] = {}
    stmt = select(sessions.c.folder, sessions.c.tags).where(sessions.c.memory_mode.in_(modes))
    if archived is not None:
        stmt = stmt.where(sessions.c.archived == archived)
    for folder, chat_tags in conn.execute(stmt):
        if folder is not None:
            folders[folder] = folders.get(folder, 0) + 1
        for tag in set(chat_tags or ()):
            tags[tag] = tags.get(tag, 0) + 1
    return folders, tags


def set_filing(conn: Connection, key: str, **values: Any) -> bool:
    """File a chat (folder, tags, pinned) or archive it. Its place by recency (`updated_at`)
    stays: filing a chat is not activity in it. False when there is no such chat."""
    result = conn.execute(update(sessions).where(sessions.c.key == key).values(**values))
    return result.rowcount == 1


def update_fields(conn: Connection, key: str, **values: Any) -> bool:
    """Change a chat's own settings (title, trust, model, agent); False when there is no such
    chat."""
    result = conn.execute(
        update(sessions).where(sessions.c.key == key).values(**values, updated_at=now())
    )
    return result.rowcount == 1


def title_if_untitled(conn: Connection, key: str, title: str) -> bool:
    """Give a kept chat its first title, in one conditional write: only while it is still
    untitled and persistent (a title the owner gave it, even a moment ago, wins); whether it
    was written."""
    result = conn.execute(
        update(sessions)
        .where(sessions.c.key == key, sessions.c.title.is_(None),
               sessions.c.memory_mode == "persistent")
        .values(title=title, title_by=TITLE_BY_CHORE)
    )
    return result.rowcount == 1


def untitle_if_derived(conn: Connection, key: str) -> bool:
    """Take a kept chat's title away when nothing but its first message made it (the title
    chore's, or none): its first message changed, so it is shown by the new first words and
    titled again after the new first exchange. A title the owner gave it, or one of unknown
    origin, stays. Whether a title was taken away."""
    result = conn.execute(
        update(sessions)
        .where(sessions.c.key == key, sessions.c.memory_mode == "persistent",
               sessions.c.title.is_not(None), sessions.c.title_by == TITLE_BY_CHORE)
        .values(title=None, title_by=None)
    )
    return result.rowcount == 1


_CLAIM = (
    update(sessions)
    .where(sessions.c.key == bindparam("b_key"))
    .where(or_(sessions.c.writer_run_id.is_(None),
               sessions.c.writer_run_id == bindparam("b_run")))
    .values(writer_run_id=bindparam("b_run"))
)
_RELEASE = (
    update(sessions)
    .where(sessions.c.key == bindparam("b_key"), sessions.c.writer_run_id == bindparam("b_run"))
    .values(writer_run_id=None)
)


def claim_writer(conn: Connection, key: str, run_id: str) -> bool:
    """Take the session's writer claim for `run_id` if nobody else holds it."""
    return conn.execute(_CLAIM, {"b_key": key, "b_run": run_id}).rowcount == 1


def release_writer(conn: Connection, key: str, run_id: str) -> None:
    conn.execute(_RELEASE, {"b_key": key, "b_run": run_id})


def release_all_writers(conn: Connection) -> int:
    """At boot nothing runs yet, so no claim left by the previous process still stands."""
    result = conn.execute(
        update(sessions).where(sessions.c.writer_run_id.is_not(None)).values(writer_run_id=None)
    )
    return result.rowcount
