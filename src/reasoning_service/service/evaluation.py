"""The core both the API and the CLI run: evaluate a case against a policy, store the result."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
import uuid

from reasoning_service import __version__
from reasoning_service.errors import InvalidInputError
from reasoning_service.metrics import Metrics
from reasoning_service.models import (
    CaseBundle,
    Criterion,
    CriterionResult,
    EvaluationRequest,
    EvaluationResult,
    Policy,
    Usage,
)
from reasoning_service.models.task import Controller, CriterionTask
from reasoning_service.rollout.routing import Router
from reasoning_service.rollout.shadow import ShadowRunner
from reasoning_service.service.policies import PolicyService
from reasoning_service.service.recommendation import recommend
from reasoning_service.store import Idempotency, Store

logger = logging.getLogger(__name__)


class EvaluationService:
    """Runs the routed controller on each criterion (bounded concurrency), stores the result."""

    def __init__(
        self,
        *,
        store: Store,
        policies: PolicyService,
        router: Router,
        criterion_concurrency: int = 4,
        metrics: Metrics | None = None,
        shadow: ShadowRunner | None = None,
    ) -> None:
        self._store = store
        self._policies = policies
        self._router = router
        self._concurrency = criterion_concurrency
        self._metrics = metrics
        self._shadow = shadow

    async def evaluate(
        self,
        request: EvaluationRequest,
        *,
        owner: str | None = None,
        idempotency: Idempotency | None = None,
        job_id: str | None = None,
    ) -> EvaluationResult:
        """Evaluate, combine by the policy logic, store, and return the evaluation.

        `idempotency` and `job_id` (an asynchronous job's) are stored in the evaluation's row,
        each unique, so neither a retry nor a job run twice can store twice.
        """
        started = time.perf_counter()
        policy = await self._policies.get(request.policy_id, request.policy_version)
        criteria = select_criteria(policy, request.criterion_ids)
        route = self._router.route(request.case.case_id)
        tasks = [CriterionTask(case=request.case, policy=policy, criterion=c) for c in criteria]
        results = await self._run(route.controller, tasks)
        results = [r.model_copy(update={"arm": route.arm}) for r in results]
        result = _assemble(
            request.case, policy, results, route.controller.name, arm=route.arm, started=started
        )
        traces = {t.criterion.criterion_id: t.trace for t in tasks}
        await self._store.save_evaluation(
            result,
            case=request.case,
            traces=traces,
            owner=owner,
            idempotency=idempotency,
            job_id=job_id,
        )
        if self._metrics is not None:
            self._metrics.observe_evaluation(result)
        if route.shadow is not None and self._shadow is not None:
            # After the result is final and stored: the shadow can neither change nor delay it.
            self._shadow.schedule(
                served=result,
                case=request.case,
                policy=policy,
                criteria=criteria,
                candidate=route.shadow,
            )
        logger.info(
            "evaluation stored",
            extra={
                "evaluation_id": result.evaluation_id,
                "controller": result.controller,
                "arm": result.arm,
                "criteria": len(results),
                "recommendation": result.recommendation.value,
            },
        )
        return result

    async def _run(
        self, controller: Controller, tasks: list[CriterionTask]
    ) -> list[CriterionResult]:
        limit = asyncio.Semaphore(self._concurrency)

        async def one(task: CriterionTask) -> CriterionResult:
            async with limit:
                return await controller.evaluate(task)

        return list(await asyncio.gather(*(one(t) for t in tasks)))


def select_criteria(policy: Policy, criterion_ids: list[str] | None) -> list[Criterion]:
    """The criteria to evaluate; unknown ids are the caller's mistake."""
    if policy.criteria is None:
        raise InvalidInputError(
            f"policy_id: policy {policy.policy_id!r} has no criteria set; upload one with it"
        )
    if criterion_ids is None:
        return list(policy.criteria.criteria)
    unknown = [i for i, cid in enumerate(criterion_ids) if policy.criteria.criterion(cid) is None]
    if unknown:
        # Named by position, never echoed: request values are the caller's data.
        fields = ", ".join(f"criterion_ids[{i}]" for i in unknown[:10])
        raise InvalidInputError(f"{fields}: not a criterion of policy {policy.policy_id!r}")
    wanted = set(criterion_ids)
    return [c for c in policy.criteria.criteria if c.criterion_id in wanted]


def _assemble(
    case: CaseBundle,
    policy: Policy,
    results: list[CriterionResult],
    controller: str,
    *,
    arm: str | None,
    started: float,
) -> EvaluationResult:
    assert policy.criteria is not None
    recommendation, open_criteria, summary = recommend(policy.criteria, results)
    usage = sum((r.usage for r in results), Usage())
    usage = usage.model_copy(update={"latency_ms": (time.perf_counter() - started) * 1000})
    prompted = next((r for r in results if r.prompt_id), results[0])
    return EvaluationResult(
        evaluation_id=str(uuid.uuid4()),
        case_id=case.case_id,
        policy=policy.ref,
        recommendation=recommendation,
        summary=summary,
        open_criteria=open_criteria,
        results=results,
        controller=controller,
        prompt_id=prompted.prompt_id,
        provider=prompted.provider,
        model=prompted.model,
        arm=arm,
        service_version=__version__,
        created_at=dt.datetime.now(dt.UTC),
        usage=usage,
    )
