"""Auth for every route but /healthz and the sign-in page: the bearer token, or the
dashboard's session cookie (see `web.signin`), which must come with its CSRF token on any
request that changes something and never from another site's page."""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs, urlsplit

from fastapi import Request

from hearth.errors import Refusal
from hearth.web import signin

FORM = "application/x-www-form-urlencoded"


async def require_token(request: Request) -> None:
    expected: str = request.app.state.token
    header = request.headers.get("authorization", "")
    if not header and signin.COOKIE in request.cookies:
        await _require_cookie(request, expected, request.cookies[signin.COOKIE])
        return
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise Refusal("unauthorized", 401,
                       "This needs the gateway's token: send 'Authorization: Bearer <token>' "
                       "(`hearth token` prints it).")
    if not expected or not hmac.compare_digest(given.strip().encode(), expected.encode()):
        raise Refusal("unauthorized", 401, "The token is not this gateway's token.")


async def _require_cookie(request: Request, expected: str, cookie: str) -> None:
    if not signin.valid(expected, cookie):
        raise Refusal("unauthorized", 401,
                       "This page's sign-in has expired or is not this gateway's; sign in again.")
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.headers.get("host", ""):
        raise Refusal("forbidden_origin", 403,
                       "This request came from another site's page, so it was refused.")
    if request.method in signin.SAFE_METHODS:
        return
    given = request.headers.get("x-csrf-token")
    if given is None and request.headers.get("content-type", "").startswith(FORM):
        given = (parse_qs((await request.body()).decode("utf-8", "replace"))
                 .get("csrf", [None])[0])
    if not signin.csrf_ok(expected, cookie, given):
        raise Refusal("csrf_failed", 403,
                       "This change did not carry the page's CSRF token; reload the page and "
                       "try again.")
