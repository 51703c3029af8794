"""Shadow mode: the served response is unchanged and undelayed; every comparison is recorded."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import pytest

from reasoning_service.metrics import Metrics
from reasoning_service.models import CriterionResult, CriterionStatus, EvaluationRequest
from reasoning_service.rollout.routing import Router
from reasoning_service.rollout.shadow import ShadowRunner
from reasoning_service.service.container import Services, build_services
from reasoning_service.service.evaluation import EvaluationService
from reasoning_service.settings import Settings
from reasoning_service.store.comparisons import list_comparisons, shadow_report

POLICY = "NCD-240.4"
_VOLATILE = {"evaluation_id", "created_at"}


class FakeCandidate:
    """A candidate controller: a fixed status after a delay, or an exception."""

    name = "react"

    def __init__(self, status: str = "met", *, delay_s: float = 0.0, fail_on: str | None = None):
        self.status, self.delay_s, self.fail_on = status, delay_s, fail_on
        self.calls = 0

    async def evaluate(self, task) -> CriterionResult:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        if self.fail_on and task.criterion.criterion_id.endswith(self.fail_on):
            raise RuntimeError("candidate blew up")
        return CriterionResult(
            criterion_id=task.criterion.criterion_id,
            status=CriterionStatus(self.status),
            confidence=0.8,
            rationale="fake",
            controller="react",
            prompt_id="fake-v1",
        )


@pytest.fixture
async def services(tmp_path) -> Services:
    services = await build_services(Settings(db_path=tmp_path / "s.db"))
    yield services
    await services.aclose()


def _service(services: Services, mode: str, candidate, *, shadow: ShadowRunner | None):
    router = Router(mode, heuristic=services.conditions, react=candidate)
    return EvaluationService(
        store=services.store, policies=services.policies, router=router, shadow=shadow
    )


def _served(result) -> str:
    """The response body minus what differs on every call (ids, clock, wall time)."""
    body = result.model_dump(mode="json", exclude=_VOLATILE)
    body["usage"].pop("latency_ms")
    for r in body["results"]:
        r["usage"].pop("latency_ms")
    return str(body)


async def test_shadow_never_changes_or_delays_the_served_response(services, cpap_case):
    request = EvaluationRequest(case=cpap_case, policy_id=POLICY)
    slow = FakeCandidate("not_met", delay_s=30.0)
    runner = ShadowRunner(store=services.store, metrics=Metrics())
    with_shadow = _service(services, "shadow", slow, shadow=runner)
    without_shadow = _service(services, "shadow", FakeCandidate(), shadow=None)

    started = time.perf_counter()
    shadowed = await with_shadow.evaluate(request)
    elapsed = time.perf_counter() - started
    plain = await without_shadow.evaluate(request)

    assert elapsed < 10, "the response waited for the 30 s shadow"
    assert runner.pending == 1 and slow.calls >= 1
    assert _served(shadowed) == _served(plain)
    assert shadowed.controller == "heuristic" and shadowed.arm == "control"
    stored = await services.store.get_evaluation(shadowed.evaluation_id)
    assert stored.result == shadowed, "the stored evaluation is the served one"
    await runner.aclose(grace_s=0)  # shutdown cancels what is in flight


async def test_every_criterion_of_every_shadowed_evaluation_is_compared(services, cpap_case):
    metrics = Metrics()
    runner = ShadowRunner(store=services.store, metrics=metrics)
    candidate = FakeCandidate("met", fail_on="C2")
    service = _service(services, "shadow", candidate, shadow=runner)
    served = [
        await service.evaluate(
            EvaluationRequest(
                case=cpap_case.model_copy(update={"case_id": f"c{i}"}), policy_id=POLICY
            )
        )
        for i in range(3)
    ]
    await runner.drain(10)

    rows = await list_comparisons(services.store, since=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    assert len(rows) == sum(len(s.results) for s in served)
    assert {r.evaluation_id for r in rows} == {s.evaluation_id for s in served}
    for evaluation in served:
        control = {r.criterion_id: r for r in evaluation.results}
        for row in (r for r in rows if r.evaluation_id == evaluation.evaluation_id):
            assert row.control_status == control[row.criterion_id].status.value
            if row.criterion_id.endswith("C2"):
                assert row.candidate_status is None and not row.agree
                assert row.candidate_error == "exception:RuntimeError"
            else:
                assert row.candidate_status == "met"
                assert row.agree == (row.control_status == "met")
                assert row.confidence_delta == pytest.approx(
                    0.8 - control[row.criterion_id].confidence, abs=1e-3
                )
    report = await shadow_report(services.store, window_hours=1)
    assert report.overall.comparisons == len(rows)
    assert report.overall.agreements == sum(r.agree for r in rows)
    assert sum(report.per_status_pair.values()) == len(rows)
    assert report.candidate_errors == 3
    exposition = metrics.exposition().decode()
    assert 'reasoning_shadow_comparisons_total{agreement="error"} 3.0' in exposition
    assert not any(f'"c{i}"' in exposition for i in range(3)), "a case id became a label"


async def test_too_many_shadow_runs_in_flight_are_skipped_and_counted(services, cpap_case):
    metrics = Metrics()
    runner = ShadowRunner(store=services.store, metrics=metrics, max_pending=1)
    service = _service(services, "shadow", FakeCandidate(delay_s=5), shadow=runner)
    request = EvaluationRequest(case=cpap_case, policy_id=POLICY, criterion_ids=["NCD-240.4/C1"])
    await service.evaluate(request)
    await service.evaluate(request)
    assert runner.pending == 1
    assert "reasoning_shadow_skipped_total 1.0" in metrics.exposition().decode()
    await runner.aclose(grace_s=0)
    assert runner.pending == 0


async def test_ab_results_carry_their_arm(services, cpap_case):
    service = _service(services, "ab:50", FakeCandidate("met"), shadow=None)
    arms = set()
    for i in range(12):
        case = cpap_case.model_copy(update={"case_id": f"ab-{i}"})
        result = await service.evaluate(
            EvaluationRequest(case=case, policy_id=POLICY, criterion_ids=["NCD-240.4/C1"])
        )
        arms.add(result.arm)
        assert {r.arm for r in result.results} == {result.arm}
        assert result.controller == ("react" if result.arm == "candidate" else "heuristic")
    assert arms == {"control", "candidate"}
