"""What routes are handed: the engine of the running gateway."""

from __future__ import annotations

from fastapi import Request

from hearth.engine.runtime import Engine


async def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine
