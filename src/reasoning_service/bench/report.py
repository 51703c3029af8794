"""`bench-results.md`: short Markdown tables of `bench-results.json`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["render_markdown"]


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def render_markdown(results: dict[str, Any]) -> str:
    machine = results["machine"]
    parts = [
        f"# Benchmarks ({results['config']['profile']})",
        f"{machine['cpu_count']} × {machine['cpu_model']}, {machine['memory_gb']} GB, "
        f"Python {machine['python']}, {machine['date']}; data: {results['data']['data_dir']} "
        f"({results['data']['examples_used']} criteria, labeled: {results['data']['labeled']}); "
        f"{results['elapsed_s']} s.",
    ]
    parts.append("\n".join(f"- {note}" for note in results["notes"]))
    parts += _overhead(results["overhead_per_iteration"])
    parts += _heuristic(results["heuristic_latency"])
    parts += _concurrency(results["concurrency"])
    parts += _tokens(results["tokens_per_criterion"])
    parts += _retrieval(results["retrieval_at_scale"])
    parts += _dspy(results["dspy_react_comparison"])
    parts += _load(results["load"])
    parts += _local_model(results.get("local_model", {"skipped": "not run"}))
    parts += _scale_out(results.get("scale_out", []))
    return "\n\n".join(parts) + "\n"


def _overhead(section: dict[str, Any]) -> list[str]:
    rows = [
        (name, section[key]["n"], section[key]["p50_ms"], section[key]["p99_ms"], ratio50, ratio99)
        for name, key, ratio50, ratio99 in (
            (
                "service, in loop (between LLM calls)",
                "in_loop_gap",
                section["ratio_in_loop_p50_to_raw_p50"],
                section["ratio_in_loop_p99_to_raw_p50"],
            ),
            (
                "service, per iteration incl. storage",
                "per_iteration_incl_storage",
                section["ratio_per_iteration_p50_to_raw_p50"],
                section["ratio_per_iteration_p99_to_raw_p50"],
            ),
            ("LLM call via the OpenAI SDK", "llm_call_via_sdk",
             section["ratio_sdk_call_p50_to_raw_p50"], ""),
            ("raw HTTP round trip (baseline)", "raw_http_round_trip", 1.0, ""),
        )
    ]  # fmt: skip
    return [
        "## 1. Overhead per ReAct iteration",
        _table(["what", "n", "p50 ms", "p99 ms", "p50 / raw p50", "p99 / raw p50"], rows),
    ]


def _heuristic(section: dict[str, Any]) -> list[str]:
    latency = section["latency"]
    return [
        "## 2. Heuristic controller latency per criterion",
        _table(
            ["criteria", "p50 ms", "p95 ms", "p99 ms", "seed baseline", "p50 / baseline"],
            [(
                section["criteria"], latency["p50_ms"], latency["p95_ms"], latency["p99_ms"],
                f"{section['seed_baseline_s']} s", section["ratio_p50_to_seed_baseline"],
            )],
        ),
    ]  # fmt: skip


def _concurrency(section: dict[str, Any]) -> list[str]:
    rows = [
        (
            r["concurrency"], f"{r['ok']}/{r['concurrency']}", r["wall_s"],
            r["throughput_per_s"], r["ideal_throughput_per_s"], r["fraction_of_ideal"],
            r["latency_p50_s"], r["latency_p95_s"], r["service_cpu_ms_per_evaluation"],
            r["service_rss_peak_mb"],
        )
        for r in section["levels"]
    ]  # fmt: skip
    errors = [
        f"{r['concurrency']} in flight: {r['error_kinds']}"
        for r in section["levels"]
        if r["errors"]
    ]
    return [
        f"## 3. Concurrency (LLM delay {section['delay_s']} s, client {section['client']}, "
        f"service idle RSS {section['service_rss_idle_mb']} MB)",
        _table(
            ["in flight", "ok", "wall s", "eval/s", "ideal eval/s", "fraction of ideal",
             "p50 s", "p95 s", "service CPU ms/eval", "service RSS peak MB"],
            rows,
        ),
        "Failed evaluations: " + ("; ".join(errors) if errors else "none") + ".",
    ]  # fmt: skip


def _tokens(section: dict[str, Any]) -> list[str]:
    per = section["per_criterion"]
    total = section["total"]
    return [
        "## 4. Tokens and LLM calls per criterion",
        _table(
            ["", "LLM calls", "tool calls", "input tokens", "cached input", "output tokens",
             "cost USD (gpt-4o-mini)"],  # tool calls here include finish
            [
                ("per criterion", per["llm_calls"], per["tool_calls"], per["input_tokens"],
                 per["cached_input_tokens"], per["output_tokens"], per["cost_usd"]),
                (f"total ({section['criteria']})", total["llm_calls"], total["tool_calls"],
                 total["input_tokens"], total["cached_input_tokens"], total["output_tokens"],
                 total["cost_usd"]),
            ],
        ),
        f"Cached share of input: {section['cached_share_of_input']}; accuracy of the scripted "
        f"agent: {section['accuracy']}.",
    ]  # fmt: skip


def _local_model(section: dict[str, Any]) -> list[str]:
    title = "## 8. Local model on the atom path, per criterion"
    if "skipped" in section:
        return [title, f"Skipped: {section['skipped']}."]
    seconds, tokens = section["seconds_per_criterion"], section["input_tokens_per_criterion"]
    return [
        title,
        _table(
            ["model", "criteria", "s p50", "s p95", "input tokens p50", "input tokens mean",
             "LLM calls", "cached share of input", "status accuracy"],
            [(section["model"], section["criteria"], seconds["p50"], seconds["p95"],
              tokens["p50"], tokens["mean"], section["llm_calls_per_criterion"],
              section["cached_share_of_input"], section["status_accuracy"])],
        ),
        f"Criteria that asked the model, one at a time: {section['criteria']} of "
        f"{section['criteria_planned']} planned within {section['deadline_s']:.0f} s "
        f"({section['criteria_decided_by_code_alone']} more were decided by code alone); the "
        "cached share is read from the server's log. CPU timings depend on what else runs.",
    ]  # fmt: skip


def _scale_out(sections: list[dict[str, Any]]) -> list[str]:
    title = "## 9. Beyond one process: API replicas and workers on PostgreSQL"
    if not sections:
        return [title, "Skipped: not run in this profile."]
    if "skipped" in sections[0]:
        return [title, f"Skipped: {sections[0]['skipped']}."]
    rows = [
        (
            s["delay_s"], s["in_flight"], r["api_processes"], r["workers"], r["mode"],
            f"{r['ok']}/{s['in_flight']}", r["wall_s"], r["throughput_per_s"],
            r["fraction_of_ideal"], r["service_cpu_ms_per_evaluation"], r["machine_cpu_busy"],
        )
        for s in sections
        for r in s["rows"]
    ]  # fmt: skip
    return [
        title,
        sections[0]["what"] + ".",
        _table(
            ["LLM delay s", "in flight", "API processes", "workers", "mode", "ok", "wall s",
             "eval/s", "fraction of ideal", "service CPU ms/eval", "machine CPU busy"],
            rows,
        ),
        "A machine CPU share near 1.0 means the row was bound by this machine's cores, which "
        "the service, PostgreSQL, the scripted LLM and the client share.",
    ]  # fmt: skip


def _retrieval(section: dict[str, Any]) -> list[str]:
    rows = [
        (
            r["policies"], r["nodes"], r["pages"], r["tree_build_ms_per_page"],
            r["index_build_ms_per_page"], r["pi_search_lexical"]["p50_ms"],
            r["pi_search_lexical"]["p99_ms"], r["spans_tighten"]["p50_ms"],
            r["spans_tighten"]["p99_ms"],
        )
        for r in section["sizes"]
    ]  # fmt: skip
    return [
        "## 5. Retrieval at scale",
        _table(
            ["policies", "nodes", "pages", "tree ms/page", "index ms/page", "pi_search p50 ms",
             "pi_search p99 ms", "spans_tighten p50 ms", "spans_tighten p99 ms"],
            rows,
        ),
    ]  # fmt: skip


def _dspy(section: dict[str, Any]) -> list[str]:
    if "skipped" in section:
        return ["## 6. Side by side with dspy.ReAct", f"Skipped: {section['skipped']}"]
    keys = (
        ("LLM calls", "llm_calls_per_criterion"),
        ("tool calls", "tool_calls_per_criterion"),
        ("input tokens", "input_tokens_per_criterion"),
        ("cached input tokens", "cached_input_tokens_per_criterion"),
        ("output tokens", "output_tokens_per_criterion"),
        ("cost USD", "cost_usd_per_criterion"),
        ("accuracy", "accuracy"),
    )
    rows = [(label, section["service"][key], section["dspy_react"][key]) for label, key in keys]
    return [
        f"## 6. Side by side with dspy.ReAct {section['dspy_version']} "
        f"({section['criteria']} criteria, per criterion)",
        _table(["", "this service", "dspy.ReAct"], rows),
        f"Tokens service/dspy: {section['ratio_tokens_service_to_dspy']}; cost: "
        f"{section['ratio_cost_service_to_dspy']}; LLM calls: "
        f"{section['ratio_llm_calls_service_to_dspy']}.",
    ]


def _load(section: dict[str, Any]) -> list[str]:
    health, ready, idle = section["healthz"], section["readyz"], section["healthz_idle"]
    return [
        f"## 7. Load: {section['evaluations']} evaluations at once (conditions controller, "
        f"client {section['client']})",
        _table(
            ["first try accepted / rejected", "served", "wall s", "eval/s", "accepted p50 s",
             "accepted p95 s", "end to end p50 s", "end to end p95 s", "503/429 in all",
             "without Retry-After", "other failures"],
            [(
                f"{section['first_try_accepted']} / {section['first_try_rejected']}",
                section["served"], section["wall_s"], section["throughput_per_s"],
                section["accepted_p50_s"], section["accepted_p95_s"],
                section["served_end_to_end_p50_s"], section["served_end_to_end_p95_s"],
                section["rejected_total"], section["rejected_without_retry_after"],
                section["failed"] or "none",
            )],
        ),
        _table(
            ["probe", "n", "p50 ms", "p99 ms", "max ms"],
            [
                ("/healthz idle", idle["n"], idle["p50_ms"], idle["p99_ms"], idle["max_ms"]),
                ("/healthz under load", health["n"], health["p50_ms"], health["p99_ms"],
                 health["max_ms"]),
                ("/readyz under load", ready["n"], ready["p50_ms"], ready["p99_ms"],
                 ready["max_ms"]),
            ],
        ),
        f"Probe failures: {section['probe_failures']}; goal: /healthz p99 ≤ 1000 ms.",
    ]  # fmt: skip
