"""How errors leave the API: a status saying whose problem it is, a message naming the field."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from reasoning_service.errors import (
    ConfigError,
    Forbidden,
    InvalidInputError,
    NotFoundError,
    Overloaded,
    PolicyFormatError,
    StoreError,
    Unauthenticated,
)

logger = logging.getLogger(__name__)


class ErrorResponse(BaseModel):
    """Body of every 4xx/5xx response."""

    error: str
    """A stable code: `not_found`, `invalid_request`, `malformed_json`, `store_unavailable` …"""
    message: str
    """What is wrong, naming the field when there is one."""
    detail: list[dict[str, Any]] | None = None


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "The body is not valid JSON."},
    404: {"model": ErrorResponse, "description": "No such policy, criterion or evaluation."},
    422: {"model": ErrorResponse, "description": "The request is invalid; the message says why."},
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
    413: "body_too_large",
    415: "unsupported_media_type",
}


def _reply(status: int, error: str, message: str, detail: list[Any] | None = None) -> JSONResponse:
    body = ErrorResponse(error=error, message=message, detail=detail)
    return JSONResponse(status_code=status, content=body.model_dump(exclude_none=True))


def _field(location: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in location if part != "body") or "body"


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

    async def invalid(_: Request, exc: Exception) -> JSONResponse:
        return _reply(422, "invalid_request", str(exc))

    async def bad_policy(_: Request, exc: Exception) -> JSONResponse:
        return _reply(422, "invalid_policy_document", str(exc))

    async def store_down(_: Request, exc: Exception) -> JSONResponse:
        logger.error("store failure", exc_info=exc)
        return _reply(503, "store_unavailable", "the store is unavailable; nothing was written")

    async def overloaded(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, Overloaded)
        response = _reply(503, "overloaded", str(exc))
        response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    async def misconfigured(_: Request, exc: Exception) -> JSONResponse:
        logger.error("configuration error", exc_info=exc)
        return _reply(500, "misconfigured", str(exc))

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
