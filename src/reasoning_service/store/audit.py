"""The audit log: who (a key id, never the key) did what to which evaluation, policy or key.

A row holds a time, a key id, an action (`evaluation.create`, `evaluation.read`,
`evaluation.trace`, `policy.create`, `api_key.revoke`, `api_key.rotate`), the resource's id
(an evaluation id, `policy_id@version`, a key id), the outcome and the HTTP status, and the
request id. Never a case id, a case value or any other case content (PHI).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict

from reasoning_service.store.base import Store
from reasoning_service.store.tables import Tables

__all__ = ["AuditEntry", "list_audit", "record_audit"]


class AuditEntry(BaseModel):
    """One audited action."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    at: dt.datetime
    key_id: str | None
    """The API key's id; None with REASONING_AUTH=off."""
    action: str
    resource: str | None = None
    """Evaluation id, `policy_id@version` or key id; None when the request named none."""
    outcome: str
    """`ok`, `replayed`, `denied`, `not_found`, `conflict`, `invalid` or `error`."""
    status_code: int
    request_id: str | None = None


async def record_audit(store: Store, entry: AuditEntry) -> None:
    row = entry.model_dump(mode="json")
    await store.run(lambda tables: tables.insert("audit_log", row))


async def list_audit(store: Store, *, limit: int = 100) -> list[AuditEntry]:
    """The newest `limit` entries, newest first."""

    def read(tables: Tables) -> list[dict[str, Any]]:
        return tables.select("audit_log", order_by="audit_id desc", limit=limit)

    return [AuditEntry.model_validate(r) for r in await store.run(read)]
