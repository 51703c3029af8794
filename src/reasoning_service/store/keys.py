"""API keys: only a sha256 of each key is stored; the key itself is shown once, at creation.

A key looks like `rsk_<key_id>_<secret>`; the id part lets an operator name a key (in logs, as
an evaluation's owner, in the audit log) without ever handling its secret.

Every request looks its key up here (no cache), so `revoke`, `rotate` and an expiry take effect
on the next request, without a restart. Rotating keeps the key id (evaluations stay readable by
their owner) and replaces the secret: the old key stops working at once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from reasoning_service.errors import ConflictError, NotFoundError
from reasoning_service.store.base import Store
from reasoning_service.store.tables import Tables

__all__ = [
    "ApiKey",
    "create_api_key",
    "find_api_key",
    "hash_key",
    "list_api_keys",
    "revoke_api_key",
    "rotate_api_key",
]

_PREFIX = "rsk_"


@dataclass(frozen=True)
class ApiKey:
    """A stored key (never the secret): who it is and whether it may read everyone's work."""

    key_id: str
    admin: bool
    label: str | None = None
    created_at: dt.datetime | None = None
    expires_at: dt.datetime | None = None
    revoked_at: dt.datetime | None = None
    rotated_at: dt.datetime | None = None

    def is_live(self, now: dt.datetime) -> bool:
        """Neither revoked nor expired at `now`."""
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _new_plaintext(key_id: str) -> str:
    return f"{_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


async def create_api_key(
    store: Store,
    *,
    admin: bool = False,
    label: str | None = None,
    expires_in_days: float | None = None,
) -> tuple[ApiKey, str]:
    """Create and store a key; returns it with the plaintext key, which is not kept anywhere."""
    key_id = secrets.token_hex(4)
    plaintext = _new_plaintext(key_id)
    now = _now()
    expires_at = now + dt.timedelta(days=expires_in_days) if expires_in_days else None
    row = {
        "key_id": key_id,
        "key_sha256": hash_key(plaintext),
        "admin": int(admin),
        "label": label,
        "created_at": now.isoformat(),
        "revoked_at": None,
        "expires_at": expires_at.isoformat() if expires_at else None,
        "rotated_at": None,
    }
    await store.run(lambda tables: tables.insert("api_keys", row))
    return _from_row(row), plaintext


async def find_api_key(store: Store, plaintext: str) -> ApiKey | None:
    """The live (not revoked, not expired) key whose hash matches, or None."""
    digest = hash_key(plaintext)

    def read(tables: Tables) -> list[dict[str, Any]]:
        return tables.select("api_keys", "key_sha256 = ?", [digest], limit=1)

    rows = await store.run(read)
    if not rows or not secrets.compare_digest(rows[0]["key_sha256"], digest):
        return None
    key = _from_row(rows[0])
    return key if key.is_live(_now()) else None


async def list_api_keys(store: Store, *, include_revoked: bool = True) -> list[ApiKey]:
    """Every key, oldest first (never a secret or a hash)."""
    where = None if include_revoked else "revoked_at is null"
    rows = await store.run(lambda tables: tables.select("api_keys", where, order_by="created_at"))
    return [_from_row(r) for r in rows]


async def revoke_api_key(store: Store, key_id: str) -> ApiKey:
    """Revoke a key now; revoking a revoked key changes nothing.

    Raises:
        NotFoundError: no key has this id.
    """

    def revoke(tables: Tables) -> dict[str, Any]:
        row = _row_of(tables, key_id)
        if row["revoked_at"] is None:
            row["revoked_at"] = _now().isoformat()
            tables.update("api_keys", {"revoked_at": row["revoked_at"]}, "key_id = ?", [key_id])
        return row

    return _from_row(await store.run(revoke))


async def rotate_api_key(store: Store, key_id: str) -> tuple[ApiKey, str]:
    """Give a key a new secret (same id, rights and expiry); the old secret stops working.

    Raises:
        NotFoundError: no key has this id.
        ConflictError: the key is revoked (create a new one instead).
    """
    plaintext = _new_plaintext(key_id)

    def rotate(tables: Tables) -> dict[str, Any]:
        row = _row_of(tables, key_id)
        if row["revoked_at"] is not None:
            raise ConflictError("key_id: the key is revoked; create a new one instead")
        row.update(key_sha256=hash_key(plaintext), rotated_at=_now().isoformat())
        values = {k: row[k] for k in ("key_sha256", "rotated_at")}
        tables.update("api_keys", values, "key_id = ?", [key_id])
        return row

    return _from_row(await store.run(rotate)), plaintext


def _row_of(tables: Tables, key_id: str) -> dict[str, Any]:
    rows = tables.select("api_keys", "key_id = ?", [key_id], limit=1)
    if not rows:
        raise NotFoundError("key_id: no API key has this id")
    return rows[0]


def _from_row(row: dict[str, Any]) -> ApiKey:
    return ApiKey(
        key_id=row["key_id"],
        admin=bool(row["admin"]),
        label=row.get("label"),
        created_at=_time(row.get("created_at")),
        expires_at=_time(row.get("expires_at")),
        revoked_at=_time(row.get("revoked_at")),
        rotated_at=_time(row.get("rotated_at")),
    )


def _time(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None
