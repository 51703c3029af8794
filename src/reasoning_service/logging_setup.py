"""Structured logs: one JSON object a line, with a request id, and allow-listed fields only.

Case data is PHI and keys are secrets, so the formatter never dumps a record's `extra` wholesale:
only the names in `ALLOWED_FIELDS` pass (ids, labels, counts, durations). Exceptions are logged by
type and the file:line of the last frame, never by message or traceback text (a validation
error's message can quote case data). `case_id` is patient-linked, so it is not on the list.
`SecretMask` replaces the configured provider keys' exact values in every line, whatever their
format (not only `sk-…`); the store and the API's error replies use the same mask.

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
    "SecretMask",
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
        "action",
        "outcome",
        "limit",
        "queue_job_id",
    }
)
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_OUR_HANDLER = "_reasoning_service_handler"
_BODY_LOGGERS = ("openai", "anthropic", "httpcore", "httpx")


class SecretMask:
    """Replaces the exact values of configured secrets (provider API keys) with `***`."""

    REPLACEMENT = "***"

    def __init__(self, secrets: list[str] | tuple[str, ...] = ()) -> None:
        # Each value as written and as it appears inside a JSON string.
        variants = {v for s in secrets if s for v in (s, json.dumps(s)[1:-1])}
        self._secrets = tuple(sorted(variants, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        """`value` with every secret replaced."""
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, self.REPLACEMENT)
        return value

    def optional(self, value: str | None) -> str | None:
        return None if value is None else self.text(value)


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "message", "request_id", <allowed extras>, "exc_type"?}`."""

    def __init__(self, mask: SecretMask | None = None) -> None:
        super().__init__()
        self._mask = mask or SecretMask()

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
        return self._mask.text(json.dumps(entry, default=str))


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def _exception_fields(exc: BaseException) -> dict[str, Any]:
    """Type names of the exception chain and the file:line it was raised at: no message, no
    traceback text, no locals (any of them can quote case data)."""
    chain, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(type(current).__name__)
        current = current.__cause__ or current.__context__
    frames = traceback.extract_tb(exc.__traceback__)
    fields: dict[str, Any] = {"exc_type": " <- ".join(chain)}
    if frames:
        fields["exc_where"] = f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}"
    return fields


def configure_logging(
    level: str = "INFO",
    *,
    log_format: str = "json",
    stream: IO[str] | None = None,
    mask: SecretMask | None = None,
) -> logging.Handler:
    """Make the service's handler the root logger's only handler; returns it.

    A plain stream handler already on the root (what `logging.basicConfig` installs) is removed
    too, so each line is written once and only through the allow-list; handlers of other
    types (a test's log capture) stay."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _OUR_HANDLER, False) or type(handler) is logging.StreamHandler:
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    setattr(handler, _OUR_HANDLER, True)
    if log_format == "json":
        handler.setFormatter(JsonFormatter(mask))
    else:
        handler.setFormatter(_TextFormatter(mask))
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Access lines come from RequestIdMiddleware (route paths, request ids), not from uvicorn.
    logging.getLogger("uvicorn.access").disabled = True
    quiet_body_loggers()
    return handler


class _TextFormatter(logging.Formatter):
    """`log_format=text`: one readable line; exceptions by type and place, as in JSON."""

    def __init__(self, mask: SecretMask | None) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")
        self._mask = mask or SecretMask()

    def format(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(_without_exc(record, self))
        if record.exc_info and record.exc_info[1] is not None:
            fields = _exception_fields(record.exc_info[1])
            line += f" [{fields['exc_type']} at {fields.get('exc_where', '?')}]"
        return self._mask.text(line)


def _without_exc(record: logging.LogRecord, formatter: logging.Formatter) -> logging.LogRecord:
    record.message = record.getMessage()
    record.asctime = formatter.formatTime(record)
    return record


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
