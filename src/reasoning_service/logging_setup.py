"""Structured logs: one JSON object a line, with a request id, and allow-listed fields only.

Case data is PHI and keys are secrets, so the formatter never dumps a record's `extra` wholesale:
only the names in `ALLOWED_FIELDS` pass (ids, labels, counts, durations). Exceptions are logged by
type and stack frames, never by message (a validation error's message can quote case data).
`case_id` is patient-linked, so it is not on the list.

`RequestIdMiddleware` (pure ASGI) takes a safe `X-Request-ID` from the caller or makes one, puts it
in a context variable for every log line of the request, echoes it in the response, and logs one
access line (method, route path, status, duration).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sys
import time
import traceback
import uuid
from contextvars import ContextVar
from typing import IO, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "ALLOWED_FIELDS",
    "JsonFormatter",
    "RequestIdMiddleware",
    "configure_logging",
    "request_id",
]

request_id: ContextVar[str | None] = ContextVar("request_id", default=None)

ALLOWED_FIELDS = frozenset(
    {
        "evaluation_id",
        "policy_id",
        "version",
        "error_kind",
        "controller",
        "arm",
        "criteria",
        "agreements",
        "recommendation",
        "policies_indexed",
        "pending",
        "error_type",
        "flags",
        "key_id",
        "auth",
        "provider",
        "model",
        "attempt",
        "wait_s",
        "method",
        "path",
        "status_code",
        "duration_ms",
    }
)
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_OUR_HANDLER = "_reasoning_service_handler"
_BODY_LOGGERS = ("openai", "anthropic", "httpcore", "httpx")


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "message", "request_id", <allowed extras>, "exc_type"?}`."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = request_id.get()
        if rid:
            entry["request_id"] = rid
        for name in ALLOWED_FIELDS:
            if name in record.__dict__:
                entry[name] = _plain(record.__dict__[name])
        if record.exc_info and record.exc_info[1] is not None:
            entry.update(_exception_fields(record.exc_info[1]))
        return json.dumps(entry, default=str)


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def _exception_fields(exc: BaseException) -> dict[str, Any]:
    """Type names of the exception chain and where it was raised: no messages, no locals."""
    chain, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(type(current).__name__)
        current = current.__cause__ or current.__context__
    frames = traceback.extract_tb(exc.__traceback__)[-5:]
    return {
        "exc_type": " <- ".join(chain),
        "exc_where": [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}:{f.name}" for f in frames],
    }


def configure_logging(
    level: str = "INFO", *, log_format: str = "json", stream: IO[str] | None = None
) -> logging.Handler:
    """Install (or replace) the service's handler on the root logger; returns it."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _OUR_HANDLER, False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    setattr(handler, _OUR_HANDLER, True)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Access lines come from RequestIdMiddleware (route paths, request ids), not from uvicorn.
    logging.getLogger("uvicorn.access").disabled = True
    quiet_body_loggers()
    return handler


def quiet_body_loggers() -> None:
    """Keep the SDKs' and HTTP internals' loggers at WARNING or above.

    They log request bodies (case text: PHI) at DEBUG. Called by `configure_logging` and by
    every LLM client factory, so no way of embedding a client can leak a prompt into a log.
    """
    for name in _BODY_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.level, logging.WARNING))


class RequestIdMiddleware:
    """Pure ASGI middleware: request id in a context variable, in the response, in one log line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._logger = logging.getLogger("reasoning_service.access")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        rid = incoming if _SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        token = request_id.set(rid)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", rid.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            route = scope.get("route")
            self._logger.info(
                "request",
                extra={
                    "method": scope.get("method"),
                    # The route template (`/v1/evaluations/{evaluation_id}`), not the raw path.
                    "path": getattr(route, "path", None) or "unmatched",
                    "status_code": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                },
            )
            request_id.reset(token)
