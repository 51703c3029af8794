"""The runner: resumable results, errors recorded, summary and report written; run comparison."""

import asyncio
import datetime as dt
import json
from pathlib import Path

import pytest

from reasoning_service.harness.datasets import LabeledExample
from reasoning_service.harness.records import read_records
from reasoning_service.harness.report import compare_runs, render_comparison
from reasoning_service.harness.runner import run_eval
from reasoning_service.models import (
    CaseBundle,
    CaseEvidence,
    CriterionResult,
    CriterionStatus,
    Document,
    Policy,
    PolicyCitation,
    SourceFormat,
)
from retrieval.tree import TreeNode

POLICY = Policy(
    policy_id="P",
    version="1",
    sha256="0" * 64,
    title="P",
    source_format=SourceFormat.MARKDOWN,
    created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    tree=[TreeNode(title="P", node_id="0000", text="AHI ≥ 15 events per hour.")],
)
GOLD = ["met", "not_met", "missing_info", "met", "not_applicable", "met"]


def _examples(n: int = len(GOLD)) -> list[LabeledExample]:
    return [
        LabeledExample(
            example_id=f"ex{i}",
            case=CaseBundle(
                case_id=f"c{i}",
                documents=[
                    Document(doc_id="d", pages=[f"AHI: {10 + i} events/hour <script>x</script>"])
                ],
            ),
            policy_id="P",
            criterion_id="P/C1",
            gold_status=GOLD[i % len(GOLD)],
            gold_policy_quote="AHI ≥ 15 events per hour.",
            gold_case_quotes=[f"AHI: {10 + i} events/hour"],
        )
        for i in range(n)
    ]


class Evaluator:
    """Says `met` for everything; can be told to raise on some calls."""

    def __init__(
        self, fail_on: dict[int, BaseException] | None = None, status: str = "met"
    ) -> None:
        self.calls: list[str] = []
        self.fail_on = fail_on or {}
        self.status = status

    async def __call__(
        self, case: CaseBundle, policy: Policy, criterion_id: str
    ) -> CriterionResult:
        self.calls.append(case.case_id)
        if (exc := self.fail_on.get(len(self.calls))) is not None:
            raise exc
        await asyncio.sleep(0)
        return CriterionResult(
            criterion_id=criterion_id,
            status=self.status,
            confidence=0.8,
            rationale=f"The case shows {case.documents[0].pages[0]}",
            policy_citations=[
                PolicyCitation(policy_id="P", node_id="0000", quote="AHI ≥ 15 events per hour.")
            ],
            case_evidence=[CaseEvidence(doc_id="d", quote=case.documents[0].pages[0][:20])],
            controller="fake",
            prompt_id="p1",
        )


async def _run(out_dir: Path, evaluate: Evaluator, **kwargs) -> object:
    return await run_eval(
        _examples(),
        {"P": POLICY},
        evaluate,
        out_dir=out_dir,
        progress=False,
        concurrency=kwargs.pop("concurrency", 1),
        run_info={"dataset": "inline"},
        **kwargs,
    )


async def test_run_writes_results_summary_and_report(tmp_path: Path) -> None:
    summary = await _run(tmp_path, Evaluator(), concurrency=3)
    records = read_records(tmp_path / "results.jsonl")
    assert sorted(r.example_id for r in records) == [f"ex{i}" for i in range(len(GOLD))]
    assert all(r.gold_status in CriterionStatus for r in records)
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["run_info"]["controller"] == "fake" and saved["run_info"]["prompt_id"] == "p1"
    assert saved["run_info"]["dataset"] == "inline"
    assert saved["counts"] == {
        "selected": 6,
        "evaluated": 6,
        "resumed": 0,
        "errors": 0,
        "invalid": 0,
    }
    assert summary.metrics.status_accuracy == pytest.approx(3 / 6)
    assert summary.metrics.unsafe_met == 2 and summary.metrics.unsafe_met_denominator == 2
    page = (tmp_path / "report.html").read_text()
    assert page.count('<img alt="') == 2 and 'src="data:image/png;base64,' in page
    for heading in ("Summary", "Per status", "Confusion matrix", "Calibration", "Worst examples"):
        assert f"<h2>{heading}</h2>" in page
    assert "UNSAFE MET" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "http://" not in page and "https://" not in page  # nothing to fetch


