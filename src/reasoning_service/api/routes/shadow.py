"""The shadow report: how often the candidate agrees with the served control (admin keys)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from reasoning_service.api.auth import AdminDep
from reasoning_service.api.deps import ServicesDep
from reasoning_service.store.comparisons import ShadowReport, shadow_report

router = APIRouter(prefix="/v1/shadow", tags=["rollout"])


@router.get("/report", response_model=ShadowReport)
async def get_shadow_report(
    services: ServicesDep,
    _: AdminDep,
    window_hours: Annotated[float, Query(gt=0, le=24 * 366)] = 24.0,
) -> ShadowReport:
    """Agreement overall, per criterion and per status pair over the last `window_hours`."""
    return await shadow_report(services.store, window_hours=window_hours)
