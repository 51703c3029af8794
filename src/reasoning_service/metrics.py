"""Prometheus metrics: one `Metrics` object per service graph, with its own registry.

Families (all prefixed `reasoning_`), labels low-cardinality only — never a case id, a criterion
text or anything from a case:

    evaluations_total{controller, arm, recommendation}
    criterion_results_total{controller, arm, status}
    evaluation_duration_seconds{controller, arm}               histogram
    llm_call_duration_seconds{provider, outcome}               histogram, one per call (retries in)
    llm_errors_total{provider, kind}                           kind: transient | permanent
    llm_retries_total{provider}
    llm_tokens_total{direction}                                input | output | cached_input
    tool_calls_total{tool, outcome}                            ok | error
    tool_cache_total{result}                                   hit | miss
    fallbacks_total{reason}                                    reason_code of a fallback result
    budget_exhaustions_total{limit}                            token_budget | max_iterations
    shadow_comparisons_total{agreement}                        agree | disagree | error
    shadow_skipped_total                                       too many shadow runs in flight

Criterion-level counters are derived in one place, `observe_evaluation`, from the results
(usage, reason codes, trace steps), so controllers stay free of metrics code. LLM calls are
timed by `MeteredLLMClient`, a wrapper, and retries counted through the retry layer's `on_retry`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from reasoning_service.errors import LLMError, TransientLLMError
from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.wrapper import WrapperLLM
from reasoning_service.models import CriterionResult, EvaluationResult, LLMReply, LLMRequest
from reasoning_service.models.result import ReasonCode, StepKind

__all__ = ["CONTENT_TYPE_LATEST", "MeteredLLMClient", "Metrics"]

_FALLBACK_REASONS = {
    ReasonCode.LLM_FALLBACK,
    ReasonCode.LLM_TRANSIENT_ERROR,
    ReasonCode.LLM_PERMANENT_ERROR,
    ReasonCode.NO_FINISH,
}
_BUDGET_REASONS = {ReasonCode.TOKEN_BUDGET, ReasonCode.MAX_ITERATIONS}
_LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


def _arm(arm: str | None) -> str:
    return arm or "none"


class Metrics:
    """The metric families above, registered in `self.registry` (no process-global state)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.evaluations = Counter(
            "reasoning_evaluations",
            "Evaluations served, by controller, rollout arm and recommendation.",
            ["controller", "arm", "recommendation"],
            registry=r,
        )
        self.criterion_results = Counter(
            "reasoning_criterion_results",
            "Criterion results served, by controller, rollout arm and status.",
            ["controller", "arm", "status"],
            registry=r,
        )
        self.evaluation_duration = Histogram(
            "reasoning_evaluation_duration_seconds",
            "Wall time of one evaluation (all criteria).",
            ["controller", "arm"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.llm_call_duration = Histogram(
            "reasoning_llm_call_duration_seconds",
            "Wall time of one LLM call, retries included.",
            ["provider", "outcome"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.llm_errors = Counter(
            "reasoning_llm_errors",
            "Failed LLM attempts, by provider and kind (transient or permanent).",
            ["provider", "kind"],
            registry=r,
        )
        self.llm_retries = Counter(
            "reasoning_llm_retries", "LLM retries scheduled.", ["provider"], registry=r
        )
        self.llm_tokens = Counter(
            "reasoning_llm_tokens",
            "Tokens by direction: input (cached included), output, cached_input.",
            ["direction"],
            registry=r,
        )
        self.tool_calls = Counter(
            "reasoning_tool_calls",
            "Tool calls answered, by tool and outcome (ok or error).",
            ["tool", "outcome"],
            registry=r,
        )
        self.tool_cache = Counter(
            "reasoning_tool_cache",
            "Per-evaluation tool cache lookups, by result (hit or miss).",
            ["result"],
            registry=r,
        )
        self.fallbacks = Counter(
            "reasoning_fallbacks",
            "Criterion results produced by a fallback, by reason code.",
            ["reason"],
            registry=r,
        )
        self.budget_exhaustions = Counter(
            "reasoning_budget_exhaustions",
            "Criteria that hit a limit (token_budget or max_iterations).",
            ["limit"],
            registry=r,
        )
        self.shadow_comparisons = Counter(
            "reasoning_shadow_comparisons",
            "Shadow comparisons recorded, by agreement (agree, disagree, error).",
            ["agreement"],
            registry=r,
        )
        self.shadow_skipped = Counter(
            "reasoning_shadow_skipped",
            "Shadow runs skipped because too many were in flight.",
            registry=r,
        )
        for direction in ("input", "output", "cached_input"):
            self.llm_tokens.labels(direction=direction)
        for result in ("hit", "miss"):
            self.tool_cache.labels(result=result)

    # --- observations -----------------------------------------------------------------------

    def observe_evaluation(self, result: EvaluationResult) -> None:
        """Count a served evaluation and everything its criterion results say."""
        arm = _arm(result.arm)
        self.evaluations.labels(result.controller, arm, result.recommendation.value).inc()
        self.evaluation_duration.labels(result.controller, arm).observe(
            result.usage.latency_ms / 1000
        )
        self.observe_criteria(result.results, arm=result.arm)

    def observe_criteria(self, results: Iterable[CriterionResult], *, arm: str | None) -> None:
        """Criterion-level counters; also used for shadow runs, whose results are not served."""
        for r in results:
            self.criterion_results.labels(r.controller, _arm(arm), r.status.value).inc()
            self.llm_tokens.labels("input").inc(r.usage.input_tokens)
            self.llm_tokens.labels("output").inc(r.usage.output_tokens)
            self.llm_tokens.labels("cached_input").inc(r.usage.cached_input_tokens)
            if r.reason_code in _FALLBACK_REASONS:
                self.fallbacks.labels(r.reason_code.value).inc()
            if r.reason_code in _BUDGET_REASONS:
                self.budget_exhaustions.labels(r.reason_code.value).inc()
            for step in r.reasoning_trace:
                if step.kind is not StepKind.OBSERVATION or not step.tool:
                    continue
                self.tool_calls.labels(step.tool, "error" if step.is_error else "ok").inc()
                if step.tool != "finish" and not step.is_error:
                    self.tool_cache.labels("hit" if step.cache_hit else "miss").inc()

    def observe_shadow(self, agreement: str) -> None:
        self.shadow_comparisons.labels(agreement).inc()

    def on_retry(self, error: TransientLLMError, attempt: int, wait_s: float) -> None:
        """`OnRetry` hook for `RetryingLLMClient`: a failed attempt that will be retried."""
        self.llm_errors.labels(error.provider, error.kind).inc()
        self.llm_retries.labels(error.provider).inc()

    def exposition(self) -> bytes:
        """The text format served at GET /metrics."""
        return generate_latest(self.registry)


class MeteredLLMClient(WrapperLLM):
    """`LLMClient` wrapper timing each call and counting the errors that leave it.

    Wrap it *outside* the retry layer: a retried attempt is counted by `Metrics.on_retry`, the
    error that ends a call by this wrapper, so every failed attempt is counted once.
    """

    def __init__(self, inner: LLMClient, metrics: Metrics) -> None:
        super().__init__(inner)
        self._metrics = metrics

    async def complete(self, request: LLMRequest) -> LLMReply:
        started = time.perf_counter()
        outcome = "ok"
        try:
            return await self._inner.complete(request)
        except LLMError as exc:
            outcome = "error"
            self._metrics.llm_errors.labels(self.provider, exc.kind).inc()
            raise
        finally:
            self._metrics.llm_call_duration.labels(self.provider, outcome).observe(
                time.perf_counter() - started
            )
