"""Items 1 and 4: the service's own cost per ReAct iteration, and its tokens per criterion.

One pass evaluates each example's criterion through the real stack — `EvaluationService`
(routing, storage), the ReAct loop, `ToolExecutor`, the OpenAI adapter and the retry and
recording layers — against the scripted OpenAI API (`ScriptedAPI` + `PolicyAgent`) on
loopback, answering at once. It is served by `LiveServer` rather than `ScriptedServer`: the
latter adds ~40 ms to every round trip on this machine, which would drown what is measured.
A timer sits right around the OpenAI SDK call, so everything outside it is the service's own
cost: tool execution, validation, cache, conversation, trace recording, storage.

Overhead per iteration is reported two ways: the gaps between one LLM call's end and the next
one's start (plus lead-in and tail) inside the loop, and the whole evaluation's wall time minus
its LLM time divided by its iterations (storage included). The baseline is the raw HTTP round
trip: the same recorded request bodies re-posted to the same server with a bare httpx client.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from reasoning_service.bench.data import BenchData, BenchExample
from reasoning_service.bench.stats import percentile, summarise_ms
from reasoning_service.bench.wire import RecordingAgent, cost_usd
from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.openai import build_openai_client
from reasoning_service.llm.retry import RetryingLLMClient
from reasoning_service.llm.wrapper import WrapperLLM
from reasoning_service.models import CriterionResult, EvaluationRequest, LLMReply, LLMRequest
from reasoning_service.service.container import build_services
from reasoning_service.settings import Settings
from reasoning_service.testing.live_server import LiveServer
from reasoning_service.testing.scripted_server import ScriptedAPI

__all__ = ["ServicePass", "run_service_pass", "scripted_react_settings"]


def scripted_react_settings(db_path: Path | str, base_url: str, data_dir: Path) -> Settings:
    """The service configured for the ReAct controller against a scripted OpenAI server."""
    return Settings(
        db_path=db_path,
        controller="react",
        llm_provider="openai",
        llm_model="bench-model",
        llm_base_url=base_url,
        llm_api_key="sk-bench-not-a-key",
        tree_search="lexical",
        examples_dir=data_dir,
        seed_examples=True,
        auth="off",
        log_level="WARNING",
        retry_base_s=0.01,
    )


class _TimedLLM(WrapperLLM):
    """Wraps the SDK adapter: records (start, end) of every call."""

    def __init__(self, inner: LLMClient) -> None:
        super().__init__(inner)
        self.spans: list[tuple[float, float]] = []

    async def complete(self, request: LLMRequest) -> LLMReply:
        started = time.perf_counter()
        try:
            return await self._inner.complete(request)
        finally:
            self.spans.append((started, time.perf_counter()))


@dataclass
class ServicePass:
    """What one pass over the examples measured."""

    results: list[tuple[BenchExample, CriterionResult]] = field(default_factory=list)
    overhead: dict[str, Any] = field(default_factory=dict)
    tokens: dict[str, Any] = field(default_factory=dict)


async def run_service_pass(data: BenchData, examples: list[BenchExample]) -> ServicePass:
    """Evaluate `examples` one at a time through the service; see the module docstring."""
    agent = RecordingAgent()
    outcome = ServicePass()
    api = ScriptedAPI(responder=agent)
    with tempfile.TemporaryDirectory() as tmp, LiveServer(api.app) as server:
        base_url = f"{server.url}/v1"
        settings = scripted_react_settings(Path(tmp) / "bench.db", base_url, data.data_dir)
        timed = _TimedLLM(build_openai_client(settings, provider="openai"))
        llm = RetryingLLMClient(timed, max_retries=0, base_s=0.01, retry_after_cap_s=0.1)
        services = await build_services(settings, llm=llm)
        gaps_s: list[float] = []
        per_iteration_s: list[float] = []
        llm_s: list[float] = []
        try:
            await _warm_up(services, examples[0])
            mark = agent.mark()
            api.reset()
            for example in examples:
                first = len(timed.spans)
                started = time.perf_counter()
                evaluation = await services.evaluations.evaluate(_request(example))
                ended = time.perf_counter()
                spans = timed.spans[first:]
                outcome.results.append((example, evaluation.results[0]))
                llm_time = sum(end - start for start, end in spans)
                llm_s += [end - start for start, end in spans]
                per_iteration_s.append((ended - started - llm_time) / max(len(spans), 1))
                gaps_s += _loop_gaps(spans)
            wire = agent.since(mark)
            bodies = [r.body for r in api.requests]
            raw_s = await _raw_round_trips(base_url, bodies)
        finally:
            await services.aclose()
    outcome.overhead = _overhead_section(gaps_s, per_iteration_s, llm_s, raw_s)
    outcome.tokens = _tokens_section(outcome.results, wire.as_dict(), data.labeled)
    return outcome


async def _warm_up(services: Any, example: BenchExample) -> None:
    """One evaluation first, so imports, JIT-less caches and connections are warm."""
    await services.evaluations.evaluate(_request(example))


def _request(example: BenchExample) -> EvaluationRequest:
    return EvaluationRequest(
        case=example.case, policy_id=example.policy_id, criterion_ids=[example.criterion_id]
    )


def _loop_gaps(spans: list[tuple[float, float]]) -> list[float]:
    """Time between an LLM call's end and the next one's start: tools, validation, state."""
    return [spans[i + 1][0] - spans[i][1] for i in range(len(spans) - 1)]


async def _raw_round_trips(base_url: str, bodies: list[dict[str, Any]]) -> list[float]:
    durations = []
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        await client.post("/chat/completions", json=bodies[0])
        for body in bodies:
            started = time.perf_counter()
            response = await client.post("/chat/completions", json=body)
            durations.append(time.perf_counter() - started)
            response.raise_for_status()
    return durations


def _overhead_section(
    gaps_s: list[float], per_iteration_s: list[float], llm_s: list[float], raw_s: list[float]
) -> dict[str, Any]:
    raw_p50 = percentile(raw_s, 50) or 1e-9
    in_loop = summarise_ms(gaps_s)
    whole = summarise_ms(per_iteration_s)
    adapter = summarise_ms(llm_s)
    return {
        "what": "service time outside the LLM call per ReAct iteration, scripted server "
        "answering at once; ratio = overhead / median raw HTTP round trip to that server",
        "iterations": len(llm_s),
        "evaluations": len(per_iteration_s),
        "in_loop_gap": in_loop,
        "per_iteration_incl_storage": whole,
        "llm_call_via_sdk": adapter,
        "raw_http_round_trip": summarise_ms(raw_s),
        "ratio_in_loop_p50_to_raw_p50": round(in_loop["p50_ms"] / 1000 / raw_p50, 3),
        "ratio_in_loop_p99_to_raw_p50": round(in_loop["p99_ms"] / 1000 / raw_p50, 3),
        "ratio_per_iteration_p50_to_raw_p50": round(whole["p50_ms"] / 1000 / raw_p50, 3),
        "ratio_per_iteration_p99_to_raw_p50": round(whole["p99_ms"] / 1000 / raw_p50, 3),
        "ratio_sdk_call_p50_to_raw_p50": round(adapter["p50_ms"] / 1000 / raw_p50, 3),
    }


def _tokens_section(
    results: list[tuple[BenchExample, CriterionResult]], wire: dict[str, Any], labeled: bool
) -> dict[str, Any]:
    n = max(len(results), 1)
    calls = sum(r.usage.llm_calls for _, r in results)
    input_tokens = sum(r.usage.input_tokens for _, r in results)
    cached = sum(r.usage.cached_input_tokens for _, r in results)
    output = sum(r.usage.output_tokens for _, r in results)
    tools = sum(r.usage.tool_calls for _, r in results)
    section: dict[str, Any] = {
        "what": "service-reported usage (scripted server: ~4 chars/token, cached = unchanged "
        "prefix), gpt-4o-mini prices",
        "criteria": len(results),
        "total": {
            "llm_calls": calls,
            "tool_calls": tools,
            "input_tokens": input_tokens,
            "cached_input_tokens": cached,
            "output_tokens": output,
            "cost_usd": round(cost_usd(input_tokens, cached, output), 6),
        },
        "per_criterion": {
            "llm_calls": round(calls / n, 3),
            "tool_calls": round(tools / n, 3),
            "input_tokens": round(input_tokens / n, 1),
            "cached_input_tokens": round(cached / n, 1),
            "output_tokens": round(output / n, 1),
            "cost_usd": round(cost_usd(input_tokens, cached, output) / n, 7),
        },
        "cached_share_of_input": round(cached / input_tokens, 3) if input_tokens else 0.0,
        "wire_accounting_total": wire,
        "reason_codes": _count(
            str(r.reason_code.value) if r.reason_code else "none" for _, r in results
        ),
    }
    section["accuracy"] = _accuracy(results) if labeled else "skipped: no labeled set"
    return section


def _accuracy(results: list[tuple[BenchExample, CriterionResult]]) -> float:
    right = sum(1 for example, result in results if result.status.value == example.gold)
    return round(right / max(len(results), 1), 3)


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts
