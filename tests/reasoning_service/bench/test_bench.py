"""The benchmarks keep working: the smallest configuration end to end (no timing assertions)."""

from __future__ import annotations

import json

from reasoning_service.bench import PROFILES, SECTIONS, run_bench
from reasoning_service.cli import main
from reasoning_service.testing.scripted_agent import PolicyAgent, plan_step
from testdata import EXAMPLES


async def test_smoke_bench_writes_every_section(tmp_path):
    results = await run_bench(
        PROFILES["smoke"], out_dir=tmp_path, data_dir=EXAMPLES, log=lambda *_: None
    )
    written = json.loads((tmp_path / "bench-results.json").read_text())
    assert written == json.loads(json.dumps(results))
    for section in SECTIONS:
        assert section in written, section
    assert written["machine"]["cpu_count"] >= 1
    assert written["overhead_per_iteration"]["iterations"] > 0
    assert all(level["ok"] == level["concurrency"] for level in written["concurrency"]["levels"])
    assert written["tokens_per_criterion"]["total"]["llm_calls"] > 0
    load = written["load"]
    assert load["served"] == load["evaluations"] and not load["failed"]
    assert load["rejected_without_retry_after"] == 0 and load["probe_failures"] == 0
    # examples/ has no labeled set: the dev-set parts say so instead of failing.
    assert written["data"]["labeled"] is False
    assert "skipped" in str(written["tokens_per_criterion"]["accuracy"])
    assert written["local_model"] == {"skipped": "not in this profile"}
    assert "## 8. Local model" in (tmp_path / "bench-results.md").read_text()
    markdown = (tmp_path / "bench-results.md").read_text()
    assert "## 1. Overhead per ReAct iteration" in markdown
    assert "## 6. Side by side with dspy.ReAct" in markdown
    assert "## 7. Load" in markdown


def test_the_agent_searches_then_reads_the_case_then_finishes():
    criterion = "The beneficiary is an adult (18 years or older)."
    assert plan_step(criterion, []).tool == "pi_search"
    search = '{"nodes": [{"node_id": "0003", "title": "B", "text": "CPAP is covered. More."}]}'
    assert plan_step(criterion, [("pi_search", search)]).tool == "facts_get"
    facts = '{"document_lines": [{"doc_id": "n-1", "page": 2, "line": "Patient: 54-year-old"}]}'
    done = plan_step(criterion, [("pi_search", search), ("facts_get", facts)])
    assert done.tool == "finish" and done.arguments["status"] == "met"
    assert done.arguments["policy_citations"] == [{"node_id": "0003", "quote": "CPAP is covered."}]
    assert done.arguments["case_evidence"][0]["quote"] == "Patient: 54-year-old"


def test_the_agent_answers_dspy_text_format():
    system = "Your output fields are: [[ ## next_thought ## ]] [[ ## next_tool_name ## ]]"
    user = "[[ ## criterion ## ]]\nAHI at least 15\n\n[[ ## trajectory ## ]]\n\n"
    reply = PolicyAgent()(
        {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
    )
    assert "[[ ## next_tool_name ## ]]\npi_search" in reply.content


def test_cli_has_a_bench_command(capsys):
    try:
        main(["bench", "--help"])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert "--quick" in capsys.readouterr().out


def test_the_local_model_item_counts_only_criteria_that_asked_the_model():
    from reasoning_service.bench.local_model import _summary

    def row(calls: int, seconds: float) -> dict:
        return {
            "example_id": f"e{seconds}",
            "seconds": seconds,
            "llm_calls": calls,
            "input_tokens": 400 * calls,
            "cached_input_tokens": 300 * calls,
            "correct": True,
        }

    summary = _summary("m", [row(0, 0.01), row(1, 4.0), row(3, 8.0)], 2, 60)
    assert summary["criteria"] == 2 and summary["criteria_decided_by_code_alone"] == 1
    assert summary["seconds_per_criterion"]["p50"] == 6.0
    assert summary["llm_calls_per_criterion"] == 2
    assert summary["cached_share_of_input"] == 0.75
    assert "skipped" in _summary("m", [row(0, 0.01)], 2, 60)
