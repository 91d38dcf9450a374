"""`hearth jobs list|add|run|pause|resume|delete`: the gateway's scheduled jobs over its HTTP
API (`/api/jobs`), the list as a table (rich), every refusal as the gateway's own sentence on
the error stream.

Times in the table are the terminal's local time; the schedule in words is the gateway's (a
cron job's in its own zone). Exit codes: 0 done, 1 the gateway refused (its sentence is
shown), 3 it could not be reached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from hearth.client.api import GatewayApi
from hearth.client.commands import local, run_with

PROMPT_SHOWN = 60
JSON = dict[str, Any]


class JobsApi(GatewayApi):
    """The jobs routes of one gateway."""

    def jobs(self) -> list[JSON]:
        return list(self._call("GET", "/api/jobs").get("jobs", []))

    def add_job(self, body: JSON) -> JSON:
        return self._call("POST", "/api/jobs", json=body)

    def run_job(self, job_id: int) -> JSON:
        return self._call("POST", f"/api/jobs/{job_id}/run")

    def set_job_enabled(self, job_id: int, enabled: bool) -> JSON:
        return self._call("PATCH", f"/api/jobs/{job_id}", json={"enabled": enabled})

    def delete_job(self, job_id: int) -> JSON:
        return self._call("DELETE", f"/api/jobs/{job_id}")



def _first_line(prompt: str) -> str:
    line = prompt.strip().splitlines()[0] if prompt.strip() else ""
    return line if len(line) <= PROMPT_SHOWN else line[:PROMPT_SHOWN - 1] + "…"


def table_of(jobs: list[JSON]) -> Table:
    table = Table(title="Scheduled jobs", title_justify="left")
    for name in ("ID", "Prompt", "Schedule", "Next (local)", "Last fired", "State"):
        table.add_column(name, overflow="fold")
    for job in jobs:
        state = "on" if job["enabled"] else ("done" if job["kind"] == "once"
                                            and job["last_fired_at"] else "paused")
        table.add_row(str(job["id"]), _first_line(job["prompt"]), job["schedule"],
                      local(job["next_at"]) if job["enabled"] else "—",
                      local(job["last_fired_at"]), state)
    return table


def _with_api(base: str, token: str, work: Callable[[JobsApi, Console], None]) -> int:
    return run_with(JobsApi(base, token), work)


def run_list(base: str, token: str) -> int:
    def work(api: JobsApi, out: Console) -> None:
        jobs = api.jobs()
        if jobs:
            out.print(table_of(jobs))
        else:
            out.print("No scheduled jobs. Add one with `hearth jobs add`.", markup=False)
    return _with_api(base, token, work)


def run_add(base: str, token: str, body: JSON) -> int:
    def work(api: JobsApi, out: Console) -> None:
        job = api.add_job({k: v for k, v in body.items() if v is not None})
        out.print(f"Scheduled job #{job['id']}: {job['schedule']}. Its turns run in chat "
                  f"{job['session_key']}.", markup=False, highlight=False)
    return _with_api(base, token, work)


def run_action(base: str, token: str, action: str, job_id: int) -> int:
    """run, pause, resume or delete one job, saying what was done."""
    def work(api: JobsApi, out: Console) -> None:
        if action == "run":
            fired = api.run_job(job_id)
            said = f"Job #{job_id} is running now: run {fired['run_id']} in chat " \
                   f"{fired['session_key']}."
        elif action == "delete":
            api.delete_job(job_id)
            said = f"Deleted job #{job_id} (its chat stays)."
        else:
            job = api.set_job_enabled(job_id, action == "resume")
            said = f"{'Resumed' if action == 'resume' else 'Paused'} job #{job_id}: " \
                   f"{job['schedule']}."
        out.print(said, markup=False, highlight=False)
    return _with_api(base, token, work)
