"""Asynchronous evaluations as stored: the request waits in `jobs`, the queue carries the job id.

A job row is written before the job is queued, with the submission's idempotency scope (unique),
so a retried submission finds the first job instead of queueing a second. The queue's own id of
the job (`queue_job_id`) is added once it is queued; it is how the job's status is read.
Whether a job is done is read from `evaluations.job_id`, which is unique: one result per job.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from reasoning_service.store.base import Idempotency, Store
from reasoning_service.store.tables import Tables

__all__ = ["JobRecord", "create_job", "get_job", "set_queue_job_id", "unqueued_jobs"]


@dataclass(frozen=True)
class JobRecord:
    """One submitted asynchronous evaluation."""

    job_id: str
    owner: str | None
    created_at: str
    request_json: str
    idempotency_key: str | None = None
    """`Idempotency.scope` of the submission, when it sent an `Idempotency-Key`."""
    request_sha256: str | None = None
    queue_job_id: int | None = None

    @classmethod
    def of(
        cls,
        job_id: str,
        *,
        owner: str | None,
        created_at: str,
        request_json: str,
        idempotency: Idempotency | None,
    ) -> JobRecord:
        return cls(
            job_id=job_id,
            owner=owner,
            created_at=created_at,
            request_json=request_json,
            idempotency_key=idempotency.scope if idempotency else None,
            request_sha256=idempotency.request_sha256 if idempotency else None,
        )


async def create_job(store: Store, record: JobRecord) -> tuple[JobRecord, bool]:
    """Store `record`; when its idempotency scope is taken, the job stored first instead.

    Returns the stored job and whether it is the one just created."""
    row = asdict(record)

    def create(tables: Tables) -> tuple[JobRecord, bool]:
        if tables.insert_new("jobs", row):
            return record, True
        rows = tables.select("jobs", "idempotency_key = ?", [record.idempotency_key], limit=1)
        return _from_row(rows[0]), False

    return await store.run(create)


async def get_job(store: Store, job_id: str) -> JobRecord | None:
    rows = await store.run(lambda tables: tables.select("jobs", "job_id = ?", [job_id], limit=1))
    return _from_row(rows[0]) if rows else None


async def set_queue_job_id(store: Store, job_id: str, queue_job_id: int) -> None:
    """Note the queue's id of the job; the first one noted stays (a job queued twice at once
    still runs once: `run_job` stores one result per job)."""
    await store.run(
        lambda tables: tables.update(
            "jobs", {"queue_job_id": queue_job_id}, "job_id = ? and queue_job_id is null", [job_id]
        )
    )


async def unqueued_jobs(store: Store, created_before: str, limit: int = 100) -> list[str]:
    """Ids of jobs stored before `created_before` (ISO time) that never reached the queue: the
    process that stored them died, or the queue refused them, before they were queued."""
    rows = await store.run(
        lambda tables: tables.select(
            "jobs",
            "queue_job_id is null and created_at < ?",
            [created_before],
            columns="job_id",
            order_by="created_at",
            limit=limit,
        )
    )
    return [str(row["job_id"]) for row in rows]


def _from_row(row: dict[str, Any]) -> JobRecord:
    return JobRecord(**{name: row[name] for name in JobRecord.__dataclass_fields__})
