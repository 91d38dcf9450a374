"""The error envelope: every error any route answers is `{"error": {"code", "message"}}`,
its message masked (`hearth.masking`): no error answer ever carries a key. A browser asking
for a dashboard page (not the API, not a page's own fetch) gets the same sentence as a page
inside the dashboard's frame instead (drawn by the `Framed` the app installs this with,
`web.pages.frame.page`), never raw JSON. The OpenAI-compatible
routes (`/v1/`) answer in OpenAI's own shape instead, `{"error": {"message", "type", "param",
"code"}}` (`openai_envelope`), so OpenAI's clients raise their own errors: a request found
invalid is 400 there (OpenAI has no 422), and a bad token's code is `invalid_api_key`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from hearth.errors import Limited, Refusal
from hearth.masking import mask, mask_value
from hearth.web.http import signin
from hearth.web.http.auth import signed_in

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 409: "conflict", 413: "request_too_large",
    422: "invalid_request", 429: "too_many_requests",
}


def envelope(status: int, code: str, message: str, headers: dict[str, str] | None = None,
             details: dict[str, Any] | None = None) -> JSONResponse:
    error = {**mask_value(details or {}), "code": code, "message": mask(message)}
    return JSONResponse({"error": error}, status_code=status, headers=headers)


OPENAI_TYPES = {401: "invalid_request_error", 403: "permission_error", 429: "rate_limit_error"}


def is_openai(request: Request) -> bool:
    """A request to the OpenAI-compatible API (its errors in OpenAI's shape)."""
    return request.url.path.startswith("/v1/")


def openai_error(status: int, code: str, message: str,
                 param: str | None = None) -> dict[str, Any]:
    """An error in OpenAI's shape (masked), for a response or a stream's last event."""
    kind = "server_error" if status >= 500 else OPENAI_TYPES.get(status, "invalid_request_error")
    return {"error": {"message": mask(message), "type": kind, "param": param, "code": code}}


def openai_envelope(status: int, code: str, message: str, param: str | None = None,
                    headers: dict[str, str] | None = None) -> JSONResponse:
    status = 400 if status == 422 else status
    code = "invalid_api_key" if status == 401 else code
    return JSONResponse(openai_error(status, code, message, param), status_code=status,
                        headers=headers)


def _param_of(exc: RequestValidationError) -> str | None:
    """The request field the first validation error is about (`messages.0.content`)."""
    for error in exc.errors()[:1]:
        if error.get("type") == "json_invalid":
            return None  # the loc is a place in the text, not a field
        loc = [str(p) for p in error.get("loc", ()) if p not in ("body", "query", "path")]
        return ".".join(loc) or None
    return None


def _validation_message(exc: RequestValidationError) -> tuple[int, str, str]:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return 400, "invalid_json", "The request body is not valid JSON."
    parts = []
    for error in errors[:5]:
        loc = [str(p) for p in error.get("loc", ()) if p not in ("body", "query", "path")]
        where = ".".join(loc) or "body"
        parts.append(f"{where}: {error.get('msg', 'is not valid')}")
    return 422, "invalid_request", "; ".join(parts) or "The request is not valid."


NOT_PAGES = ("/healthz", "/metrics")  # outside /api/ and /v1/, yet never a page: a 401 there
#                                       is the envelope, never the sign-in page


def _is_page(request: Request) -> bool:
    """A dashboard page (not the API, not the event stream)."""
    path = request.url.path
    return not path.startswith(("/api/", "/v1/")) and path not in NOT_PAGES


def _wants_page(request: Request) -> bool:
    """A browser's own request for a page or a form post (it accepts HTML), not a page's
    script (`X-Requested-With: fetch`) nor its event stream."""
    return (_is_page(request) and "text/html" in request.headers.get("accept", "")
            and request.headers.get("x-requested-with") != "fetch"
            and not request.url.path.endswith("/stream"))


def _retry_after(exc: Refusal) -> dict[str, str] | None:
    """A `Retry-After` header (whole seconds) for a refusal that passes (`Limited`)."""
    if isinstance(exc, Limited) and exc.retry_after is not None:
        return {"Retry-After": str(max(1, exc.retry_after))}
    return None


HEADLINES = {404: "Not found", 409: "Not done", 403: "Refused", 422: "Not done"}
Framed = Callable[..., Awaitable[Response]]  # a template drawn in the dashboard's frame:
#                                             (request, engine, template, status=, **values)


async def _error_page(request: Request, framed: Framed, status: int, code: str,
                      sentence: str) -> Response:
    """The error as a page in the dashboard's frame; the envelope if the frame cannot be drawn
    (the store refusing too)."""
    if not await signed_in(request, request.cookies.get(signin.COOKIE)):
        return envelope(status, code, sentence)  # the frame shows chats: the owner's alone
    try:
        return await framed(request, request.app.state.engine, "error.html", status=status,
                            code=code, sentence=mask(sentence),
                            headline=HEADLINES.get(status, "Something went wrong"))
    except (Refusal, OSError) as failed:
        log.warning("the error page could not be drawn (%s)", type(failed).__name__)
        return envelope(status, code, sentence)


def install(app: FastAPI, framed: Framed) -> None:
    """Answer every error as the envelope, OpenAI's shape on /v1, or a page in the frame
    `framed` draws (the pages' own, handed down by the app)."""

    @app.exception_handler(Refusal)
    async def _refusal(request: Request, exc: Refusal) -> Response:
        headers = _retry_after(exc)
        if is_openai(request):
            param = exc.details.get("param")
            return openai_envelope(exc.status, exc.code, exc.sentence,
                                   param if isinstance(param, str) else None, headers)
        if exc.status == 401 and request.method == "GET" and _is_page(request):
            return RedirectResponse("/login", status_code=303)  # a page asks to sign in
        if exc.status != 401 and _wants_page(request):
            return await _error_page(request, framed, exc.status, exc.code, exc.sentence)
        return envelope(exc.status, exc.code, exc.sentence, headers, exc.details)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, code, message = _validation_message(exc)
        if is_openai(request):
            return openai_envelope(status, code, message, _param_of(exc))
        return envelope(status, code, message)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404 and _wants_page(request):
            return await _error_page(request, framed, 404, "not_found",
                                     "There is no page at this address.")
        code = _HTTP_CODES.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else "The request failed."
        if exc.status_code == 400 and "parsing the body" in message:
            code, message = "invalid_json", "The request body is not valid JSON."
        if exc.status_code == 404 and message == "Not Found":
            message = "There is nothing at this address."
        if is_openai(request):
            return openai_envelope(exc.status_code, code, message,
                                   headers=getattr(exc, "headers", None))
        return envelope(exc.status_code, code, message, getattr(exc, "headers", None))

    @app.exception_handler(OperationalError)
    async def _unreachable(request: Request, exc: OperationalError) -> JSONResponse:
        """The database went away under a request (PostgreSQL restarting, the network):
        503, and the client tries again; nothing acknowledged was lost (acknowledging waits
        for the commit)."""
        log.warning("the database failed under %s %s: %s", request.method, request.url.path,
                    type(exc.orig or exc).__name__)
        sentence = ("The database cannot be reached just now; nothing was changed. Try "
                    "again shortly.")
        headers = {"Retry-After": "5"}
        if is_openai(request):
            return openai_envelope(503, "store_unavailable", sentence, headers=headers)
        return envelope(503, "store_unavailable", sentence, headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected %s on %s %s", type(exc).__name__, request.method,
                  request.url.path, exc_info=exc)
        sentence = "Hearth failed on this request; the gateway log has the details."
        if is_openai(request):
            return openai_envelope(500, "internal_error", sentence)
        return envelope(500, "internal_error", sentence)
