"""Audit the routes that read or change evaluations, policies and keys (`store/audit.py`).

    async with audited(services, caller, "evaluation.read", evaluation_id) as entry:
        ...                      # entry.resource / entry.outcome may be set inside

On the way out one row is written: `ok` (or what the block set), or the outcome the exception's
type stands for, which is then re-raised unchanged. Rows hold ids only, never case content.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from reasoning_service.api.auth import Caller
from reasoning_service.errors import (
    AuthError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PolicyFormatError,
    StoreError,
)
from reasoning_service.logging_setup import request_id
from reasoning_service.service.container import Services
from reasoning_service.store.audit import AuditEntry, record_audit

__all__ = ["PendingAudit", "audited"]

_OUTCOMES: list[tuple[type[Exception], str, int]] = [
    (AuthError, "denied", 403),
    (NotFoundError, "not_found", 404),
    (ConflictError, "conflict", 409),
    (InvalidInputError, "invalid", 422),
    (PolicyFormatError, "invalid", 422),
    (StoreError, "error", 503),
]


@dataclass
class PendingAudit:
    """What the audited block may fill in before the row is written."""

    resource: str | None
    outcome: str = "ok"
    status_code: int = 200


@asynccontextmanager
async def audited(
    services: Services, caller: Caller, action: str, resource: str | None = None
) -> AsyncIterator[PendingAudit]:
    pending = PendingAudit(resource)
    try:
        yield pending
    except Exception as exc:
        pending.outcome, pending.status_code = next(
            ((outcome, status) for kind, outcome, status in _OUTCOMES if isinstance(exc, kind)),
            ("error", 500),
        )
        await _write(services, caller, action, pending)
        raise
    await _write(services, caller, action, pending)


async def _write(services: Services, caller: Caller, action: str, pending: PendingAudit) -> None:
    entry = AuditEntry(
        at=dt.datetime.now(dt.UTC),
        key_id=caller.key_id,
        action=action,
        resource=pending.resource,
        outcome=pending.outcome,
        status_code=pending.status_code,
        request_id=request_id.get(),
    )
    await record_audit(services.store, entry)
