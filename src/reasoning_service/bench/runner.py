"""`reasoning-service bench`: run every benchmark, write `bench-results.json` and `.md`.

Profiles (`BenchConfig`): `full` (the documented run), `quick` (under 5 minutes on 2 cores) and
`smoke` (the test's smallest configuration). Nothing here asserts a time: every number is
reported next to a baseline measured in the same run.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from reasoning_service.bench.concurrency import run_concurrency
from reasoning_service.bench.data import BenchData, load_bench_data
from reasoning_service.bench.dspy_compare import run_dspy_compare, service_side_row
from reasoning_service.bench.heuristic_latency import run_heuristic_latency
from reasoning_service.bench.load import run_load
from reasoning_service.bench.local_model import run_local_model
from reasoning_service.bench.report import render_markdown
from reasoning_service.bench.retrieval_scale import run_retrieval_scale
from reasoning_service.bench.scale_out import run_scale_out
from reasoning_service.bench.service_pass import run_service_pass
from reasoning_service.bench.stats import machine_info
from reasoning_service.prompts import load_prompt
from reasoning_service.settings import Settings

__all__ = ["PROFILES", "BenchConfig", "run_bench"]

RESULTS_JSON = "bench-results.json"
RESULTS_MD = "bench-results.md"
SECTIONS = (
    "overhead_per_iteration",
    "heuristic_latency",
    "concurrency",
    "tokens_per_criterion",
    "retrieval_at_scale",
    "dspy_react_comparison",
    "load",
    "local_model",
    "scale_out",
)


@dataclass(frozen=True)
class BenchConfig:
    profile: str
    examples: int | None
    """Dev examples for the LLM items (1, 4, 6) and the heuristic; None means all."""
    concurrency_levels: tuple[int, ...]
    llm_delay_s: float
    retrieval_sizes: tuple[int, ...]
    retrieval_queries: int
    load_evaluations: int
    """Callers that ask for an evaluation at the same moment in item 7."""
    local_criteria: int = 0
    """Criteria the packaged local model decides in item 8 (skipped when 0 or not installed)."""
    local_deadline_s: float = 0.0
    """Item 8 starts no criterion after this much wall time."""
    scale_out_in_flight: int = 0
    """Evaluations at once in item 9 (replicas and workers; skipped when 0)."""
    scale_out_delays_s: tuple[float, ...] = ()
    """The scripted LLM's delays item 9 runs at, one cluster run each."""


PROFILES = {
    "full": BenchConfig(
        "full", None, (1, 10, 100, 500), 1.0, (1, 100, 1000), 300, 200, 10, 900, 500, (1.0, 3.0)
    ),
    "quick": BenchConfig("quick", 30, (1, 10, 100), 0.5, (1, 100), 100, 200, 3, 180, 500, (1.0,)),
    "smoke": BenchConfig("smoke", 3, (1,), 0.05, (1,), 5, 12),
}


async def run_bench(
    config: BenchConfig, *, out_dir: Path, data_dir: Path | None = None, log: Any = print
) -> dict[str, Any]:
    """Run the benchmarks in order and write the JSON and Markdown results; item 8 runs only
    with the local model installed."""
    started = time.perf_counter()
    data = load_bench_data(data_dir)
    examples = data.examples[: config.examples] if config.examples else data.examples
    results: dict[str, Any] = {
        "machine": machine_info(),
        "config": asdict(config),
        "data": {**data.describe(), "examples_used": len(examples)},
        "notes": _notes(data),
    }
    log(f"[1/7 + 4] service pass over {len(examples)} criteria (scripted LLM, no delay)")
    service = await run_service_pass(data, examples)
    results["overhead_per_iteration"] = service.overhead
    results["tokens_per_criterion"] = service.tokens
    log("[2/7] heuristic controller latency")
    results["heuristic_latency"] = await run_heuristic_latency(data, examples)
    log(f"[3/7] concurrency {list(config.concurrency_levels)} at {config.llm_delay_s} s")
    results["concurrency"] = await run_concurrency(
        data, levels=list(config.concurrency_levels), delay_s=config.llm_delay_s
    )
    log(f"[5/7] retrieval at scale {list(config.retrieval_sizes)}")
    results["retrieval_at_scale"] = await run_retrieval_scale(
        data, sizes=list(config.retrieval_sizes), queries=config.retrieval_queries
    )
    log("[6/7] dspy.ReAct side by side")
    criterion_results = [r for _, r in service.results]
    service_row = service_side_row(service.tokens, examples, criterion_results, data.labeled)
    settings = Settings()
    prompt = load_prompt(settings.prompts_dir, settings.prompt_id)
    results["dspy_react_comparison"] = await run_dspy_compare(data, examples, prompt, service_row)
    log(f"[7/7] load: {config.load_evaluations} evaluations at once, /healthz probed")
    results["load"] = await run_load(
        evaluations=config.load_evaluations, examples_dir=settings.examples_dir
    )
    log(f"[8] local model: {config.local_criteria} criteria, {config.local_deadline_s:.0f} s")
    results["local_model"] = await run_local_model(
        data, examples, criteria=config.local_criteria, deadline_s=config.local_deadline_s
    )
    log(f"[9] beyond one process: {config.scale_out_in_flight} in flight")
    results["scale_out"] = [
        await run_scale_out(data, in_flight=config.scale_out_in_flight, delay_s=delay)
        for delay in config.scale_out_delays_s
        if config.scale_out_in_flight
    ]
    results["elapsed_s"] = round(time.perf_counter() - started, 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RESULTS_JSON).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (out_dir / RESULTS_MD).write_text(render_markdown(results), encoding="utf-8")
    log(f"wrote {out_dir / RESULTS_JSON} and {out_dir / RESULTS_MD} in {results['elapsed_s']} s")
    return results


def _notes(data: BenchData) -> list[str]:
    notes = [
        "The scripted LLM is deterministic and policy-aware (bench/agent.py); its accuracy "
        "measures the trivial status rule, not a model.",
        "pi_search uses the lexical (FTS5) search in items 1, 3, 4 and 6, so the only LLM "
        "calls are the agent's own.",
    ]
    if not data.labeled:
        notes.append(
            f"No labeled set under {data.data_dir} (eval/dev.jsonl): the example case(s) are "
            "evaluated unlabeled and every accuracy is skipped."
        )
    return notes
