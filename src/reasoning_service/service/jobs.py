"""Asynchronous evaluations on a durable queue (procrastinate, on the store's PostgreSQL).

The path of one job:

1. `submit` stores the request as a job row (store/jobs.py; with an `Idempotency-Key`, a retried
   submission finds the first job there and queues nothing), then queues the job id on the
   `evaluations` queue and notes the queue's id of it;
2. a `reasoning-service worker` takes it (`run_worker`) and runs `run_job`: when an evaluation
   with this job id is stored already, that is the answer; else it evaluates and stores the
   result under the job id, which is unique, so a second run of the job cannot store a second
   result (its write is a ConflictError and it answers with the first);
3. a worker killed mid-job stops sending heartbeats; every worker looks for jobs of stalled
   workers (`_recover_stalled`) and puts them back on the queue, so another worker runs them,
   at most `MAX_ATTEMPTS` times in all: a job that keeps killing its worker ends `failed`
   instead of taking every worker down in turn. Jobs stored but never queued (the submitting
   process died between the two writes, or the queue refused them) are queued by the same
   sweep, and by a retried submission of the same `Idempotency-Key`;
4. `status` reads the queue's state of the job (queued, running, failed) and the stored
   evaluation (done).

Nothing polls a table of our own: taking, retrying and recovering jobs is procrastinate's.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import uuid
from dataclasses import dataclass
from typing import Literal

import procrastinate
import psycopg
from procrastinate.exceptions import AlreadyEnqueued, ProcrastinateException

from reasoning_service.errors import ConflictError, InvalidInputError, StoreError
from reasoning_service.models import EvaluationRequest
from reasoning_service.service.evaluation import EvaluationService
from reasoning_service.store import Idempotency, Store
from reasoning_service.store.jobs import (
    JobRecord,
    create_job,
    get_job,
    set_queue_job_id,
    unqueued_jobs,
)
from reasoning_service.store.postgres import SCHEMA_LOCK

__all__ = ["JobQueue", "JobState", "JobStatus", "WorkerTiming"]

logger = logging.getLogger(__name__)

QUEUE = "evaluations"
TASK = "evaluate"
MAX_ATTEMPTS = 3
"""Runs of one job, counting those whose worker died and those that raised."""
_RECOVERY_STOP_S = 30.0
JobState = Literal["queued", "running", "done", "failed"]

_STATES: dict[str, JobState] = {
    "todo": "queued",
    "doing": "running",
    "succeeded": "done",
    "failed": "failed",
    "cancelled": "failed",
    "aborting": "running",
    "aborted": "failed",
}


@dataclass(frozen=True)
class JobStatus:
    """Where a job is, and which evaluation it stored once done."""

    job_id: str
    state: JobState
    owner: str | None
    created_at: str
    evaluation_id: str | None = None
    replayed: bool = False
    """A retried submission (same `Idempotency-Key`): this is the first one's job."""


@dataclass(frozen=True)
class WorkerTiming:
    """How fast a dead worker's job goes back on the queue."""

    heartbeat_s: float = 2.0
    """How often a worker says it is alive."""
    stalled_after_s: float = 10.0
    """A worker silent this long is dead: its running jobs are queued again."""
    recover_every_s: float = 2.0
    """How often each worker looks for jobs of dead workers, and for jobs never queued."""
    unqueued_after_s: float = 30.0
    """A job stored this long ago and still not on the queue lost its submitter: queue it."""


