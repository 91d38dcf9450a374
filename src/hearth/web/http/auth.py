"""Auth for every route but /healthz and the sign-in page: the bearer token, or the
dashboard's session cookie (see `web.http.signin`) whose sign-in is still on (not signed out), which
must come with its CSRF token on any request that changes something and never from another
site's page; or an app's own token (`hearth apps add`), held to its permissions and its chats by
`web.http.permissions.enforce`. The OpenAI-compatible routes take a bearer token alone
(`bearer_only`). `/metrics` also takes the metrics token (`[metrics] token_env`), which opens
no other route (`permissions.SCRAPED`) and acts for nobody (no principal)."""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs, urlsplit

from fastapi import Request

from hearth.errors import Refusal
from hearth.privacy import principal as principals
from hearth.web.http import permissions, signin

FORM = "application/x-www-form-urlencoded"
NEEDS_TOKEN = ("This needs the gateway's token: send 'Authorization: Bearer <token>' "
               "(`hearth token` prints it).")


async def bearer_only(request: Request) -> None:
    """For the routes programs call (the OpenAI-compatible API), before `require_token`: a
    request without an `Authorization` header is refused, so the dashboard's cookie is never
    taken there (the token, the gateway's or an app's, is then checked by `require_token`)."""
    if not request.headers.get("authorization"):
        raise Refusal("unauthorized", 401, NEEDS_TOKEN)


async def require_token(request: Request) -> None:
    """The owner (the gateway's token, the signed-in cookie), or an app by its own token, held
    to its permissions and its chats there (`web.http.permissions.enforce`); `request.state.app`
    says which (None: the owner), and `request.state.principal` is fixed here, the one place
    a web request's principal is decided."""
    expected: str = request.app.state.token
    request.state.app = None
    header = request.headers.get("authorization", "")
    if not header and signin.COOKIE in request.cookies:
        await _require_cookie(request, expected, request.cookies[signin.COOKIE])
        request.state.principal = principals.OWNER  # the owner's signed-in dashboard
        return
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise Refusal("unauthorized", 401, NEEDS_TOKEN)
    given = given.strip()
    if expected and hmac.compare_digest(given.encode(), expected.encode()):
        request.state.principal = principals.OWNER  # the gateway's own token
        return
    if _scrapes(request, given):  # a metrics scraper's token, on /metrics alone
        return
    app = await request.app.state.engine.access.identify(given)
    if app is None:
        raise Refusal("unauthorized", 401,
                      "The token is not this gateway's token, nor a token of an app that is "
                      "not revoked.")
    request.state.app = app
    request.state.principal = principals.app(app.name)
    await permissions.enforce(request, app)


def _scrapes(request: Request, given: str) -> bool:
    """Is `given` the metrics token, sent to a route it opens?"""
    token: str | None = request.app.state.metrics_token
    if not token or not hmac.compare_digest(given.encode(), token.encode()):
        return False
    path = getattr(request.scope.get("route"), "path", request.url.path)
    method = "GET" if request.method == "HEAD" else request.method
    return (method, path) in permissions.SCRAPED


async def signed_in(request: Request, cookie: str | None) -> bool:
    """Is this cookie one this gateway signed, and its sign-in still on (not signed out, not
    expired)? The store is asked only about a cookie whose signature holds."""
    if cookie is None or not signin.valid(request.app.state.token, cookie):
        return False
    on: bool = await request.app.state.engine.access.signed_in(signin.key_of(cookie))
    return on


async def _require_cookie(request: Request, expected: str, cookie: str) -> None:
    if not await signed_in(request, cookie):
        raise Refusal("unauthorized", 401,
                       "This page's sign-in has ended (signed out, expired, or not this "
                       "gateway's); sign in again.")
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
