"""Routes for runs: a run's state and receipts, and waiting for its end."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from hearth.engine.delivery.events import until
from hearth.engine.runtime import Engine
from hearth.errors import Refusal
from hearth.web.http.deps import EngineDep

router = APIRouter()
ACTIVE = ("admitted", "running")  # a run still to end


async def _run_or_404(engine: Engine, run_id: str, with_message: bool = False
                      ) -> dict[str, Any]:
    view = await engine.reads.run_status(run_id, with_message)
    if view is None:
        raise Refusal("run_not_found", 404, f"There is no run {run_id!r}.")
    return view


@router.get("/api/runs/{run_id}")
async def get_run(run_id: str, engine: EngineDep) -> dict[str, Any]:
    return await _run_or_404(engine, run_id)


@router.get("/api/runs/{run_id}/wait")
async def wait_run(
    run_id: str,
    engine: EngineDep,
    timeout: Annotated[float, Query(gt=0, le=600)] = 30.0,
    message: Annotated[bool, Query()] = False,
) -> dict[str, Any]:
    """The run once it ends (or `timeout` seconds pass: `timed_out`); with `message=true`,
    also the view of its answer (`message`: null while it runs or when it wrote none), so a
    client needs no further read to show the end. The end is heard from before the run's
    status is read, and only its status is read before waiting: the view is read once."""
    with engine.bus.watching(run_id) as ended:
        state = await engine.reads.run_state(run_id)
        if state is None:
            raise Refusal("run_not_found", 404, f"There is no run {run_id!r}.")
        if state in ACTIVE:
            await until(ended, timeout)
    view = await _run_or_404(engine, run_id, message)
    view["timed_out"] = view["status"] in ACTIVE
    return view


class RetryBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    confirm: str | None = Field(None, max_length=100)


@router.post("/api/runs/{run_id}/retry")
async def retry_run(run_id: str, engine: EngineDep, body: RetryBody | None = None
                    ) -> JSONResponse:
    """Run an ended turn's message again. When the attempt began a step that may have
    changed something, answers 409 retry_repeats_steps with the steps and a confirm value."""
    admitted = await engine.retry(run_id, (body or RetryBody()).confirm)
    return JSONResponse({"run_id": admitted.run_id, "status": admitted.status,
                         "duplicate": admitted.duplicate}, status_code=202)
