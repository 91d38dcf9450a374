"""Who may use which route: the one table of route → permission (`ROUTE_PERMISSIONS`) and the
one place an app's token is held to it (`enforce`, called by `web.http.auth.require_token`).

The owner (the gateway's token, or the dashboard's signed-in cookie) may use every route. An
app (a token made by `hearth apps add`) may use a route whose permission it was given (`admin`
gives them all) and never an `owner` route (the dashboard's pages, settings, grants, answering
approvals, export and import of everything, usage, channels); a route missing from the table is
refused to every app. Refused: 403 `app_scope`, naming the permission, with an audit row
`app.refused` (app, route, permission; never a body).

Then its reach: a route about one chat (`{key}`, a run's chat `{run_id}`, the chat named by
`X-Hearth-Session`) answers 404 as if there were none, unless the app started that chat
(`sessions.created_by_app`): an app never learns that another's chat exists. Lists (chats,
search, approvals) are narrowed to its chats by the routes themselves (`app_of`). Last, its
quotas (`web.http.quotas.hold`): turns per minute, open streams; and, before all of it, the open
files kept for the owner (`web.http.quotas.keep_reserve`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from hearth.engine.access import apps
from hearth.engine.access.apps import App
from hearth.errors import Refusal
from hearth.privacy.principal import Principal
from hearth.sessions.naming import key_for
from hearth.web.http import quotas

OWNER = "owner"  # the owner's alone: never an app's, whatever it was given
PUBLIC = "public"  # no token at all (its own check, if any)
READ, SEND, MEMORY, JOBS, FOLDERS, ADMIN = apps.PERMISSIONS

_PAGES: dict[tuple[str, str], str] = {(method, path): OWNER for method, path in (
    ("GET", "/"), ("POST", "/chats/new"), ("GET", "/chats"), ("POST", "/logout"),
    ("POST", "/theme"), ("GET", "/sidebar"), ("GET", "/chats/{key}"),
    ("GET", "/chats/{key}/stream"),
    ("POST", "/chats/{key}/send"), ("POST", "/chats/{key}/stop"),
    ("POST", "/chats/{key}/approvals/{approval_id}"), ("POST", "/chats/{key}/retry/{run_id}"),
    ("POST", "/chats/{key}/organize"), ("POST", "/chats/{key}/regenerate"),
    ("POST", "/chats/{key}/edit"), ("POST", "/chats/{key}/rewind"),
    ("POST", "/chats/{key}/variant"), ("POST", "/chats/{key}/fork"),
    ("POST", "/chats/{key}/rename"), ("POST", "/chats/{key}/setup"),
    ("POST", "/chats/{key}/archive"), ("POST", "/chats/{key}/compact"),
    ("GET", "/chats/{key}/delete"), ("POST", "/chats/{key}/delete"),
    ("GET", "/approvals"), ("POST", "/approvals/{approval_id}"),
    ("POST", "/grants/{grant_id}/revoke"), ("GET", "/memory"), ("POST", "/memory/add"),
    ("POST", "/memory/{item_id}/edit"), ("POST", "/memory/{item_id}/delete"),
    ("GET", "/usage"), ("GET", "/search"), ("GET", "/settings"), ("POST", "/settings/models"),
    ("POST", "/settings/models/{model_id}"), ("POST", "/settings/models/{model_id}/test"),
    ("POST", "/settings/models/{model_id}/remove"),
    ("POST", "/settings/chain"), ("POST", "/settings/agents"), ("POST", "/settings/name"),
    ("POST", "/settings/apps/{name}/revoke"), ("POST", "/settings/limits"),
    ("GET", "/settings/agents/{name}/files"),
    ("POST", "/settings/agents/{name}/files/{file}"), ("GET", "/jobs"), ("POST", "/jobs/add"),
    ("POST", "/jobs/{job_id}/{action}"), ("GET", "/desk"),
    ("POST", "/desk/deliveries/{delivery_id}/{action}"),
    ("POST", "/desk/chores/{chore_id}/{action}"),
)}

ROUTE_PERMISSIONS: dict[tuple[str, str], str] = {
    ("GET", "/healthz"): PUBLIC, ("GET", "/login"): PUBLIC, ("POST", "/login"): PUBLIC,
    ("GET", "/signin/link/{code}"): PUBLIC,  # a one-time sign-in link: its code is the proof
    ("GET", "/sw.js"): PUBLIC,  # the dashboard's service worker: the gateway's own code
    ("POST", "/channels/webhook"): PUBLIC,
    ("POST", "/channels/slack/events"): PUBLIC, ("POST", "/channels/slack/actions"): PUBLIC,
    **_PAGES,
    # chats
    ("GET", "/api/sessions"): READ, ("POST", "/api/sessions"): SEND,
    ("GET", "/api/sessions/{key}"): READ, ("GET", "/api/sessions/{key}/export"): READ,
    ("GET", "/api/sessions/{key}/events"): READ, ("GET", "/api/sessions/{key}/map"): READ,
    ("GET", "/api/sessions/{key}/tools"): READ, ("GET", "/api/search"): READ,
    ("GET", "/api/prompts"): READ,
    ("PATCH", "/api/sessions/{key}"): SEND, ("DELETE", "/api/sessions/{key}"): SEND,
    ("POST", "/api/sessions/{key}/messages"): SEND, ("POST", "/api/sessions/{key}/compact"): SEND,
    ("POST", "/api/sessions/{key}/attachments"): SEND,
    ("GET", "/api/sessions/{key}/attachments"): READ,
    ("GET", "/api/sessions/{key}/attachments/{attachment_id}"): READ,
    ("POST", "/api/sessions/{key}/speech"): READ,
    ("POST", "/api/sessions/{key}/stop"): SEND, ("POST", "/api/sessions/{key}/tools/{name}"): SEND,
    ("POST", "/api/sessions/{key}/regenerate"): SEND, ("POST", "/api/sessions/{key}/edit"): SEND,
    ("POST", "/api/sessions/{key}/rewind"): SEND, ("POST", "/api/sessions/{key}/variant"): SEND,
    ("POST", "/api/sessions/{key}/fork"): SEND,
    ("PUT", "/api/sessions/{key}/link"): OWNER, ("DELETE", "/api/sessions/{key}/link"): OWNER,
    # runs and approvals
    ("GET", "/api/runs/{run_id}"): READ, ("GET", "/api/runs/{run_id}/wait"): READ,
    ("POST", "/api/runs/{run_id}/retry"): SEND, ("GET", "/api/approvals"): READ,
    ("POST", "/api/approvals/{approval_id}"): OWNER,  # an app approves none of its calls
    # memory, jobs
    ("GET", "/api/memory"): MEMORY, ("POST", "/api/memory"): MEMORY,
    ("PATCH", "/api/memory/{item_id}"): MEMORY, ("DELETE", "/api/memory/{item_id}"): MEMORY,
    ("GET", "/api/jobs"): JOBS, ("POST", "/api/jobs"): JOBS,
    ("PATCH", "/api/jobs/{job_id}"): JOBS, ("DELETE", "/api/jobs/{job_id}"): JOBS,
    ("POST", "/api/jobs/{job_id}/run"): JOBS,
    # the OpenAI-compatible API
    ("GET", "/v1/models"): SEND, ("GET", "/v1/models/{name:path}"): SEND,
    ("POST", "/v1/chat/completions"): SEND,
    # the owner's alone
    ("GET", "/api/grants"): OWNER, ("DELETE", "/api/grants/{grant_id}"): OWNER,
    ("GET", "/api/export"): OWNER, ("POST", "/api/import"): OWNER,
    ("GET", "/api/usage"): OWNER, ("GET", "/api/channels"): OWNER,
    ("GET", "/api/desk"): OWNER, ("POST", "/api/deliveries/{delivery_id}/retry"): OWNER,
    ("POST", "/api/deliveries/{delivery_id}/delivered"): OWNER,
    ("POST", "/api/deliveries/{delivery_id}/drop"): OWNER,
    ("POST", "/api/chores/{chore_id}/retry"): OWNER,
    ("POST", "/api/chores/{chore_id}/drop"): OWNER,
    # the gateway's own figures (`/metrics` takes the metrics token too: SCRAPED)
    ("GET", "/metrics"): OWNER, ("GET", "/api/status"): OWNER,
    # apps
    ("GET", "/api/apps"): ADMIN, ("POST", "/api/apps"): ADMIN,
    ("DELETE", "/api/apps/{name}"): ADMIN,
    # spending limits: read by an admin app, changed by the owner alone (no app raises its own)
    ("GET", "/api/limits"): ADMIN, ("PUT", "/api/limits"): OWNER,
    # the models an endpoint offers (the Settings page's model form; it may use a model's key)
    ("POST", "/api/models/available"): OWNER,
}


# the routes the metrics token (`[metrics] token_env`, web.http.auth) opens: these alone
SCRAPED = frozenset({("GET", "/metrics")})


def permission_of(method: str, path: str) -> str | None:
    """The route's permission (a HEAD is its GET); None for a route not in the table."""
    return ROUTE_PERMISSIONS.get(("GET" if method == "HEAD" else method, path))


