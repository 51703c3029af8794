"""Item 2: the deterministic (conditions) controller's latency per criterion (seed: about 0.5 s)."""

from __future__ import annotations

import time
from typing import Any

from reasoning_service.bench.data import BenchData, BenchExample
from reasoning_service.bench.stats import summarise_ms
from reasoning_service.service.container import conditions_controller
from reasoning_service.settings import Settings

__all__ = ["SEED_BASELINE_S", "run_heuristic_latency"]

SEED_BASELINE_S = 0.5
"""The seed implementation's heuristic latency per criterion."""


async def run_heuristic_latency(data: BenchData, examples: list[BenchExample]) -> dict[str, Any]:
    """Time `ConditionsController.evaluate` on each example, one at a time, NLP pipeline warm.

    Each example is a fresh case object, so the case is read (sentences, ConText) every time:
    the figure includes reading the case, the worst case for one criterion.
    """
    controller = conditions_controller(Settings())
    await controller.evaluate(examples[0].task(data.policies))  # warm-up: spaCy, ConText
    durations, right = [], 0
    for example in examples:
        task = example.task(data.policies)
        task = type(task)(
            case=task.case.model_copy(deep=True), policy=task.policy, criterion=task.criterion
        )
        started = time.perf_counter()
        result = await controller.evaluate(task)
        durations.append(time.perf_counter() - started)
        right += int(result.status.value == example.gold)
    summary = summarise_ms(durations)
    return {
        "what": "ConditionsController.evaluate per criterion, case read anew each time",
        "criteria": len(examples),
        "latency": summary,
        "seed_baseline_s": SEED_BASELINE_S,
        "ratio_p50_to_seed_baseline": round(summary["p50_ms"] / 1000 / SEED_BASELINE_S, 4),
        "accuracy": round(right / len(examples), 3) if data.labeled else "skipped: no labels",
    }
