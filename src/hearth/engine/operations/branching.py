"""The doors that branch a chat: regenerate an answer (keeping the earlier one as a variant),
retry a turn that did not complete, edit and resend a message, rewind, choose a variant, fork.

Each door moves the chat's head (`store.branches.move_head`) and, when it runs a turn again,
admits a run for the message at the new head, in one writer transaction; nothing is deleted.
A door that would run again a turn whose attempt began a step that may have changed something
asks first (`repeat_guard.ask_first`, under the door's name); the yes is bound to those steps.
Every door refuses while the chat has a turn running or waiting (409 `turn_running`): a head
moved under a running turn would leave its answer on another branch.

Messages are addressed by their index in the visible list (`store.branches`), the coordinate
`GET /api/sessions/{key}` serves and the session map speaks.

A fork holds the files its messages sent: each gets a row of the fork's own (a new id, which
the copied message's `meta.attachments` names) and its bytes a second name in the fork's
folder, a hard link (`sessions.attachment_links`), made inside the fork's transaction. So the
fork downloads and reads them as its own, deleting either chat leaves the other's whole, and
the bytes go with the last chat holding them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from hearth.engine.intake.admission import Admitted, admit_in, validate
from hearth.engine.operations import repeat_guard
from hearth.errors import Refusal
from hearth.privacy import principal as principals
from hearth.privacy.modes import mode_of, restricted
from hearth.privacy.principal import Principal
from hearth.sessions import attachment_links, attachments as attachment_files, chats
from hearth.sessions.folders import chat_folder
from hearth.store import (
    attachments as attachment_store,
    audit,
    branches,
    owed_chores as owed_store,
    runs as run_store,
    sessions as session_store,
    transcript,
)
from hearth.store.db import Database
from hearth.store.runs import RunRow
from hearth.store.sessions import SessionRow
from hearth.store.transcript import EventRow

ACTOR = "owner"
TITLE_CHORE = "title"  # engine.background.titles.KIND: a title owed for the first exchange


@dataclass(frozen=True)
class Moved:
    """Where a door left the chat: its head's visible index (-1: before the first message),
    and the run it started, if any."""

    head_index: int
    admitted: Admitted | None


# ------------------------------------------------------------------ running a turn again


async def regenerate(db: Database, key: str, index: int | None, confirm: str | None) -> Admitted:
    """Answer the message of the answer at `index` (None: the last answer) again. A completed
    answer is kept as a variant; one that did not complete is retried in its place."""
    answer = await db.reading(_answer_at, key, index)
    run = await _run_of(db, answer)
    door = "chat.regenerate" if run.status == "complete" else "chat.retry_failed_turn"
    return await _run_again(db, run, confirm, door)


async def retry(db: Database, run_id: str, confirm: str | None) -> Admitted:
    """Run an ended turn's message again (Retry), in the attempt's place. A retry of a turn
    already retried (a double click) answers with that retry, marked `duplicate`."""
    run, newer = await db.reading(_run_and_newer, run_id)
    if run is None:
        raise Refusal("run_not_found", 404, f"There is no run {run_id!r}.")
    if newer is not None:
        return Admitted(newer.run_id, "started", True, newer.session_key,
                        newer.user_event_seq or 0)
    return await _run_again(db, run, confirm, "chat.retry_failed_turn")


def _run_and_newer(conn: Connection, run_id: str) -> tuple[RunRow | None, RunRow | None]:
    run = run_store.get(conn, run_id)
    return run, (branches.newer_run(conn, run) if run is not None else None)


async def _run_again(db: Database, run: RunRow, confirm: str | None, door: str) -> Admitted:
    if not run.ended:
        raise Refusal("turn_running", 409,
                      "This turn has not ended; stop it first, then run it again.")
    await repeat_guard.ask_first(db, run.run_id, confirm, door=door)
    return await db.writing(_rerun_in, run, door)


def _rerun_in(conn: Connection, run: RunRow, door: str) -> Admitted:
    asked = _message_of(conn, run)
    _refuse_if_busy(conn, run.session_key)
    branches.move_head(conn, run.session_key, asked.event_id)
    return _admit_again(conn, asked, door, {"again_of": run.run_id},
                        principals.decode(run.principal))


def _admit_again(conn: Connection, asked: EventRow, door: str,
                 detail: dict[str, object], principal: Principal) -> Admitted:
    """A run for the message at the head, `asked`, written no second time, on behalf of the
    run it repeats (`principal`: a retry keeps the original's)."""
    row = chats.chat_in(conn, asked.session_key)
    run_id = run_store.new_run_id()
    run_store.insert(conn, run_id=run_id, session_key=asked.session_key, tab_id=row.tab_id,
                     generation=row.generation, user_event_seq=asked.seq, kind="regenerate",
                     principal=principal.within(row.created_by_app).encode())
    audit.write(conn, door, actor=ACTOR, session_key=asked.session_key, run_id=run_id,
                detail=detail)
    return Admitted(run_id, "started", False, asked.session_key, asked.seq)


# ------------------------------------------------------------------ edit, rewind, variants


async def edit(db: Database, key: str, index: int, text: str, confirm: str | None,
               meta: dict[str, Any] | None = None, *, principal: Principal) -> Admitted:
    """Send `text` in place of the owner's message at `index`: a new branch from its parent
    (its event carrying `meta` too: a mention's expansion), a new message of `principal`'s.
    The same words again are that message run again, asked about as a retry is (on behalf of
    the run it repeats)."""
    validate(text, None)
    message = await db.reading(_visible, key, index)
    if message.kind != "user":
        raise Refusal("not_a_message_of_yours", 422,
                      "Only a message you wrote can be edited; this one is the assistant's.")
    if text == str(message.content.get("text", "")):
        run = await _run_of(db, message)
        return await _run_again(db, run, confirm, "chat.edit_resend")
    return await db.writing(_edit_in, message, text, {**(meta or {}),
                                                      "edit_of": message.event_id}, principal,
                            first=index == 0)


def _edit_in(conn: Connection, message: EventRow, text: str, meta: dict[str, Any],
             principal: Principal, *, first: bool = False) -> Admitted:
    """The edit as a new branch; an edit of the first message also takes away a title only
    the first exchange made (`sessions.untitle_if_derived`: never the owner's), so the chat
    is shown by the new words and titled again from them."""
    _refuse_if_busy(conn, message.session_key)
    if first:
        session_store.untitle_if_derived(conn, message.session_key)
        owed_store.drop_kind(conn, message.session_key, TITLE_CHORE)  # owed for the old words
    branches.move_head(conn, message.session_key, message.parent_event_id)
    admitted, _event = admit_in(conn, message.session_key, text, None,
                                message.source_channel, "chat", meta, principal=principal)
    audit.write(conn, "chat.edit_resend", actor=ACTOR, session_key=message.session_key,
                run_id=admitted.run_id, detail={"edit_of": message.event_id})
    return admitted


async def rewind(db: Database, key: str, index: int, confirm: str | None) -> Moved:
    """Move the head back to the message at `index`. A message of the owner's is then
    answered again (asked first, as a retry is); at an answer nothing runs."""
    message = await db.reading(_visible, key, index)
    if message.kind != "user":
        await db.writing(_rewind_in, message)
        return Moved(index, None)
    run = await _run_of(db, message)
    if not run.ended:
        raise Refusal("turn_running", 409,
                      "This chat has a turn running; stop it first, then rewind.")
    await repeat_guard.ask_first(db, run.run_id, confirm, door="chat.rewind")
    return Moved(index, await db.writing(_rerun_in, run, "chat.rewind"))


def _rewind_in(conn: Connection, message: EventRow) -> None:
    _refuse_if_busy(conn, message.session_key)
    branches.move_head(conn, message.session_key, message.event_id)
    audit.write(conn, "chat.rewind", actor=ACTOR, session_key=message.session_key,
                detail={"to": message.event_id})


async def choose_variant(db: Database, key: str, index: int, variant: int) -> Moved:
    """Show variant `variant` (from 0) of the message at `index`: the head goes to the newest
    message of that branch, so what followed it there comes back with it (the head's visible
    index is in the answer)."""
    return await db.writing(_choose_in, key, index, variant)


def _choose_in(conn: Connection, key: str, index: int, variant: int) -> Moved:
    holder = branches.turn_start(conn, key, _visible(conn, key, index))
    found = branches.variants(conn, key, [holder]).get(holder.event_id)
    count = found.count if found else 1
    if not 0 <= variant < count:
        raise Refusal("variant_out_of_range", 422,
                      f"This message has {count} variant{'s' if count != 1 else ''}; "
                      f"variant must be from 0 to {count - 1}.")
    if found is not None and variant != found.index:  # (one shown already: nothing moves)
        _refuse_if_busy(conn, key)
        branches.move_head(conn, key, branches.newest_leaf(conn, key, found.siblings[variant]))
    return Moved(branches.visible_count(conn, key) - 1, None)


# ------------------------------------------------------------------ fork


async def fork(db: Database, key: str, index: int, memory_mode: str | None,
               files_dir: Path | None = None) -> SessionRow:
    """A new chat holding this chat's path up to the message at `index`, made with the same
    agent, model, folder and trust, and the files those messages sent (their bytes linked
    into its folder under `files_dir`). A restricted chat forks only into its own mode."""
    return await db.writing(_fork_in, key, index, memory_mode, files_dir)


def _fork_in(conn: Connection, key: str, index: int, memory_mode: str | None,
             files_dir: Path | None) -> SessionRow:
    source = chats.chat_in(conn, key)
    last = _visible(conn, key, index)
    mode = memory_mode or source.memory_mode
    if mode != source.memory_mode and restricted(mode_of(source.memory_mode)):
        raise Refusal("fork_mode_fixed", 409,
                      f"This chat is {source.memory_mode}; it forks only into a "
                      f"{source.memory_mode} chat, so that its words stay as kept as they are.")
    made = chats.insert_new(conn, chats.checked_new(
        memory_mode=mode, agent=source.agent, model=source.model, trust=source.trust,
        origin="fork", created_by_app=source.created_by_app))  # an app's fork is its own
    held = _copy_path(conn, key, made.key, last.seq)
    if not restricted(mode_of(mode)):
        session_store.update_fields(conn, made.key, title=_fork_title(source),
                                    workspace_dir=source.workspace_dir, folder=source.folder)
    audit.write(conn, "chat.fork", actor=ACTOR, session_key=made.key,
                detail={"from": key, "through": last.event_id})
    if files_dir is not None and held:
        _link_files(files_dir, key, made.key, held)
    return chats.chat_in(conn, made.key)


def _copy_path(conn: Connection, key: str, fork_key: str, through: int) -> set[str]:
    """The path's events up to seq `through` appended to the fork, each message's files with
    rows of the fork's own (its meta naming their new ids); the hashes of those files."""
    path = branches.path_through(conn, key, through)
    sent = attachment_store.of_messages(conn, key, [e.seq for e in path if e.kind == "user"])
    ids = {row.id: attachment_store.new_id() for rows in sent.values() for row in rows}
    for event in path:
        copied = transcript.append(conn, fork_key, event.kind, event.content,
                                   meta=_files_renamed(event.meta, ids),
                                   source_channel=event.source_channel)
        attachment_store.share_with(conn, sent.get(event.seq, []), fork_key, copied.seq, ids)
    return {row.sha256 for rows in sent.values() for row in rows}


def _files_renamed(meta: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """A message's meta with the files it sent named by the fork's ids for them."""
    named = meta.get("attachments") if isinstance(meta, dict) else None
    if not isinstance(named, list):
        return meta
    renamed = [{**f, "id": ids.get(str(f.get("id")), f.get("id"))} if isinstance(f, dict)
               else f for f in named]
    return {**meta, "attachments": renamed}


def _link_files(files_dir: Path, key: str, fork_key: str, hashes: set[str]) -> None:
    """The parent's files given a second name in the fork's new folder (a file the parent
    no longer has is skipped: the fork reads it as the parent would). A disk that refuses
    takes the fork's folder with it, and the fork's transaction fails."""
    folder = attachment_files.folder_of(files_dir, fork_key)
    try:
        for sha256 in sorted(hashes):
            try:
                attachment_links.share(attachment_files.path_of(files_dir, key, sha256), folder)
            except FileNotFoundError:
                continue
    except OSError as error:
        shutil.rmtree(chat_folder(files_dir, fork_key), ignore_errors=True)
        raise Refusal("fork_failed", 503,
                      f"The fork could not hold this chat's files ({error.strerror or error}); "
                      "nothing was made. Try again once the disk has room.") from None


def _fork_title(source: SessionRow) -> str | None:
    return f"{source.title} (fork)"[:200] if source.title else None


# ------------------------------------------------------------------ reading


def _visible(conn: Connection, key: str, index: int) -> EventRow:
    chats.chat_in(conn, key)  # 404 for a chat that is not there
    found = branches.visible_at(conn, key, index)
    if found is None:
        raise Refusal("message_not_found", 404,
                      f"This chat has no message at index {index}.")
    return found


def _answer_at(conn: Connection, key: str, index: int | None) -> EventRow:
    """The answer at `index`, or the chat's last event of a run (None): a failed turn may have
    no answer, only its ending's notice."""
    if index is not None:
        found = _visible(conn, key, index)
        if found.kind != "assistant":
            raise Refusal("not_an_answer", 422,
                          "Only an answer can be regenerated; edit your message instead.")
        return found
    chats.chat_in(conn, key)
    last = branches.last_of_a_run(conn, key)
    if last is None:
        raise Refusal("nothing_to_regenerate", 409, "This chat has no answer to regenerate.")
    return last


async def _run_of(db: Database, event: EventRow) -> RunRow:
    run = await db.reading(run_store.get, event.run_id) if event.run_id else None
    if run is None:
        raise Refusal("not_retryable", 422,
                      "This message was not answered by a turn here (an imported or forked "
                      "message); send it again instead.")
    return run


def _message_of(conn: Connection, run: RunRow) -> EventRow:
    asked = (transcript.at(conn, run.session_key, run.user_event_seq)
             if run.user_event_seq else None)
    if asked is None or asked.kind != "user":
        raise Refusal("not_retryable", 422, "This run was not started by a message.")
    return asked


def _refuse_if_busy(conn: Connection, key: str) -> None:
    if run_store.any_active(conn, key):
        raise Refusal("turn_running", 409,
                      "This chat has a turn running or waiting; stop it or let it finish "
                      "first.")
    if session_store.get(conn, key) is None:
        raise Refusal("session_not_found", 404, f"There is no chat named {key!r}.")
