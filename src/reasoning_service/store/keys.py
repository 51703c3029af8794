"""API keys: only a sha256 of each key is stored; the key itself is shown once, at creation.

A key looks like `rsk_<key_id>_<secret>`; the id part lets an operator name a key (in logs, as
an evaluation's owner) without ever handling its secret.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from dataclasses import dataclass

from sqlite_utils import Database

from reasoning_service.store.sqlite import Store

__all__ = ["ApiKey", "create_api_key", "find_api_key", "hash_key", "list_api_keys"]

_PREFIX = "rsk_"


@dataclass(frozen=True)
class ApiKey:
    """A stored key (never the secret): who it is and whether it may read everyone's work."""

    key_id: str
    admin: bool
    label: str | None = None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


async def create_api_key(
    store: Store, *, admin: bool = False, label: str | None = None
) -> tuple[ApiKey, str]:
    """Create and store a key; returns it with the plaintext key, which is not kept anywhere."""
    key_id = secrets.token_hex(4)
    plaintext = f"{_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    row = {
        "key_id": key_id,
        "key_sha256": hash_key(plaintext),
        "admin": int(admin),
        "label": label,
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
        "revoked_at": None,
    }
    await store.run(lambda db: db["api_keys"].insert(row))
    return ApiKey(key_id=key_id, admin=admin, label=label), plaintext


async def find_api_key(store: Store, plaintext: str) -> ApiKey | None:
    """The live key whose hash matches, or None."""
    digest = hash_key(plaintext)

    def read(db: Database) -> list[dict]:
        where = "key_sha256 = ? and revoked_at is null"
        return list(db["api_keys"].rows_where(where, [digest], limit=1))

    rows = await store.run(read)
    if not rows or not secrets.compare_digest(rows[0]["key_sha256"], digest):
        return None
    return ApiKey(key_id=rows[0]["key_id"], admin=bool(rows[0]["admin"]), label=rows[0]["label"])


async def list_api_keys(store: Store) -> list[ApiKey]:
    rows = await store.run(
        lambda db: list(db["api_keys"].rows_where("revoked_at is null", order_by="created_at"))
    )
    return [ApiKey(r["key_id"], bool(r["admin"]), r["label"]) for r in rows]
