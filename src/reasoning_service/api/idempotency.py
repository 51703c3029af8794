"""`Idempotency-Key` on `POST /v1/evaluations`: a retry returns the first result, never a second.

The key is scoped to the API key that sent it and stored in the evaluation's row under a unique
index (`store/sqlite.py`), so it survives restarts and no two rows can share it. Within this
process, requests with one key run one at a time (`IdempotencyLocks`): the second waits for the
first and then finds its stored result. Across processes, the unique index turns the loser's
write into a 409 that a retry resolves.

Replies: 201 for the evaluation that was run, 200 with `Idempotent-Replayed: true` for a retry
with the same body, 422 for the same key with a different body.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from reasoning_service.errors import InvalidInputError
from reasoning_service.models import EvaluationRequest
from reasoning_service.store import Idempotency

__all__ = ["HEADER", "IdempotencyLocks", "idempotency_of"]

HEADER = "Idempotency-Key"
_SAFE_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")


def idempotency_of(
    header: str | None, owner: str | None, request: EvaluationRequest
) -> Idempotency | None:
    """The stored form of the header (None without one); InvalidInputError when malformed."""
    if header is None:
        return None
    if not _SAFE_KEY.match(header):
        raise InvalidInputError(
            f"{HEADER}: must be 1 to 200 visible ASCII characters (a UUID is a good choice)"
        )
    digest = hashlib.sha256(request.model_dump_json().encode("utf-8")).hexdigest()
    return Idempotency.of(owner, header, digest)


class IdempotencyLocks:
    """One asyncio lock per idempotency scope while requests with it are in flight."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, scope: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(scope, (asyncio.Lock(), 0))
        self._locks[scope] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[scope]
            if users <= 1:
                del self._locks[scope]
            else:
                self._locks[scope] = (lock, users - 1)
