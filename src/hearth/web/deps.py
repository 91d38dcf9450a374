"""What routes are handed: the engine of the running gateway, and the chat a request says
it is made for (`X-Hearth-Session`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from hearth.engine.runtime import Engine


async def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


EngineDep = Annotated[Engine, Depends(engine_of)]  # the one way a route is handed the engine

SessionHeader = Annotated[
    str | None,
    Header(alias="X-Hearth-Session", min_length=1, max_length=200,
           description="Make the request as this chat's work, under its memory mode"),
]
