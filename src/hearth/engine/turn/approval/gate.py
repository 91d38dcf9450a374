"""The gate every tool call passes before it runs: privacy, policy, then the approval rules.

In order: a call the privacy fence refuses for a restricted chat's work (memory it may not
keep or read, the memory folder, lasting work, a command where there is no sandbox) is
refused before anything else is asked (`tools.fence`); a tool the policy does not give this
agent is refused; a call that only reads where it runs goes ahead (a tool whose own code only
reads, or a command placed in the read-only sandbox; never a command judged by its text).

A call that may change something is then judged by the run's principal (fixed at admission,
`engine.access.principals`): only the owner's own work (not an app's, not a channel guest's, not a
helper's report) may go ahead on the chat's trust or a standing grant (a shell grant limited
to a prefix covers one simple command beyond it), or without asking for a tool that needs no
approval (memory_remember). Anyone else's call asks the owner, the card saying on whose
behalf; where nobody can answer (a job's turn, a helper's, a stateless request's) it is
refused with a sentence. Every decision writes an audit row naming who decided and on whose
behalf the call was made.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from hearth.engine.access.principals import owners_own
from hearth.engine.turn.turn_state import CallScope
from hearth.models.types import ToolCall
from hearth.privacy import reach
from hearth.store import approvals, audit, ledger, transcript
from hearth.store.approvals import ApprovalRow
from hearth.tools import fence, policy
from hearth.tools.base import Tool, effect_of
from hearth.tools.shell_screen import one_command_beyond

UNATTENDED_KINDS = ("job", "helper", "api")
WHOSE = {"job": "job's", "helper": "helper's", "api": "stateless request's"}
TARGET_ARGUMENTS = ("path", "command", "url")


def target_of(args: dict[str, Any]) -> str | None:
    """What a call acts on, for grants: its path, command or URL, whole (a grant is matched
    against all of it; records keep `shown_target`)."""
    for name in TARGET_ARGUMENTS:
        value = args.get(name)
        if isinstance(value, str):
            return value
    return None


def shown_target(args: dict[str, Any]) -> str | None:
    """The target as an approval card and the audit show it (its first 500 characters)."""
    target = target_of(args)
    return None if target is None else target[:500]


async def permit(turn: CallScope, position: int, call: ToolCall, tool: Tool) -> str | None:
    """None when the call may run; otherwise the sentence that refuses it."""
    fenced = fence.refusal(tool, call.arguments, turn.context)
    if fenced is not None:
        await _audit(turn, call, "refused", "privacy", "the chat keeps nothing")
        return fenced
    verdict = policy.judge(tool.name, turn.config, turn.agent)
    if not verdict.allowed:
        await _audit(turn, call, "refused", "policy", verdict.reason)
        return f"{call.name} is not available to this agent ({verdict.reason}), so it was not run."
    effect = effect_of(tool, call.arguments, turn.context)
    target = target_of(call.arguments)
    if effect == "reads":
        await _audit(turn, call, "allowed", "policy", "it only reads", effect)
        return None
    if not await _owners_own(turn):  # an app's, a guest's, a helper's report: ask the owner
        return await _ask_for_other(turn, position, call, effect)
    if not getattr(tool, "needs_approval", True):
        await _audit(turn, call, "allowed", "policy", "it changes only the owner's memory", effect)
        return None
    if turn.trust == "trusted":
        await _audit(turn, call, "allowed", "trust", "the chat is trusted", effect)
        return None
    narrower = one_command_beyond if tool.placed == "command" else None
    covered = await turn.db.reading(approvals.granted, turn.agent, tool.name, target, narrower)
    if covered:
        await _audit(turn, call, "allowed", "grant", "a standing grant covers it", effect)
        return None
    if turn.run.kind in UNATTENDED_KINDS:
        await _audit(turn, call, "refused", "unattended", "nobody can answer for this turn", effect)
        return (f"{call.name} may change something and needs the owner's approval, but nobody "
                f"can answer for this {WHOSE[turn.run.kind]} turn, so it was not run. Ask for it "
                "from a chat, or add a standing grant.")
    return await _ask_owner(turn, position, call, effect, shown_target(call.arguments))


async def _owners_own(turn: CallScope) -> bool:
    """Whether the run is the owner's own work: its principal is the owner and its message is
    not a helper's report (the helper's words, admitted for the chat)."""
    if not turn.principal.is_owner:
        return False
    seq = turn.run.user_event_seq
    if seq is None:
        return True
    event = await turn.db.reading(transcript.at, turn.session_key, seq)
    meta = event.meta if event is not None and isinstance(event.meta, dict) else {}
    return owners_own(turn.run.principal, meta)


async def _ask_for_other(turn: CallScope, position: int, call: ToolCall,
                         effect: str) -> str | None:
    """A call made on someone else's behalf: never on trust or a grant. The owner is asked,
    or, where nobody can answer, it is refused."""
    if turn.run.kind in UNATTENDED_KINDS:  # (a helper's report, the owner's, is a chat's run)
        await _audit(turn, call, "refused", "unattended",
                     "it runs for someone else and nobody can answer for this turn", effect)
        return (f"{call.name} may change something, and this {WHOSE[turn.run.kind]} turn runs "
                f"for {turn.principal.shown()}: only the owner may allow such a call, and nobody "
                "can answer for this turn, so it was not run.")
    return await _ask_owner(turn, position, call, effect, shown_target(call.arguments))


async def _ask_owner(turn: CallScope, position: int, call: ToolCall, effect: str,
                     target: str | None) -> str | None:
    row = await turn.db.writing(_asked, turn, position, call, effect, target)
    if row.status == "pending":
        turn.desk.announce(row)
    turn.tools_running += 1  # waiting on the owner stops an unattended turn's idle clock
    turn.waiting_on_owner += 1
    try:
        answered = await turn.desk.wait(row.id)
    finally:
        turn.tools_running -= 1
        turn.waiting_on_owner -= 1
        turn.touch()
    if answered.status == "allowed":
        await _audit(turn, call, "allowed", "owner", answered.decision or "allowed", effect)
        return None
    sentence = ("The owner denied this call, so it was not run. Carry on without it."
                if answered.status == "denied" else
                "This call was not run: its approval was withdrawn before the owner answered.")
    await turn.db.writing(ledger.record_denied, run_id=turn.run_id, call_id=call.call_id,
                          receipt=f"Not run: {answered.status} by the owner.")
    await _audit(turn, call, "denied", "owner", answered.status, effect)
    return sentence


def _asked(conn: Connection, turn: CallScope, position: int, call: ToolCall, effect: str,
           target: str | None) -> ApprovalRow:
    row = approvals.ask(conn, run_id=turn.run_id, session_key=turn.session_key,
                        call_id=call.call_id, agent=turn.agent, tool=call.name,
                        arguments=call.arguments, effect=effect, target=target,
                        principal=turn.run.principal)
    ledger.record_requested(conn, run_id=turn.run_id, session_key=turn.session_key,
                            call_id=call.call_id, position=position, tool=call.name,
                            arguments=call.arguments, effect=effect)
    return row


async def _audit(turn: CallScope, call: ToolCall, decision: str, by: str, reason: str,
                 effect: str | None = None) -> None:
    detail = {"tool": call.name, "call_id": call.call_id, "effect": effect, "reason": reason,
              "target": _audited_target(call),  # read here: the scope is this task's
              "for": turn.run.principal}
    await turn.db.writing(audit.write, f"tool.{decision}", actor=by,
                          session_key=turn.session_key, run_id=turn.run_id, detail=detail,
                          durable=False)


def _audited_target(call: ToolCall) -> str | None:
    """The call's target for the audit row; withheld for a chat that keeps nothing (a path or
    command can carry what the chat said)."""
    if reach.restricted_mode() is not None:
        return None
    return shown_target(call.arguments)
