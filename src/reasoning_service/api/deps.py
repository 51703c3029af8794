"""FastAPI dependencies as typed aliases; routes read the one `Services` object on app.state."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from reasoning_service.api.idempotency import IdempotencyLocks
from reasoning_service.service.container import Services


def get_services(request: Request) -> Services:
    return request.app.state.services


def get_idempotency_locks(request: Request) -> IdempotencyLocks:
    return request.app.state.idempotency_locks


ServicesDep = Annotated[Services, Depends(get_services)]
IdempotencyLocksDep = Annotated[IdempotencyLocks, Depends(get_idempotency_locks)]