async def test_resume_after_cancellation_evaluates_only_the_rest(tmp_path: Path) -> None:
    first = Evaluator(fail_on={4: asyncio.CancelledError()})
    with pytest.raises(asyncio.CancelledError):
        await _run(tmp_path, first)
    done = {r.example_id for r in read_records(tmp_path / "results.jsonl")}
    assert done == {"ex0", "ex1", "ex2"}
    assert not (tmp_path / "summary.json").exists()

    second = Evaluator()
    summary = await _run(tmp_path, second)
    assert second.calls == ["c3", "c4", "c5"]
    assert summary.counts.evaluated == 3 and summary.counts.resumed == 3
    assert len(read_records(tmp_path / "results.jsonl")) == 6


def test_resume_after_keyboard_interrupt(tmp_path: Path) -> None:
    first = Evaluator(fail_on={3: KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(_run(tmp_path, first, concurrency=2))
    done = {r.example_id for r in read_records(tmp_path / "results.jsonl")}
    second = Evaluator()
    asyncio.run(_run(tmp_path, second, concurrency=2))
    assert sorted(second.calls) == sorted(f"c{i[2:]}" for i in {f"ex{n}" for n in range(6)} - done)
    assert len(read_records(tmp_path / "results.jsonl")) == 6


async def test_truncated_last_line_is_ignored_and_repaired(tmp_path: Path) -> None:
    await _run(tmp_path, Evaluator(), limit=2)
    results = tmp_path / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])  # crash mid-write
    evaluator = Evaluator()
    await _run(tmp_path, evaluator)
    assert evaluator.calls == ["c1", "c2", "c3", "c4", "c5"]
    assert len(results.read_text().splitlines()) == 6


async def test_evaluate_errors_are_recorded_not_raised(tmp_path: Path) -> None:
    evaluator = Evaluator(fail_on={2: RuntimeError("provider exploded")})
    summary = await _run(tmp_path, evaluator)
    assert summary.counts.errors == 1
    (failed,) = [r for r in read_records(tmp_path / "results.jsonl") if r.error]
    assert failed.error == "RuntimeError: provider exploded"
    assert failed.status == CriterionStatus.UNCERTAIN and failed.confidence == 0.0

    retry = Evaluator()
    await _run(tmp_path, retry, retry_errors=True)
    assert retry.calls == [failed.example_id.replace("ex", "c")]
    assert not any(r.error for r in read_records(tmp_path / "results.jsonl"))


async def test_unknown_policy_is_an_error_record(tmp_path: Path) -> None:
    summary = await run_eval(
        _examples(2), {}, Evaluator(), out_dir=tmp_path, progress=False, run_info={}
    )
    assert summary.counts.errors == 2


async def test_limit_selects_the_first_examples(tmp_path: Path) -> None:
    evaluator = Evaluator()
    summary = await _run(tmp_path, evaluator, limit=2)
    assert evaluator.calls == ["c0", "c1"] and summary.metrics.n == 2


async def test_compare_runs_reports_deltas_and_flips(tmp_path: Path) -> None:
    await _run(tmp_path / "a", Evaluator(status="met"))
    await _run(tmp_path / "b", Evaluator(status="not_met"))
    comparison = compare_runs(tmp_path / "a", tmp_path / "b")
    assert comparison.common == 6
    changes = {f.example_id: f.change for f in comparison.flips}
    assert changes == {
        "ex0": "broken",
        "ex1": "fixed",
        "ex2": "changed",
        "ex3": "broken",
        "ex4": "changed",
        "ex5": "broken",
    }
    accuracy = next(d for d in comparison.deltas if d.name == "status_accuracy")
    assert accuracy.a == pytest.approx(0.5) and accuracy.delta == pytest.approx(-1 / 3)
    text = render_comparison(comparison)
    assert "| Status accuracy (10%) | 0.500 | 0.167 | -0.333 ▼ |" in text
    assert "| ex1 | not_met | met | not_met | fixed |" in text
