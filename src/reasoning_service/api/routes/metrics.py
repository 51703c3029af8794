"""GET /metrics: Prometheus text format (open unless REASONING_METRICS_AUTH=true)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.security import HTTPAuthorizationCredentials

from reasoning_service.api.auth import require_caller
from reasoning_service.api.deps import ServicesDep
from reasoning_service.metrics import CONTENT_TYPE_LATEST

router = APIRouter(tags=["operations"])


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, services: ServicesDep) -> Response:
    if services.settings.metrics_auth:
        header = request.headers.get("authorization", "")
        scheme, _, key = header.partition(" ")
        credentials = HTTPAuthorizationCredentials(scheme=scheme, credentials=key) if key else None
        await require_caller(request, services, credentials)
    if services.metrics is None:
        return Response("", media_type=CONTENT_TYPE_LATEST)
    return Response(services.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
