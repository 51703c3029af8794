"""Key management and the audit log (admin keys): list, revoke and rotate keys; read the log.

The same operations as `reasoning-service api-key list | revoke | rotate`. They take effect on
the next request: every request checks its key against the store.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict

from reasoning_service.api.audit import audited
from reasoning_service.api.auth import AdminDep
from reasoning_service.api.deps import ServicesDep
from reasoning_service.store.audit import AuditEntry, list_audit
from reasoning_service.store.keys import ApiKey, list_api_keys, revoke_api_key, rotate_api_key

router = APIRouter(prefix="/v1/admin", tags=["admin"])


class ApiKeyResponse(BaseModel):
    """A stored key: never its secret or its hash."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    key_id: str
    admin: bool
    label: str | None = None
    created_at: dt.datetime | None = None
    expires_at: dt.datetime | None = None
    """None: never expires."""
    revoked_at: dt.datetime | None = None
    rotated_at: dt.datetime | None = None
    """When the secret was last replaced."""
    live: bool
    """Neither revoked nor expired."""

    @classmethod
    def of(cls, key: ApiKey) -> ApiKeyResponse:
        return cls(
            key_id=key.key_id,
            admin=key.admin,
            label=key.label,
            created_at=key.created_at,
            expires_at=key.expires_at,
            revoked_at=key.revoked_at,
            rotated_at=key.rotated_at,
            live=key.is_live(dt.datetime.now(dt.UTC)),
        )


class RotatedKeyResponse(ApiKeyResponse):
    """A rotated key with its new secret, shown this once."""

    api_key: str
    """The new key; the old one no longer works. Only its hash is stored."""


@router.get("/api-keys", response_model=list[ApiKeyResponse])
async def get_api_keys(services: ServicesDep, _: AdminDep) -> list[ApiKeyResponse]:
    """Every key, revoked ones included, oldest first."""
    return [ApiKeyResponse.of(k) for k in await list_api_keys(services.store)]


@router.post("/api-keys/{key_id}/revoke", response_model=ApiKeyResponse)
async def revoke_key(key_id: str, services: ServicesDep, caller: AdminDep) -> ApiKeyResponse:
    """Revoke a key now (its next request is 401); revoking twice changes nothing."""
    async with audited(services, caller, "api_key.revoke", key_id):
        return ApiKeyResponse.of(await revoke_api_key(services.store, key_id))


@router.post("/api-keys/{key_id}/rotate", response_model=RotatedKeyResponse)
async def rotate_key(key_id: str, services: ServicesDep, caller: AdminDep) -> RotatedKeyResponse:
    """Replace a key's secret (same id, rights and expiry); returns the new key once."""
    async with audited(services, caller, "api_key.rotate", key_id):
        key, plaintext = await rotate_api_key(services.store, key_id)
        return RotatedKeyResponse(**ApiKeyResponse.of(key).model_dump(), api_key=plaintext)


@router.get("/audit", response_model=list[AuditEntry])
async def get_audit(
    services: ServicesDep,
    _: AdminDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[AuditEntry]:
    """The newest audit entries, newest first: who did what, to which resource, with what
    outcome. Key ids and resource ids only; no case content."""
    return await list_audit(services.store, limit=limit)
