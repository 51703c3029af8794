"""Metrics: each family moves with what an evaluation did, with low-cardinality labels only."""

from __future__ import annotations

import datetime as dt

import pytest

from reasoning_service.errors import RateLimited
from reasoning_service.metrics import MeteredLLMClient, Metrics
from reasoning_service.models import (
    CriterionResult,
    EvaluationResult,
    LLMRequest,
    Message,
    ReasoningStep,
    Usage,
)
from reasoning_service.models.policy import PolicyRef
from reasoning_service.models.result import ReasonCode, Recommendation, StepKind
from reasoning_service.testing.scripted_llm import ScriptedLLM, finish


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels or None)
    return value or 0.0


def criterion(cid: str, status: str, reason: ReasonCode | None = None, **usage: int):
    steps = [
        ReasoningStep(index=0, kind=StepKind.TOOL_CALL, tool="facts_get"),
        ReasoningStep(index=1, kind=StepKind.OBSERVATION, tool="facts_get"),
        ReasoningStep(index=2, kind=StepKind.OBSERVATION, tool="facts_get", cache_hit=True),
        ReasoningStep(index=3, kind=StepKind.OBSERVATION, tool="pi_search", is_error=True),
        ReasoningStep(index=4, kind=StepKind.OBSERVATION, tool="finish"),
    ]
    return CriterionResult(
        criterion_id=cid,
        status=status,
        confidence=0.9,
        rationale="r",
        controller="react",
        reason_code=reason,
        reasoning_trace=steps,
        usage=Usage(**usage),
        arm="candidate",
    )


def evaluation(results: list[CriterionResult]) -> EvaluationResult:
    return EvaluationResult(
        evaluation_id="e1",
        case_id="SECRET-CASE-ID",
        policy=PolicyRef(policy_id="P", version="1", sha256="x"),
        recommendation=Recommendation.PEND_FOR_REVIEW,
        summary="s",
        results=results,
        controller="react",
        arm="candidate",
        service_version="0",
        created_at=dt.datetime.now(dt.UTC),
        usage=Usage(latency_ms=1500),
    )


def test_an_evaluation_moves_every_criterion_level_family():
    metrics = Metrics()
    metrics.observe_evaluation(
        evaluation(
            [
                criterion("C1", "met", input_tokens=100, output_tokens=20, cached_input_tokens=60),
                criterion("C2", "uncertain", ReasonCode.LLM_FALLBACK),
                criterion("C3", "uncertain", ReasonCode.TOKEN_BUDGET),
            ]
        )
    )
    labels = {"controller": "react", "arm": "candidate"}
    assert (
        sample(metrics, "reasoning_evaluations_total", **labels, recommendation="pend_for_review")
        == 1
    )
    assert sample(metrics, "reasoning_criterion_results_total", **labels, status="uncertain") == 2
    assert sample(metrics, "reasoning_evaluation_duration_seconds_sum", **labels) == 1.5
    assert sample(metrics, "reasoning_llm_tokens_total", direction="input") == 100
    assert sample(metrics, "reasoning_llm_tokens_total", direction="cached_input") == 60
    assert sample(metrics, "reasoning_tool_calls_total", tool="facts_get", outcome="ok") == 6
    assert sample(metrics, "reasoning_tool_calls_total", tool="pi_search", outcome="error") == 3
    assert sample(metrics, "reasoning_tool_cache_total", result="hit") == 3
    assert sample(metrics, "reasoning_tool_cache_total", result="miss") == 3
    assert sample(metrics, "reasoning_fallbacks_total", reason="llm_fallback") == 1
    assert sample(metrics, "reasoning_budget_exhaustions_total", limit="token_budget") == 1
    assert b"SECRET-CASE-ID" not in metrics.exposition()


async def test_llm_calls_are_timed_and_errors_and_retries_counted():
    metrics = Metrics()
    error = RateLimited("slow down", provider="scripted", model="m", status=429)
    llm = MeteredLLMClient(ScriptedLLM([finish(), error]), metrics)
    request = LLMRequest(messages=(Message(role="user", content="hi"),))
    await llm.complete(request)
    with pytest.raises(RateLimited):
        await llm.complete(request)
    metrics.on_retry(error, 1, 0.5)
    calls = "reasoning_llm_call_duration_seconds_count"
    assert sample(metrics, calls, provider="scripted", outcome="ok") == 1
    assert sample(metrics, calls, provider="scripted", outcome="error") == 1
    assert sample(metrics, "reasoning_llm_errors_total", provider="scripted", kind="transient") == 2
    assert sample(metrics, "reasoning_llm_retries_total", provider="scripted") == 1


def test_two_services_do_not_share_a_registry():
    first, second = Metrics(), Metrics()
    first.observe_shadow("agree")
    assert sample(first, "reasoning_shadow_comparisons_total", agreement="agree") == 1
    assert sample(second, "reasoning_shadow_comparisons_total", agreement="agree") == 0
