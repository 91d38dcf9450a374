"""The error envelope: every error any route answers is `{"error": {"code", "message"}}`,
its message masked (`hearth.masking`): no error answer ever carries a key."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from hearth.errors import Refusal
from hearth.masking import mask, mask_value

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


def _is_page(request: Request) -> bool:
    """A dashboard page (not the API, not the event stream)."""
    path = request.url.path
    return not path.startswith(("/api/", "/v1/")) and path != "/healthz"


def install(app: FastAPI) -> None:
    @app.exception_handler(Refusal)
    async def _refusal(request: Request, exc: Refusal) -> Response:
        if exc.status == 401 and request.method == "GET" and _is_page(request):
            return RedirectResponse("/login", status_code=303)  # a page asks to sign in
        return envelope(exc.status, exc.code, exc.sentence, details=exc.details)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        status, code, message = _validation_message(exc)
        return envelope(status, code, message)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else "The request failed."
        if exc.status_code == 400 and "parsing the body" in message:
            code, message = "invalid_json", "The request body is not valid JSON."
        if exc.status_code == 404 and message == "Not Found":
            message = "There is nothing at this address."
        return envelope(exc.status_code, code, message, getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected %s on %s %s", type(exc).__name__, request.method,
                  request.url.path, exc_info=exc)
        return envelope(500, "internal_error",
                        "Hearth failed on this request; the gateway log has the details.")
