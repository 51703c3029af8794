"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Response

from reasoning_service.api.deps import ServicesDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(services: ServicesDep, response: Response) -> dict[str, object]:
    """The store answers and at least one policy is indexed."""
    policies = await services.store.list_policies()
    ready = bool(policies)
    response.status_code = 200 if ready else 503
    return {"status": "ready" if ready else "not_ready", "policies": len(policies)}
