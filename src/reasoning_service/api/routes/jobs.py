"""Jobs: where an asynchronous evaluation is (`GET /v1/jobs/{job_id}`), and its result once done.

A job is readable by the key that submitted it (and admin keys), like its evaluation.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from reasoning_service.api.audit import audited
from reasoning_service.api.auth import CallerDep
from reasoning_service.api.deps import ServicesDep
from reasoning_service.errors import NotFoundError
from reasoning_service.service.jobs import JobState, JobStatus

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


class JobResponse(BaseModel):
    """An asynchronous evaluation: its state and, once done, its evaluation."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    job_id: str
    status: JobState
    """`queued`, `running` (a worker has it; a dead worker's job goes back to `queued`),
    `done` or `failed` (after its retries)."""
    status_url: str
    """Where to poll this job."""
    created_at: str
    evaluation_id: str | None = None
    """Once `done`: the stored evaluation."""
    evaluation_url: str | None = None
    """Once `done`: `GET` it for the result (`/v1/evaluations/{evaluation_id}`)."""


def job_response(job: JobStatus, http: Request) -> JobResponse:
    """The reply for `job`, with absolute links on this server."""
    evaluation_url = (
        str(http.url_for("get_evaluation", evaluation_id=job.evaluation_id))
        if job.evaluation_id
        else None
    )
    return JobResponse(
        job_id=job.job_id,
        status=job.state,
        status_url=str(http.url_for("get_job", job_id=job.job_id)),
        created_at=job.created_at,
        evaluation_id=job.evaluation_id,
        evaluation_url=evaluation_url,
    )


@router.get("/{job_id}", response_model=JobResponse)
async def get_job(
    job_id: str, http: Request, services: ServicesDep, caller: CallerDep
) -> JobResponse:
    async with audited(services, caller, "job.read", job_id):
        job = await services.jobs.status(job_id) if services.jobs is not None else None
        if job is None:
            raise NotFoundError("job_id: no job has this id")
        caller.check_can_read(job.owner, "this job")
        return job_response(job, http)