class JobQueue:
    """Submit asynchronous evaluations, read their status, and run a worker."""

    def __init__(self, url: str, store: Store) -> None:
        self._url = url
        self._store = store
        self._app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(conninfo=url, min_size=1, max_size=4)
        )

    async def open(self) -> JobQueue:
        """Create the queue's tables when missing (one process at a time), open the pool."""
        await asyncio.to_thread(self._ensure_schema)
        await self._app.open_async()
        return self

    def _ensure_schema(self) -> None:
        try:
            with psycopg.connect(self._url, autocommit=True) as conn, conn.transaction():
                conn.execute("select pg_advisory_xact_lock(%s)", [SCHEMA_LOCK])
                present = conn.execute("select to_regclass('procrastinate_jobs')").fetchone()
                if present is None or present[0] is None:
                    schema = self._app.schema_manager.get_schema()
                    conn.execute(schema)
        except psycopg.Error as exc:
            raise StoreError(f"job queue: cannot migrate ({exc.__class__.__name__})") from exc

    async def aclose(self) -> None:
        await self._app.close_async()

    async def submit(
        self,
        request: EvaluationRequest,
        *,
        owner: str | None,
        idempotency: Idempotency | None = None,
    ) -> JobStatus:
        """Store and queue one evaluation; a retried submission returns the first job.

        Raises:
            InvalidInputError: the `Idempotency-Key` was used with a different body.
        """
        record = JobRecord.of(
            str(uuid.uuid4()),
            owner=owner,
            created_at=dt.datetime.now(dt.UTC).isoformat(),
            request_json=request.model_dump_json(),
            idempotency=idempotency,
        )
        stored, created = await create_job(self._store, record)
        if not created:
            assert idempotency is not None
            if stored.request_sha256 != idempotency.request_sha256:
                raise InvalidInputError(
                    "Idempotency-Key: already used with a different request body; "
                    "use a new key for a new request"
                )
            if stored.queue_job_id is None:  # the first submission never reached the queue
                await self._queue(stored.job_id)
            status = await self.status(stored.job_id)
            assert status is not None
            return JobStatus(**{**status.__dict__, "replayed": True})
        await self._queue(record.job_id)
        return JobStatus(record.job_id, "queued", owner, record.created_at)

    async def _queue(self, job_id: str) -> None:
        """Put a stored job on the queue. The queueing lock (the job id) keeps a job from
        waiting twice when two processes queue it at once; the one that finds it taken is done.

        Raises:
            StoreError: the queue is unreachable (the job stays stored; the sweep queues it).
        """
        deferrer = self._app.configure_task(TASK, queue=QUEUE, queueing_lock=job_id)
        try:
            queue_job_id = await deferrer.defer_async(job_id=job_id)
        except AlreadyEnqueued:
            return
        except (ProcrastinateException, psycopg.Error) as exc:
            raise StoreError(f"job queue: cannot queue ({exc.__class__.__name__})") from exc
        await set_queue_job_id(self._store, job_id, queue_job_id)

    async def status(self, job_id: str) -> JobStatus | None:
        """The job's state; None for an unknown job id."""
        record = await get_job(self._store, job_id)
        if record is None:
            return None
        # The queue's state first, then the result: a job marked succeeded has stored its
        # evaluation before, so the second read sees it (the other order could miss both).
        state: JobState = "queued"
        if record.queue_job_id is not None:
            found = list(await self._app.job_manager.list_jobs_async(id=record.queue_job_id))
            if found and found[0].status is not None:
                state = _STATES.get(str(found[0].status), "queued")
        stored = await self._store.find_job_evaluation(job_id)
        if stored is not None:
            evaluation_id = stored.result.evaluation_id
            return JobStatus(job_id, "done", record.owner, record.created_at, evaluation_id)
        if state == "done":  # succeeded without a stored result: cannot happen; never "done"
            state = "failed"
        return JobStatus(job_id, state, record.owner, record.created_at)

    async def run_worker(
        self,
        evaluations: EvaluationService,
        *,
        concurrency: int = 4,
        timing: WorkerTiming | None = None,
        name: str | None = None,
        install_signal_handlers: bool = True,
    ) -> None:
        """Take jobs until SIGINT/SIGTERM (or until cancelled); meanwhile requeue the jobs of
        dead workers and queue the jobs nobody queued. `install_signal_handlers=False` leaves
        the process's signal handling alone (a worker inside another program, or a test)."""
        timing = timing or WorkerTiming()

        @self._app.task(
            name=TASK,
            queue=QUEUE,
            retry=procrastinate.RetryStrategy(max_attempts=MAX_ATTEMPTS, wait=1),
        )
        async def evaluate(job_id: str) -> str:
            return await run_job(self._store, evaluations, job_id)

        stopping = asyncio.Event()
        recovering = asyncio.create_task(self._recover_stalled(timing, stopping))
        try:
            await self._app.run_worker_async(
                queues=[QUEUE],
                concurrency=concurrency,
                name=name,
                update_heartbeat_interval=timing.heartbeat_s,
                stalled_worker_timeout=timing.stalled_after_s,
                install_signal_handlers=install_signal_handlers,
            )
        finally:
            # Let a recovery pass finish its queries rather than cancel it inside one: a
            # cancelled query on the queue's pool could leave the worker waiting forever.
            stopping.set()
            try:
                await asyncio.wait_for(recovering, timeout=_RECOVERY_STOP_S)
            except TimeoutError:
                logger.warning("job recovery did not stop in time; abandoned")

    async def _recover_stalled(self, timing: WorkerTiming, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=timing.recover_every_s)
                return
            try:
                await self._requeue_stalled(timing.stalled_after_s)
                await self._queue_unqueued(timing.unqueued_after_s)
            except (ProcrastinateException, psycopg.Error, StoreError) as exc:
                logger.warning("job recovery failed; trying again", exc_info=exc)

    async def _requeue_stalled(self, stalled_after_s: float) -> None:
        manager = self._app.job_manager
        stalled = await manager.get_stalled_jobs(
            queue=QUEUE, seconds_since_heartbeat=stalled_after_s
        )
        for job in stalled:
            assert job.id is not None
            if job.attempts + 1 >= MAX_ATTEMPTS:
                logger.error(
                    "a job's worker died on each of its runs: failing it",
                    extra={"queue_job_id": job.id},
                )
                await manager.finish_job_by_id_async(
                    job.id, status=procrastinate.jobs.Status.FAILED, delete_job=False
                )
            else:
                logger.warning(
                    "requeueing the job of a dead worker", extra={"queue_job_id": job.id}
                )
                await manager.retry_job(job)

    async def _queue_unqueued(self, unqueued_after_s: float) -> None:
        cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=unqueued_after_s)
        for job_id in await unqueued_jobs(self._store, cutoff.isoformat()):
            logger.warning("queueing a job its submitter never queued")
            await self._queue(job_id)


async def run_job(store: Store, evaluations: EvaluationService, job_id: str) -> str:
    """Evaluate one job exactly once; returns the id of its (first) stored evaluation.

    Raises:
        LookupError: no job has this id (the queue outran the job row: retried).
    """
    stored = await store.find_job_evaluation(job_id)
    if stored is not None:
        return stored.result.evaluation_id
    record = await get_job(store, job_id)
    if record is None:
        raise LookupError(f"job {job_id} is not stored")
    request = EvaluationRequest.model_validate_json(record.request_json)
    try:
        result = await evaluations.evaluate(request, owner=record.owner, job_id=job_id)
    except ConflictError:
        # Another run of this job stored first (its worker was thought dead): keep that one.
        stored = await store.find_job_evaluation(job_id)
        if stored is None:
            raise
        return stored.result.evaluation_id
    return result.evaluation_id
