"""API-key auth: `Authorization: Bearer <key>` on every /v1 route (REASONING_AUTH=on, the default).

Keys are created with `reasoning-service api-key create [--admin]`; only their sha256 is stored
(`store/keys.py`). A key reads only the evaluations it created unless it is an admin key; only
admin keys upload policies and manage keys. The store is asked on every request (no cache), so
a revoked, rotated or expired key is refused from the next request on.
With REASONING_AUTH=off every caller is an anonymous admin (a warning is logged at start-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from reasoning_service.api.deps import ServicesDep
from reasoning_service.api.errors import ErrorResponse
from reasoning_service.errors import Forbidden, Unauthenticated
from reasoning_service.store.keys import find_api_key

__all__ = ["AUTH_RESPONSES", "AdminDep", "Caller", "CallerDep", "require_admin", "require_caller"]

_bearer = HTTPBearer(
    auto_error=False,
    description="An API key from `reasoning-service api-key create`.",
)
_MISSING = (
    "this route needs an API key: send `Authorization: Bearer <key>` "
    "(create one with `reasoning-service api-key create`)"
)

AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "No API key, or one that is not valid."},
    403: {"model": ErrorResponse, "description": "The API key may not do this."},
}


@dataclass(frozen=True)
class Caller:
    """Who is calling: a key id (None with auth off) and whether it is an admin."""

    key_id: str | None
    admin: bool

    def check_can_read(self, owner: str | None, what: str) -> None:
        """Raise Forbidden unless this caller created `what` or is an admin."""
        if not self.admin and owner != self.key_id:
            raise Forbidden(f"{what} was created with another API key; this key cannot read it")

    def check_admin(self, what: str) -> None:
        """Raise Forbidden unless this caller is an admin."""
        if not self.admin:
            raise Forbidden(
                f"{what} needs an admin key (`reasoning-service api-key create --admin`)"
            )


async def require_caller(
    request: Request,
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """The authenticated caller; raises Unauthenticated (401) without a live key."""
    if services.settings.auth == "off":
        return Caller(key_id=None, admin=True)
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthenticated(_MISSING)
    key = await find_api_key(services.store, credentials.credentials.strip())
    if key is None:
        raise Unauthenticated("the API key is not valid (unknown, revoked, rotated or expired)")
    request.state.key_id = key.key_id
    return Caller(key_id=key.key_id, admin=key.admin)


CallerDep = Annotated[Caller, Depends(require_caller)]


async def require_admin(caller: CallerDep) -> Caller:
    caller.check_admin("this route")
    return caller


AdminDep = Annotated[Caller, Depends(require_admin)]
