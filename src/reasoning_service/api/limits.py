"""What the API accepts: a bounded body, and a bounded case (documents, pages, facts, criteria).

`BodyLimitMiddleware` reads a request body before anything parses it, counting bytes whether or
not a `Content-Length` was sent (chunked bodies), and answers 413 past
`REASONING_MAX_BODY_BYTES`. `check_evaluation_limits` bounds what a valid body may hold; its
422 names the field path and the limit, never a value.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reasoning_service.api.errors import error_reply
from reasoning_service.errors import InvalidInputError
from reasoning_service.models import EvaluationRequest
from reasoning_service.settings import Settings

__all__ = ["BodyLimitMiddleware", "check_evaluation_limits"]


class _BodyTooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """Pure ASGI: buffer at most `max_bytes` of a request body, else reply 413 at once.

    The app then reads the buffered body, so nothing downstream sees more than the limit."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        try:
            if declared is not None and int(declared) > self.max_bytes:
                raise _BodyTooLarge
            body = await self._read(receive)
        except _BodyTooLarge:
            await self._too_large(scope, receive, send)
            return
        except ValueError:  # a Content-Length that is not a number
            await error_reply(400, "malformed_body", "Content-Length is not a number")(
                scope, receive, send
            )
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise _BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_reply(
            413,
            "body_too_large",
            f"request body is larger than the limit of {self.max_bytes} bytes "
            "(REASONING_MAX_BODY_BYTES)",
        )
        response.headers["Connection"] = "close"
        await response(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that returns the buffered body once, then defers to the server's."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def check_evaluation_limits(request: EvaluationRequest, settings: Settings) -> None:
    """Raise InvalidInputError (422) naming the first field over its limit and the limit."""
    case = request.case
    _check_count("case.documents", len(case.documents), settings.max_documents, "MAX_DOCUMENTS")
    _check_count("case.facts", len(case.facts), settings.max_facts, "MAX_FACTS")
    _check_count(
        "criterion_ids",
        len(request.criterion_ids or []),
        settings.max_criterion_ids,
        "MAX_CRITERION_IDS",
    )
    for d, document in enumerate(case.documents):
        field = f"case.documents[{d}].pages"
        pages_limit = settings.max_pages_per_document
        _check_count(field, len(document.pages), pages_limit, "MAX_PAGES_PER_DOCUMENT")
        for p, page in enumerate(document.pages):
            if len(page) > settings.max_page_chars:
                raise InvalidInputError(
                    f"{field}[{p}]: longer than the limit of {settings.max_page_chars} "
                    "characters (REASONING_MAX_PAGE_CHARS)"
                )


def _check_count(field: str, count: int, limit: int, setting: str) -> None:
    if count > limit:
        raise InvalidInputError(
            f"{field}: more than the limit of {limit} items (REASONING_{setting})"
        )
