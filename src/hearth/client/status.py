"""`hearth status`: the running gateway at a glance in the terminal (rich), from its
`GET /api/status` (the JSON beside `/metrics`): its version and database, turns running and
queued, turns by ending since it started, model calls and tokens by model with each
breaker, tool calls, deliveries that failed or are unknown, owed chores, and how long the
store's commits and admissions take.

Exit codes, as the other client commands: 0 shown, 1 the gateway refused (its sentence is
shown: a wrong token), 3 it could not be reached.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.console import Console, Group
from rich.table import Table

from hearth.client.api import GatewayApi
from hearth.client.commands import run_with

JSON = dict[str, Any]
WAITING_ON_OWNER = ("failed", "unknown")  # delivery states the owner settles (the desk)


class StatusApi(GatewayApi):
    def status(self) -> JSON:
        return self._call("GET", "/api/status")


def run_status(base: str, token: str) -> int:
    def work(api: StatusApi, out: Console) -> None:
        out.print(view_of(api.status()))
    return run_with(StatusApi(base, token), work)


def view_of(status: JSON) -> Group:
    """Everything `hearth status` prints, in the order read."""
    return Group(_gateway(status), _turns(status), _models(status), _tools(status),
                 _waiting(status))


def _gateway(status: JSON) -> Table:
    started = datetime.fromtimestamp(status["started_at"]).astimezone()
    table = _pairs("Hearth gateway")
    table.add_row("version", str(status["version"]))
    table.add_row("database", str(status["db_engine"]))
    table.add_row("started", started.strftime("%Y-%m-%d %H:%M:%S"))
    table.add_row("admission", _timing(status["admission"]))
    table.add_row("store commits", _timing(status["store"]["commit_seconds"]))
    return table


def _turns(status: JSON) -> Table:
    turns = status["turns"]
    table = _pairs("Turns")
    table.add_row("running", str(turns["running"]))
    table.add_row("queued", f"{turns['queued']} in {turns['chats_queued']} chat(s), "
                  f"at most {turns['deepest']} in one")
    ended = turns["ended"]
    table.add_row("ended since start", ", ".join(f"{code} {n}" for code, n in ended.items())
                  or "none yet")
    table.add_row("turn time", _timing(turns["seconds"]))
    return table


def _models(status: JSON) -> Table:
    table = Table(title="Models", title_justify="left")
    for name in ("Model", "Calls", "Not ok", "Tokens in", "Tokens out", "Failovers",
                 "Breaker"):
        table.add_column(name, overflow="fold")
    for model in status["models"]:
        breaker = model["breaker"] or "—"
        if model["failures"]:
            breaker += f" ({model['failures']} failed in a row)"
        table.add_row(model["model"], str(model["calls"]), str(model["not_ok"]),
                      f"{model['tokens_in']:,}", f"{model['tokens_out']:,}",
                      str(model["failovers"]), breaker)
    return table


def _tools(status: JSON) -> Table:
    table = Table(title="Tool calls since start", title_justify="left")
    for name in ("Tool", "Decision", "Status", "Calls"):
        table.add_column(name, overflow="fold")
    for call in status["tools"]:
        table.add_row(call["tool"], call["decision"], call["status"], str(call["calls"]))
    return table


def _waiting(status: JSON) -> Table:
    deliveries, owed = status["deliveries"], status["owed_chores"]
    table = _pairs("Waiting on the owner")
    for state in WAITING_ON_OWNER:
        table.add_row(f"deliveries {state}", str(deliveries.get(state, 0)))
    table.add_row("owed chores", ", ".join(f"{kind} {n}" for kind, n in owed.items())
                  or "none")
    return table


def _pairs(title: str) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    return table


def _timing(timing: JSON) -> str:
    """`n, mean x ms, p50 <= y ms, p95 <= z ms` ("none yet" before the first)."""
    if not timing["count"]:
        return "none yet"
    return (f"{timing['count']}, mean {timing['mean'] * 1000:.1f} ms, "
            f"p50 <= {timing['p50'] * 1000:g} ms, p95 <= {timing['p95'] * 1000:g} ms")
