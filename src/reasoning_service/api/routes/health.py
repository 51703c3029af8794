"""Liveness and readiness: neither waits for an evaluation, the store or an LLM.

Both must answer within a second while the service runs all the evaluations it admits
(issue 13: a probe that waits behind them gets the process restarted). `/healthz` touches
nothing; `/readyz` reads a cached store check (service/readiness.py) and the admission counters.
"""

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
    """The store answers and holds at least one policy (checked at most every few seconds).

    A full evaluation queue does not make the service unready: overload is answered per
    request (503 with Retry-After), so a load balancer does not pull every replica at once."""
    report = await services.readiness.check()
    admission = services.admission.state
    response.status_code = 200 if report.ready else 503
    return {
        "status": "ready" if report.ready else "not_ready",
        "policies": report.policies,
        "evaluations_in_progress": admission.in_progress,
        "evaluations_waiting": admission.waiting,
    }