async def enforce(request: Request, app: App) -> None:
    """Hold an app's request to the open files kept for the owner, to its permissions, to the
    chats it started, then to its quotas."""
    await quotas.keep_reserve(request, app)  # first: nothing done for an app when files run out
    route = request.scope.get("route")
    path = getattr(route, "path", request.url.path)
    needed = permission_of(request.method, path)
    access = request.app.state.engine.access
    if needed in (None, OWNER, PUBLIC) or not apps.allows(app, str(needed)):
        shown = needed if needed not in (None, PUBLIC) else OWNER
        await access.note_refused(app.name, f"{request.method} {path}", str(shown))
        raise Refusal("app_scope", 403, _sentence(app.name, str(shown)))
    params = request.path_params
    key, run_id = params.get("key"), params.get("run_id")
    named = request.headers.get("x-hearth-session")
    named = key_for(named, app.name) if named is not None else None  # its own namespace
    if key is not None or run_id is not None or named is not None:
        if not await access.may_reach(app.name, key=key, run_id=run_id, named=named):
            raise _not_found(key, run_id, named)
    quotas.hold(request, app, ("GET" if request.method == "HEAD" else request.method, path))


def _sentence(app: str, permission: str) -> str:
    if permission == OWNER:
        return f"The app {app!r} may not use this route: it is the owner's alone."
    return (f"The app {app!r} may not use this route: it needs the {permission!r} permission "
            f"(`hearth apps add {app} --allow {permission}` gives it to a new token).")


def _not_found(key: str | None, run_id: str | None, named: str | None) -> Refusal:
    if run_id is not None and key is None:
        return Refusal("run_not_found", 404, f"There is no run {run_id!r}.")
    return Refusal("session_not_found", 404, f"There is no chat named {key or named!r}.")


def app_of(request: Request) -> App | None:
    """The app making this request (set by `require_token`), None for the owner."""
    app: App | None = getattr(request.state, "app", None)
    return app


async def app_name_of(request: Request) -> str | None:
    app = app_of(request)
    return app.name if app is not None else None


AppName = Annotated[str | None, Depends(app_name_of)]  # the app's name, None for the owner


def principal_of(request: Request) -> Principal:
    """On whose behalf this request acts, as `web.http.auth.require_token` fixed it; a request it
    did not authenticate has none, and is refused rather than taken for the owner's."""
    found = getattr(request.state, "principal", None)
    if not isinstance(found, Principal):
        raise Refusal("unauthorized", 401, "This request was not authenticated.")
    return found


async def _principal(request: Request) -> Principal:
    return principal_of(request)  # async: a dependency that is not runs on a worker thread


PrincipalDep = Annotated[Principal, Depends(_principal)]  # who the request acts for
