"""Benchmarks of the service (`reasoning-service bench`; README: eval/bench/README.md).

1. overhead per ReAct iteration against a scripted LLM that answers at once (`service_pass`)
2. heuristic controller latency per criterion (`heuristic_latency`)
3. many evaluations in flight through the HTTP API (`concurrency`)
4. tokens and LLM calls per criterion, with gpt-4o-mini cost (`service_pass`)
5. retrieval at 1, 100, 1000 policies (`retrieval_scale`)
6. side by side with dspy.ReAct (`dspy_compare`)
7. more evaluations at once than the service admits, with a liveness prober (`load`)

The scripted model is `agent.PolicyAgent`. Results: `bench-results.json` and `bench-results.md`.
"""

from reasoning_service.bench.runner import PROFILES, SECTIONS, BenchConfig, run_bench

__all__ = ["PROFILES", "SECTIONS", "BenchConfig", "run_bench"]
