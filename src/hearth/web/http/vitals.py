"""The gateway process's own figures on `/healthz`, shown to the owner alone: how many asyncio
tasks its event loop holds (`tasks`), so a long run (bench/soak.py) can see that they do not
grow. Only a request carrying the gateway's token (`Authorization: Bearer <token>`) gets them;
anyone else's `/healthz` stays as it was. The count is `len(asyncio.all_tasks())`, one pass
over the loop's set of live tasks: cheap at any size the gateway reaches, and no store work."""

from __future__ import annotations

import asyncio
import hmac

from fastapi import Request


def owner_figures(request: Request) -> dict[str, int]:
    """`{"tasks": N}` for a request carrying the gateway's token, else nothing."""
    if not _carries_token(request):
        return {}
    return {"tasks": len(asyncio.all_tasks())}


def _carries_token(request: Request) -> bool:
    expected: str = request.app.state.token
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip() or not expected:
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())
