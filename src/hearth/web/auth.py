"""Bearer-token auth: every route but /healthz needs `Authorization: Bearer <token>`."""

from __future__ import annotations

import hmac

from fastapi import Request

from hearth.errors import Refusal


async def require_token(request: Request) -> None:
    expected: str = request.app.state.token
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise Refusal("unauthorized", 401,
                       "This needs the gateway's token: send 'Authorization: Bearer <token>' "
                       "(`hearth token` prints it).")
    if not expected or not hmac.compare_digest(given.strip().encode(), expected.encode()):
        raise Refusal("unauthorized", 401, "The token is not this gateway's token.")
