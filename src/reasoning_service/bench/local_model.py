"""Item 8: the packaged local model on the atom path, per criterion (skipped when not installed).

Starts llama.cpp on 127.0.0.1 with the configured `REASONING_LOCAL_MODEL` and runs the atom
question controller exactly as the `local` provider does (constrained JSON, the negated-question
check, `atoms-local-v1`) over labeled criteria that have conditions, one at a time, until
`criteria` of them have asked the model or a wall-time deadline passes. Criteria that code
decided alone (no LLM call) are counted but left out of the per-criterion numbers. Reports seconds,
input tokens and LLM calls per criterion, and the share of input tokens the server served from
its prompt cache (read from its log: llama-cpp-python's server does not report cached tokens in
`usage`).
"""

from __future__ import annotations

import time
from itertools import chain, zip_longest
from typing import Any

from reasoning_service.bench.data import BenchData, BenchExample
from reasoning_service.bench.stats import percentile
from reasoning_service.conditions.atom_questions import AtomQuestionController
from reasoning_service.llm.factory import build_llm_client
from reasoning_service.llm.local_server import (
    LocalLlamaServer,
    PromptCacheLog,
    find_model,
    is_runtime_installed,
)
from reasoning_service.prompts import load_prompt
from reasoning_service.service.container import conditions_controller
from reasoning_service.settings import Settings

__all__ = ["pick_criteria", "run_local_model"]


def pick_criteria(data: BenchData, examples: list[BenchExample], count: int) -> list[BenchExample]:
    """`count` examples whose criterion has conditions, taken from each policy in turn."""
    by_policy: dict[str, list[BenchExample]] = {}
    for example in examples:
        policy = data.policies[example.policy_id]
        criterion = policy.criteria.criterion(example.criterion_id) if policy.criteria else None
        if criterion is not None and criterion.conditions is not None:
            by_policy.setdefault(example.policy_id, []).append(example)
    interleaved = chain.from_iterable(zip_longest(*by_policy.values()))
    return [example for example in interleaved if example is not None][:count]


async def run_local_model(
    data: BenchData, examples: list[BenchExample], *, criteria: int, deadline_s: float
) -> dict[str, Any]:
    settings = Settings()
    if criteria <= 0:
        return {"skipped": "not in this profile"}
    model = find_model(settings.models_dir, settings.local_model)
    if not is_runtime_installed() or model is None:
        return {"skipped": f"llama.cpp runtime or {settings.local_model} not installed"}
    chosen = pick_criteria(data, examples, len(examples))
    async with LocalLlamaServer(
        model, n_threads=settings.local_threads, model_alias=settings.local_model
    ) as server:
        local = settings.model_copy(
            update={
                "llm_provider": "local",
                "llm_base_url": server.base_url,
                "llm_model": settings.local_model,
                "llm_timeout_s": 300.0,
                "tool_calling_mode": "native",
            }
        )
        llm = build_llm_client(local)
        assert llm is not None
        controller = AtomQuestionController(
            llm=llm,
            prompt=load_prompt(local.prompts_dir, local.effective_atom_prompt_id),
            conditions=conditions_controller(local),
            fallback=None,
            abstain_below=local.abstain_below,
            max_output_tokens=200,
            answer_format="json_schema",
            check_yes=True,
        )
        cache_log = PromptCacheLog(server.log_path) if server.log_path else None
        rows = []
        started = time.perf_counter()
        try:
            for example in chosen:
                asked = sum(1 for row in rows if row["llm_calls"])
                if asked >= criteria or time.perf_counter() - started > deadline_s:
                    break
                result = await controller.evaluate(example.task(data.policies))
                reused = cache_log.reused() if cache_log else []
                rows.append(
                    {
                        "example_id": example.example_id,
                        "seconds": result.usage.latency_ms / 1000,
                        "llm_calls": result.usage.llm_calls,
                        "input_tokens": result.usage.input_tokens,
                        "cached_input_tokens": sum(max(count, 0) for count in reused)
                        if len(reused) == result.usage.llm_calls
                        else None,
                        "correct": example.gold is not None and result.status.value == example.gold,
                    }
                )
        finally:
            await llm.aclose()
    return _summary(settings.local_model, rows, criteria, deadline_s)


def _summary(
    model: str, all_rows: list[dict[str, Any]], planned: int, deadline_s: float
) -> dict[str, Any]:
    rows = [row for row in all_rows if row["llm_calls"]]
    if not rows:
        return {"skipped": "no criterion asked the model before the deadline", "model": model}
    seconds = sorted(row["seconds"] for row in rows)
    tokens = sorted(row["input_tokens"] for row in rows)
    known = [row for row in rows if row["cached_input_tokens"] is not None]
    known_input = sum(row["input_tokens"] for row in known)
    return {
        "model": model,
        "criteria": len(rows),
        "criteria_planned": planned,
        "criteria_decided_by_code_alone": len(all_rows) - len(rows),
        "deadline_s": deadline_s,
        "seconds_per_criterion": {
            "p50": round(percentile(seconds, 50), 2),
            "p95": round(percentile(seconds, 95), 2),
        },
        "input_tokens_per_criterion": {
            "p50": percentile(tokens, 50),
            "mean": round(sum(tokens) / len(tokens), 1),
        },
        "llm_calls_per_criterion": round(sum(row["llm_calls"] for row in rows) / len(rows), 2),
        "cached_share_of_input": round(
            sum(row["cached_input_tokens"] for row in known) / known_input, 3
        )
        if known_input
        else None,
        "status_accuracy": round(sum(row["correct"] for row in rows) / len(rows), 3),
        "rows": all_rows,
    }
