"""What routes are handed: the engine of the running gateway, and the chat a request says
it is made for (`X-Hearth-Session`: for an app, a name in its own namespace,
`sessions.naming.key_for`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from hearth.engine.runtime import Engine
from hearth.sessions.naming import key_for


async def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


EngineDep = Annotated[Engine, Depends(engine_of)]  # the one way a route is handed the engine

NamedHeader = Annotated[
    str | None,
    Header(alias="X-Hearth-Session", min_length=1, max_length=200,
           description="Make the request as this chat's work, under its memory mode"),
]


async def session_named(request: Request, named: NamedHeader = None) -> str | None:
    """The key of the chat `X-Hearth-Session` names, in the requester's own namespace."""
    return named_key(request, named)


def named_key(request: Request, named: str | None) -> str | None:
    """`named`'s key for whoever makes the request (an app's names are its own)."""
    if named is None:
        return None
    app = getattr(request.state, "app", None)
    return key_for(named, app.name if app is not None else None)


SessionHeader = Annotated[str | None, Depends(session_named)]
