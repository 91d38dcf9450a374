"""The work scope: which session a piece of work is done for, and in which memory mode.

A turn sets it (`as_work_of`) for the whole of its work, with the run's principal and whether
that principal may use the owner's memory (`memory`: the owner's own work, an app holding
`manage_memory`). It lives in a contextvar, so it
follows the work into asyncio tasks (which copy the context when made) and `asyncio.to_thread`
(which runs in a copy of it). A thread pool does NOT carry it on its own: work handed to a
plain `ThreadPoolExecutor` runs with no scope, and a restricted chat's data would be handled
as nobody's. Every pool the gateway uses carries the context (`hearth.threads`, the one module
that may make pools and threads) — the event loop's default executor included.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hearth.privacy.modes import Mode, mode_of
from hearth.privacy.principal import Principal
from hearth.threads import ContextCarryingExecutor

ScopeCarryingExecutor = ContextCarryingExecutor  # the scope is one of the context's variables


@dataclass(frozen=True)
class WorkScope:
    session_key: str
    mode: Mode
    model_id: str | None = None  # the model the turn runs on, once it has named it
    principal: Principal | None = None  # on whose behalf (None: the gateway's own chore)
    memory: bool = True  # may the work read and keep the owner's memory (its mode permitting)


_current: contextvars.ContextVar[WorkScope | None] = contextvars.ContextVar(
    "hearth_work_scope", default=None)


def current() -> WorkScope | None:
    """The scope of the work running now, or None for the gateway's own work."""
    return _current.get()


@contextmanager
def as_work_of(session_key: str, recorded_mode: object, principal: Principal | None = None,
               *, memory: bool = True) -> Iterator[WorkScope]:
    """Run the enclosed work as `session_key`'s, in the mode its record says (read by the one
    reader, failing closed), on behalf of `principal`, using the owner's memory only when
    `memory` (and the mode) allow it."""
    scope = WorkScope(session_key, mode_of(recorded_mode), principal=principal, memory=memory)
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


@contextmanager
def answered_by(model_id: str) -> Iterator[WorkScope | None]:
    """Name the model the current work's turn runs on: inside a restricted scope, the only
    model its work may reach (see `privacy.reach.model_may_read`)."""
    scope = _current.get()
    if scope is None:
        yield None
        return
    named = WorkScope(scope.session_key, scope.mode, model_id, scope.principal, scope.memory)
    token = _current.set(named)
    try:
        yield named
    finally:
        _current.reset(token)


def install_default_executor(loop: Any, workers: int = 8) -> ScopeCarryingExecutor:
    """Make the loop's default executor (`run_in_executor(None, ...)`) carry the scope."""
    executor = ScopeCarryingExecutor(max_workers=workers, thread_name_prefix="hearth")
    loop.set_default_executor(executor)
    return executor
