"""Auth for every route but /healthz and the sign-in page: the bearer token, or the
dashboard's session cookie (see `web.http.signin`) whose sign-in is still on (not signed out), which
must come with its CSRF token on any request that changes something and never from another
site's page; or an app's own token (`hearth apps add`), held to its permissions and its chats by
`web.http.permissions.enforce`. The OpenAI-compatible routes take a bearer token alone
(`bearer_only`). `/metrics` also takes the metrics token (`[metrics] token_env`), which opens
no other route (`permissions.SCRAPED`) and acts for nobody (no principal).

Who sent a request is decided from its headers alone (`sender_of`), before any byte of its
body is read (`web.http.limits.BodyLimit` asks first), and once: the rest (CSRF, origin, an
app's permissions) is `require_token`'s, per route."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from fastapi import Request

from hearth.engine.access.apps import App
from hearth.errors import Refusal
from hearth.privacy import principal as principals
from hearth.privacy.principal import Principal
from hearth.web.http import permissions, signin

FORM = "application/x-www-form-urlencoded"
SENDER = "hearth.sender"  # in a request's scope: who sent it (`sender_of`), once decided
NEEDS_TOKEN = ("This needs the gateway's token: send 'Authorization: Bearer <token>' "
               "(`hearth token` prints it).")


async def bearer_only(request: Request) -> None:
    """For the routes programs call (the OpenAI-compatible API), before `require_token`: a
    request without an `Authorization` header is refused, so the dashboard's cookie is never
    taken there (the token, the gateway's or an app's, is then checked by `require_token`)."""
    if not request.headers.get("authorization"):
        raise Refusal("unauthorized", 401, NEEDS_TOKEN)


@dataclass(frozen=True)
class Sender:
    """Who sent a request, as its headers prove it: the owner (the gateway's token, or the
    signed-in `cookie`), an app by its own token, or the metrics scraper (no principal)."""

    principal: Principal | None
    app: App | None = None
    cookie: str | None = None  # the dashboard's cookie it was proven by


async def sender_of(request: Request) -> Sender:
    """Who sent `request`, decided from its headers alone (no byte of its body is read) once
    per request and kept in its scope: `web.http.limits.BodyLimit` asks before it reads any
    body, `require_token` after. 401 when nothing proves anyone."""
    known = request.scope.get(SENDER)
    if isinstance(known, Sender):
        return known
    sender = await _identified(request)
    request.scope[SENDER] = sender
    return sender


async def _identified(request: Request) -> Sender:
    expected: str = request.app.state.token
    header = request.headers.get("authorization", "")
    if not header and signin.COOKIE in request.cookies:
        cookie = request.cookies[signin.COOKIE]
        if not await signed_in(request, cookie):
            raise Refusal("unauthorized", 401,
                          "This page's sign-in has ended (signed out, expired, or not this "
                          "gateway's); sign in again.")
        return Sender(principals.OWNER, cookie=cookie)  # the owner's signed-in dashboard
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise Refusal("unauthorized", 401, NEEDS_TOKEN)
    given = given.strip()
    if expected and hmac.compare_digest(given.encode(), expected.encode()):
        return Sender(principals.OWNER)  # the gateway's own token
    if _is_metrics_token(request, given):
        return Sender(None)
    app = await request.app.state.engine.access.identify(given)
    if app is None:
        raise _not_a_token()
    return Sender(principals.app(app.name), app=app)


def _not_a_token() -> Refusal:
    return Refusal("unauthorized", 401,
                   "The token is not this gateway's token, nor a token of an app that is not "
                   "revoked.")


async def require_token(request: Request) -> None:
    """The owner (the gateway's token, the signed-in cookie), or an app by its own token, held
    to its permissions and its chats there (`web.http.permissions.enforce`); `request.state.app`
    says which (None: the owner), and `request.state.principal` is fixed here, the one place
    a web request's principal is decided (from `sender_of`)."""
    request.state.app = None
    sender = await sender_of(request)
    if sender.cookie is not None:
        await _require_page_request(request, request.app.state.token, sender.cookie)
        request.state.principal = sender.principal
        return
    if sender.principal is None:  # the metrics token: on /metrics alone, acting for nobody
        if not _scrapes(request):
            raise _not_a_token()
        return
    request.state.principal = sender.principal
    if sender.app is not None:
        request.state.app = sender.app
        await permissions.enforce(request, sender.app)


def _is_metrics_token(request: Request, given: str) -> bool:
    token: str | None = request.app.state.metrics_token
    return bool(token) and hmac.compare_digest(given.encode(), str(token).encode())


def _scrapes(request: Request) -> bool:
    """Is this a route the metrics token opens?"""
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


async def _require_page_request(request: Request, expected: str, cookie: str) -> None:
    """A request the signed-in cookie proves must come from this gateway's own pages: never
    another site's, and with the page's CSRF token when it changes something."""
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
