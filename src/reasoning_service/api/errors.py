"""How errors leave the API: a status saying whose problem it is, a message naming the field.

Every error, expected or not, has the `ErrorResponse` shape with the request id. Messages name
the field, never a value the caller sent (case data is PHI), and pass the `SecretMask`.
Anything unexpected becomes a 500 `internal_error` with no exception text
(`UnexpectedErrorMiddleware`); the log line has the exception's type and place only.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reasoning_service.errors import (
    ConfigError,
    ConflictError,
    Forbidden,
    InvalidInputError,
    NotFoundError,
    Overloaded,
    PolicyFormatError,
    StoreError,
    Unauthenticated,
)
from reasoning_service.logging_setup import SecretMask, request_id

logger = logging.getLogger(__name__)


class ErrorResponse(BaseModel):
    """Body of every 4xx/5xx response."""

    error: str
    """A stable code: `not_found`, `invalid_request`, `malformed_json`, `store_unavailable` …"""
    message: str
    """What is wrong, naming the field when there is one."""
    detail: list[dict[str, Any]] | None = None
    request_id: str | None = None
    """The `X-Request-ID` of the request, to find its log lines."""


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "The body is not valid JSON."},
    404: {"model": ErrorResponse, "description": "No such policy, criterion or evaluation."},
    409: {"model": ErrorResponse, "description": "Conflicts with what is stored."},
    413: {"model": ErrorResponse, "description": "The body is larger than the limit."},
    422: {"model": ErrorResponse, "description": "The request is invalid; the message says why."},
    500: {"model": ErrorResponse, "description": "Unexpected; the request id finds the log."},
    503: {
        "model": ErrorResponse,
        "description": "The store is unavailable, or too many evaluations are in progress "
        "(`overloaded`, with `Retry-After` in seconds).",
    },
}
"""The error statuses every /v1 route can return, for the OpenAPI document."""


_HTTP_ERROR_CODES = {
    400: "malformed_body",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
}


def error_reply(
    status: int,
    error: str,
    message: str,
    detail: list[Any] | None = None,
    *,
    mask: SecretMask | None = None,
) -> JSONResponse:
    """An error response in the service's shape, with the current request id."""
    if mask:
        message = mask.text(message)
    body = ErrorResponse(error=error, message=message, detail=detail, request_id=request_id.get())
    return JSONResponse(status_code=status, content=body.model_dump(exclude_none=True))


def _mask_of(request: Request) -> SecretMask | None:
    services = getattr(request.app.state, "services", None)
    return SecretMask(services.settings.secret_values()) if services is not None else None


def _reply(status: int, error: str, message: str, detail: list[Any] | None = None) -> JSONResponse:
    return error_reply(status, error, message, detail)


BODY_VARIANTS = ("case bundle", "FHIR bundle")
"""Tags of a body that is one of two shapes (`POST /v1/evaluations`); not part of a field path."""


def _field(location: tuple[Any, ...] | list[Any]) -> str:
    parts = list(location)
    if len(parts) > 1 and parts[0] == "body" and parts[1] in BODY_VARIANTS:
        parts = parts[2:]
    return ".".join(str(part) for part in parts if part != "body") or "body"


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return _reply(400, "malformed_json", "request body is not valid JSON")
    # Inputs are case data (PHI): report where and why, never the value itself.
    detail = [{"field": _field(e["loc"]), "message": e["msg"], "type": e["type"]} for e in errors]
    message = "; ".join(f"{d['field']}: {d['message']}" for d in detail[:5])
    return _reply(422, "invalid_request", message, detail)


def install_error_handlers(app: FastAPI) -> None:
    """Map the service's error types to statuses, once, for every route."""

    async def not_found(_: Request, exc: Exception) -> JSONResponse:
        return _reply(404, "not_found", str(exc))

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        return error_reply(422, "invalid_request", str(exc), mask=_mask_of(request))

    async def bad_policy(request: Request, exc: Exception) -> JSONResponse:
        return error_reply(422, "invalid_policy_document", str(exc), mask=_mask_of(request))

    async def store_down(_: Request, exc: Exception) -> JSONResponse:
        logger.error("store failure", exc_info=exc)
        return _reply(503, "store_unavailable", "the store is unavailable; nothing was written")

    async def overloaded(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, Overloaded)
        response = _reply(503, "overloaded", str(exc))
        response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    async def misconfigured(request: Request, exc: Exception) -> JSONResponse:
        logger.error("configuration error", exc_info=exc)
        return error_reply(500, "misconfigured", str(exc), mask=_mask_of(request))

    async def conflict(request: Request, exc: Exception) -> JSONResponse:
        return error_reply(409, "conflict", str(exc), mask=_mask_of(request))

    async def unauthenticated(_: Request, exc: Exception) -> JSONResponse:
        response = _reply(401, "unauthenticated", str(exc))
        response.headers["WWW-Authenticate"] = "Bearer"
        return response

    async def forbidden(_: Request, exc: Exception) -> JSONResponse:
        return _reply(403, "forbidden", str(exc))

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        # Framework errors (unparsable body, unknown route, wrong method) in the same shape.
        assert isinstance(exc, StarletteHTTPException)
        code = _HTTP_ERROR_CODES.get(exc.status_code, "http_error")
        response = _reply(exc.status_code, code, str(exc.detail))
        response.headers.update(exc.headers or {})
        return response

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Unauthenticated, unauthenticated)
    app.add_exception_handler(Forbidden, forbidden)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(NotFoundError, not_found)
    app.add_exception_handler(InvalidInputError, invalid)
    app.add_exception_handler(PolicyFormatError, bad_policy)
    app.add_exception_handler(StoreError, store_down)
    app.add_exception_handler(Overloaded, overloaded)
    app.add_exception_handler(ConfigError, misconfigured)
    app.add_exception_handler(ConflictError, conflict)


class UnexpectedErrorMiddleware:
    """Pure ASGI: an exception no handler mapped becomes a 500 in the service's error shape.

    Sits inside `RequestIdMiddleware`, so the reply and the one log line carry the request id.
    The exception is logged by type and place only (the JSON formatter's rule) and not re-raised,
    so no server prints its traceback a second time."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            logger.error("unexpected error", exc_info=exc)
            if started:
                raise  # nothing can be sent any more; the server closes the connection
            response = error_reply(
                500,
                "internal_error",
                "an unexpected error occurred; nothing about it is in this reply: "
                "quote the request id to the operator",
            )
            await response(scope, receive, send)
