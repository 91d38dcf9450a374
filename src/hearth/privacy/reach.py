"""What the work running now may do with memory, other models and lasting work.

Every check reads the work scope (`privacy.scope.current`), whose mode came from the one
reader (`modes.mode_of`). No scope is the gateway's own work (or the owner's request), which
may do all of it. Each refusal is a `RestrictedSession` with one sentence saying why and, for
what would outlast the chat, to do it from an ordinary chat.
"""

from __future__ import annotations

from hearth.errors import Refusal
from hearth.privacy import scope as work_scope
from hearth.privacy.modes import Mode, keeps_memory, reads_memory

CODE = "restricted_session"


class RestrictedSession(Refusal):
    """Work for a restricted chat asked for something the chat's mode does not allow."""

    def __init__(self, sentence: str) -> None:
        super().__init__(CODE, 403, sentence)


class OtherModelRefused(RestrictedSession):
    """Work for a restricted chat tried to reach a model other than its turn's."""


def why(mode: Mode) -> str:
    """The clause a refusal opens with: what the chat is and what that means."""
    if mode is Mode.INCOGNITO:
        return "This chat is Incognito: it may read your memory but keeps nothing in it"
    if mode is Mode.TEMPORARY:
        return "This chat is Temporary: it neither reads nor keeps your memory"
    return ("This chat's memory setting cannot be read, so it is treated as Temporary: it "
            "neither reads nor keeps your memory")


def restricted_mode() -> Mode | None:
    """The mode of the work running now when it keeps nothing; None when it may keep."""
    scope = work_scope.current()
    if scope is None or keeps_memory(scope.mode):
        return None
    return scope.mode


def may_read_memory() -> bool:
    scope = work_scope.current()
    return scope is None or (reads_memory(scope.mode) and scope.memory)


def whose(scope: work_scope.WorkScope) -> str:
    """The clause a refusal opens with when the work's principal may not use the memory."""
    principal = scope.principal
    if principal is not None and principal.app is not None:
        return (f"This turn runs for the app {principal.app!r}, which was not given the "
                "manage_memory permission: it may neither read nor keep your memory")
    return ("This turn answers someone other than you: it may neither read nor keep your "
            "memory")


def memory_refusal() -> str | None:
    """The clause refusing the owner's memory to the work running now for who it runs for
    (an app without manage_memory, a guest), or None."""
    scope = work_scope.current()
    if scope is None or scope.memory:
        return None
    return whose(scope)


def write_refusal(what: str = "nothing was written to memory") -> str | None:
    """The sentence refusing a memory change for the work running now, or None."""
    mode = restricted_mode()
    if mode is not None:
        return f"{why(mode)}, so {what}."
    clause = memory_refusal()
    return None if clause is None else f"{clause}, so {what}."


def read_refusal(what: str = "no memory was read") -> str | None:
    scope = work_scope.current()
    if scope is None:
        return None
    if not reads_memory(scope.mode):
        return f"{why(scope.mode)}, so {what}."
    clause = memory_refusal()
    return None if clause is None else f"{clause}, so {what}."


def lasting_refusal(what: str, mode: Mode | None = None) -> str | None:
    """The sentence refusing work that would outlast a restricted chat (a standing grant, a
    scheduled job, memory), or None. `mode` is the chat's, when it is not the work running."""
    mode = mode if mode is not None else restricted_mode()
    if mode is None or keeps_memory(mode):
        return None
    return (f"{why(mode)}, and nothing it does may outlast it, so {what} was not made. "
            "Do it from an ordinary chat.")


def check_model(model_id: str) -> None:
    """Raise OtherModelRefused unless the work running now may hand what it carries to
    `model_id`: inside a restricted scope, only the model its turn named."""
    scope = work_scope.current()
    if scope is None or keeps_memory(scope.mode):
        return
    if scope.model_id is None:
        raise OtherModelRefused(
            f"{why(scope.mode)}; only its own turn's model may read its work, and this work "
            f"was not told which model that is, so {model_id!r} was not called.")
    if scope.model_id != model_id:
        raise OtherModelRefused(
            f"{why(scope.mode)}; only its own turn's model ({scope.model_id!r}) may read its "
            f"work, so {model_id!r} was not asked.")
