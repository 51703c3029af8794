"""Item 2: the heuristic controller's latency per criterion (the seed's baseline: about 0.5 s)."""

from __future__ import annotations

import time
from typing import Any

from reasoning_service.bench.data import BenchData, BenchExample
from reasoning_service.bench.stats import summarise_ms
from reasoning_service.conditions.heuristic import HeuristicController
from retrieval.service import RetrievalService

__all__ = ["SEED_BASELINE_S", "run_heuristic_latency"]

SEED_BASELINE_S = 0.5
"""The seed implementation's heuristic latency per criterion."""


async def run_heuristic_latency(data: BenchData, examples: list[BenchExample]) -> dict[str, Any]:
    """Time `HeuristicController.evaluate` on each example, one at a time, index warm."""
    retrieval = RetrievalService()
    try:
        for policy in data.policies.values():
            await retrieval.index_policy(policy.policy_id, policy.tree)
        controller = HeuristicController(retrieval)
        await controller.evaluate(examples[0].task(data.policies))  # warm-up
        durations, right = [], 0
        for example in examples:
            started = time.perf_counter()
            result = await controller.evaluate(example.task(data.policies))
            durations.append(time.perf_counter() - started)
            right += int(result.status.value == example.gold)
    finally:
        await retrieval.aclose()
    summary = summarise_ms(durations)
    return {
        "what": "HeuristicController.evaluate per criterion, sequential, retrieval index warm",
        "criteria": len(examples),
        "latency": summary,
        "seed_baseline_s": SEED_BASELINE_S,
        "ratio_p50_to_seed_baseline": round(summary["p50_ms"] / 1000 / SEED_BASELINE_S, 4),
        "accuracy": round(right / len(examples), 3) if data.labeled else "skipped: no labels",
    }
