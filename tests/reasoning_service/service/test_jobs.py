"""The job queue never leaves a job waiting forever: a job stored but never queued is queued, and
a job whose worker keeps dying ends `failed` after `MAX_ATTEMPTS` runs (real PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator

import psycopg
import pytest
from tests.reasoning_service.api.conftest import make_settings

from reasoning_service.models import EvaluationRequest
from reasoning_service.service.container import Services, build_services
from reasoning_service.service.jobs import MAX_ATTEMPTS, JobState, WorkerTiming
from reasoning_service.store import Idempotency
from reasoning_service.store.jobs import JobRecord, create_job, get_job

ONE_CRITERION = {"policy_id": "NCD-240.4", "criterion_ids": ["NCD-240.4/C1"]}
FAST = WorkerTiming(heartbeat_s=0.5, stalled_after_s=2, recover_every_s=0.2, unqueued_after_s=1)


@pytest.fixture
async def services(postgres_url, tmp_path) -> AsyncIterator[Services]:
    built = await build_services(make_settings(tmp_path / "unused.db", database_url=postgres_url))
    assert built.jobs is not None
    yield built
    await built.aclose()


@contextlib.asynccontextmanager
async def worker(services: Services) -> AsyncIterator[None]:
    assert services.jobs is not None
    running = asyncio.create_task(
        services.jobs.run_worker(services.evaluations, timing=FAST, install_signal_handlers=False)
    )
    try:
        yield
    finally:
        running.cancel()
        # A worker that does not stop is a failure of its own, not a hung test run.
        await asyncio.wait_for(asyncio.gather(running, return_exceptions=True), timeout=60)


async def wait_for(services: Services, job_id: str, state: JobState) -> None:
    assert services.jobs is not None
    for _ in range(150):
        status = await services.jobs.status(job_id)
        if status is not None and status.state == state:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"job {job_id} is {status.state if status else None}, not {state}")


def stored_unqueued(request: EvaluationRequest, *, key: str | None = None) -> JobRecord:
    """A job as a submitter leaves it when it dies between storing and queueing."""
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    return JobRecord.of(
        f"job-{key or 'lost'}",
        owner="k1",
        created_at=long_ago.isoformat(),
        request_json=request.model_dump_json(),
        idempotency=Idempotency.of("k1", key, "sha-1") if key else None,
    )


async def test_a_job_its_submitter_never_queued_is_queued_by_a_worker_and_done(services, cpap_case):
    request = EvaluationRequest(case=cpap_case, **ONE_CRITERION, mode="async")
    record, _ = await create_job(services.store, stored_unqueued(request))
    async with worker(services):
        await wait_for(services, record.job_id, "done")
    count = await services.store.run(
        lambda tables: tables.count("evaluations", "job_id = ?", [record.job_id])
    )
    assert count == 1


async def test_a_retried_submission_queues_a_first_one_that_never_reached_the_queue(
    services, cpap_case
):
    request = EvaluationRequest(case=cpap_case, **ONE_CRITERION, mode="async")
    record, _ = await create_job(services.store, stored_unqueued(request, key="order-9"))
    assert services.jobs is not None
    again = await services.jobs.submit(
        request, owner="k1", idempotency=Idempotency.of("k1", "order-9", "sha-1")
    )
    assert again.replayed and again.job_id == record.job_id and again.state == "queued"
    queued = await get_job(services.store, record.job_id)
    assert queued is not None and queued.queue_job_id is not None
    async with worker(services):
        await wait_for(services, record.job_id, "done")


async def test_a_job_whose_worker_died_on_every_run_ends_failed_and_others_are_run_again(
    services, postgres_url, cpap_case
):
    assert services.jobs is not None
    request = EvaluationRequest(case=cpap_case, **ONE_CRITERION, mode="async")
    poison = await services.jobs.submit(request, owner="k1")
    orphan = await services.jobs.submit(request, owner="k1")
    # Both taken by a worker that then died (no worker row left): the first on its last run.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for job, attempts in ((poison, MAX_ATTEMPTS - 1), (orphan, 0)):
            record = await get_job(services.store, job.job_id)
            assert record is not None
            conn.execute(
                "update procrastinate_jobs set status = 'doing', worker_id = null, attempts = %s"
                " where id = %s",
                [attempts, record.queue_job_id],
            )
    async with worker(services):
        await wait_for(services, poison.job_id, "failed")
        await wait_for(services, orphan.job_id, "done")
    assert await services.store.find_job_evaluation(poison.job_id) is None
