"""Shadow runs: serve the control, run the candidate in the background, record a comparison.

`EvaluationService` calls `ShadowRunner.schedule` *after* the served result is assembled and
stored, so the response is exactly what it would be without a shadow and never waits for one.
Each run compares the two per criterion (statuses, agreement, confidence delta, latency, tokens,
errors of either side), stores the comparisons (`store/comparisons.py`) and counts them in metrics.

Tasks are kept in a set (the event loop holds only weak references), bounded by `max_pending`
(beyond it a run is skipped and counted), and `aclose()` waits briefly then cancels the rest.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
import uuid
from collections.abc import Sequence

from reasoning_service.metrics import Metrics
from reasoning_service.models import (
    CaseBundle,
    Criterion,
    CriterionResult,
    EvaluationResult,
    Policy,
)
from reasoning_service.models.result import ReasonCode
from reasoning_service.models.task import Controller, CriterionTask
from reasoning_service.store.base import Store
from reasoning_service.store.comparisons import ShadowComparison, save_comparisons

__all__ = ["ShadowRunner", "compare"]

logger = logging.getLogger(__name__)

_ERROR_REASONS = {
    ReasonCode.LLM_FALLBACK,
    ReasonCode.LLM_TRANSIENT_ERROR,
    ReasonCode.LLM_PERMANENT_ERROR,
    ReasonCode.NO_FINISH,
    ReasonCode.TOKEN_BUDGET,
    ReasonCode.MAX_ITERATIONS,
    ReasonCode.DEADLINE,
}


def _error_of(result: CriterionResult) -> str | None:
    return result.reason_code.value if result.reason_code in _ERROR_REASONS else None


def compare(
    evaluation_id: str,
    control: CriterionResult,
    candidate: CriterionResult | None,
    *,
    candidate_latency_ms: float,
    candidate_exception: str | None = None,
    now: dt.datetime | None = None,
) -> ShadowComparison:
    """One criterion's comparison (pure). `candidate` is None when the candidate raised."""
    return ShadowComparison(
        comparison_id=str(uuid.uuid4()),
        evaluation_id=evaluation_id,
        criterion_id=control.criterion_id,
        created_at=now or dt.datetime.now(dt.UTC),
        control_controller=control.controller,
        candidate_controller=candidate.controller if candidate else None,
        control_prompt_id=control.prompt_id,
        candidate_prompt_id=candidate.prompt_id if candidate else None,
        control_status=control.status.value,
        candidate_status=candidate.status.value if candidate else None,
        agree=candidate is not None and candidate.status == control.status,
        confidence_delta=(
            round(candidate.confidence - control.confidence, 4) if candidate else None
        ),
        control_latency_ms=control.usage.latency_ms,
        candidate_latency_ms=candidate_latency_ms,
        control_tokens=control.usage.total_tokens,
        candidate_tokens=candidate.usage.total_tokens if candidate else 0,
        control_error=_error_of(control),
        candidate_error=_error_of(candidate) if candidate else candidate_exception,
    )


class ShadowRunner:
    """Runs candidates in the background; see the module docstring."""

    def __init__(
        self,
        *,
        store: Store,
        metrics: Metrics | None = None,
        criterion_concurrency: int = 4,
        max_pending: int = 32,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._concurrency = criterion_concurrency
        self._max_pending = max_pending
        self._pending: set[asyncio.Task[None]] = set()
        self.completed = 0
        """Shadow runs whose comparisons were stored (or failed to be: see the log)."""

    @property
    def pending(self) -> int:
        return len(self._pending)

    def schedule(
        self,
        *,
        served: EvaluationResult,
        case: CaseBundle,
        policy: Policy,
        criteria: Sequence[Criterion],
        candidate: Controller,
    ) -> bool:
        """Start the candidate on the same criteria; returns at once (False when skipped)."""
        if len(self._pending) >= self._max_pending:
            if self._metrics is not None:
                self._metrics.shadow_skipped.inc()
            logger.warning(
                "shadow run skipped: too many in flight",
                extra={"evaluation_id": served.evaluation_id, "pending": len(self._pending)},
            )
            return False
        task = asyncio.create_task(self._run(served, case, policy, list(criteria), candidate))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return True

    async def drain(self, timeout_s: float | None = None) -> None:
        """Wait for the runs in flight (tests, shutdown)."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=timeout_s)

    async def aclose(self, grace_s: float = 5.0) -> None:
        """Give runs in flight `grace_s` to finish, then cancel the rest."""
        await self.drain(grace_s)
        for task in list(self._pending):
            task.cancel()
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def _run(
        self,
        served: EvaluationResult,
        case: CaseBundle,
        policy: Policy,
        criteria: list[Criterion],
        candidate: Controller,
    ) -> None:
        limit = asyncio.Semaphore(self._concurrency)
        control = {r.criterion_id: r for r in served.results}

        async def one(criterion: Criterion) -> tuple[ShadowComparison, CriterionResult | None]:
            async with limit:
                started = time.perf_counter()
                task = CriterionTask(case=case, policy=policy, criterion=criterion)
                try:
                    result: CriterionResult | None = await candidate.evaluate(task)
                    failure = None
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a shadow must never hurt serving: record it instead
                    result, failure = None, f"exception:{type(exc).__name__}"
                    logger.warning(
                        "shadow candidate failed",
                        extra={"evaluation_id": served.evaluation_id, "error_type": failure},
                    )
                latency_ms = (time.perf_counter() - started) * 1000
            comparison = compare(
                served.evaluation_id,
                control[criterion.criterion_id],
                result,
                candidate_latency_ms=latency_ms,
                candidate_exception=failure,
            )
            return comparison, result

        outcomes = await asyncio.gather(*(one(c) for c in criteria))
        comparisons = [comparison for comparison, _ in outcomes]
        try:
            await save_comparisons(self._store, comparisons)
        finally:
            self.completed += 1
        if self._metrics is not None:
            for c in comparisons:
                agreement = (
                    "error" if c.candidate_status is None else "agree" if c.agree else "disagree"
                )
                self._metrics.observe_shadow(agreement)
            results = [result for _, result in outcomes if result is not None]
            self._metrics.observe_criteria(results, arm="shadow")
        logger.info(
            "shadow comparison stored",
            extra={
                "evaluation_id": served.evaluation_id,
                "criteria": len(comparisons),
                "agreements": sum(1 for c in comparisons if c.agree),
            },
        )
