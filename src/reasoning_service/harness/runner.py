"""Run a controller over labeled examples, resumably, and write results, summary and report.

`run_eval` does, in order:

1. read `out_dir/results.jsonl` if it exists (dropping a truncated last line) and skip every
   example already recorded there: an interrupted run resumes where it stopped;
2. evaluate the rest, at most `concurrency` at a time, appending one `EvalRecord` line per
   example as soon as it finishes (flushed), so a crash loses only the examples in flight;
   an exception from `evaluate` (or an unknown policy or criterion) is recorded as an `uncertain`
   result with `error` set and never stops the run; KeyboardInterrupt and cancellation do stop
   it, after which the run can be resumed; dataset lines that were not usable examples
   (`invalid`, from `read_labeled_examples`) are recorded as error rows too, counted in the
   summary and left out of the metrics (they have no trustworthy gold);
3. score every selected example's record and write `summary.json` and `report.html`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from reasoning_service.harness.datasets import InvalidExample, LabeledExample
from reasoning_service.harness.metrics import compute_metrics
from reasoning_service.harness.records import (
    REPORT_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    EvalRecord,
    EvalSummary,
    RunCounts,
    read_records,
)
from reasoning_service.harness.report import write_report
from reasoning_service.models import CaseBundle, CriterionResult, CriterionStatus, Policy

__all__ = ["EvaluateFn", "run_eval"]

EvaluateFn = Callable[[CaseBundle, Policy, str], Awaitable[CriterionResult]]
"""Evaluate one criterion (by id) of a policy against a case."""


async def run_eval(
    examples: Sequence[LabeledExample],
    policies: dict[str, Policy],
    evaluate: EvaluateFn,
    *,
    out_dir: Path,
    concurrency: int = 4,
    limit: int | None = None,
    progress: bool = True,
    run_info: dict[str, Any],
    retry_errors: bool = False,
    invalid: Sequence[InvalidExample] = (),
) -> EvalSummary:
    """Evaluate `examples` (the first `limit`) and write results, summary.json and report.html.

    `run_info` (controller, prompt_id, model, dataset …) is copied into summary.json. With
    `retry_errors`, examples whose earlier record carries an error are evaluated again.

    Raises:
        ValueError: `concurrency` below 1 or duplicate example ids.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    selected = list(examples[:limit] if limit is not None else examples)
    _check_unique(selected)
    out_dir.mkdir(parents=True, exist_ok=True)
    results_path = out_dir / RESULTS_FILE
    done = {
        r.example_id: r
        for r in read_records(results_path, repair=True)
        if not (retry_errors and r.error is not None)
    }
    pending = [e for e in selected if e.example_id not in done]
    controller = str(run_info.get("controller", "unknown"))
    with results_path.open("a", encoding="utf-8") as sink:
        for bad in invalid:
            if bad.example_id not in done:
                _append(sink, _invalid_record(bad, controller))
        fresh = await _evaluate_all(
            pending, policies, evaluate, sink, concurrency, progress, run_info
        )
    done.update((r.example_id, r) for r in fresh)
    return _finish(selected, done, out_dir, run_info, evaluated=len(fresh), invalid=len(invalid))


def _check_unique(examples: Sequence[LabeledExample]) -> None:
    seen: set[str] = set()
    for example in examples:
        if example.example_id in seen:
            raise ValueError(f"example_id {example.example_id!r} appears twice")
        seen.add(example.example_id)


async def _evaluate_all(
    pending: list[LabeledExample],
    policies: dict[str, Policy],
    evaluate: EvaluateFn,
    sink: TextIO,
    concurrency: int,
    progress: bool,
    run_info: dict[str, Any],
) -> list[EvalRecord]:
    """Evaluate with bounded concurrency; cancel what is in flight if one is interrupted."""
    semaphore = asyncio.Semaphore(concurrency)
    controller = str(run_info.get("controller", "unknown"))
    records: list[EvalRecord] = []

    async def one(example: LabeledExample) -> None:
        async with semaphore:
            record = await _evaluate_one(example, policies, evaluate, controller)
        _append(sink, record)
        records.append(record)
        bar.advance(task_id)

    with _progress_bar(progress) as bar:
        task_id = bar.add_task("evaluating", total=len(pending))
        tasks = [asyncio.create_task(one(e)) for e in pending]
        try:
            for next_done in asyncio.as_completed(tasks):
                await next_done
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return records


def _progress_bar(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        disable=not enabled,
        transient=False,
    )


async def _evaluate_one(
    example: LabeledExample, policies: dict[str, Policy], evaluate: EvaluateFn, controller: str
) -> EvalRecord:
    """Evaluate one example; an ordinary exception becomes an error record, not a crash."""
    started = time.perf_counter()
    try:
        policy = policies.get(example.policy_id)
        if policy is None:
            raise LookupError(f"no policy {example.policy_id!r} was given to the run")
        result = await evaluate(example.case, policy, example.criterion_id)
        error = None
    except Exception as exc:  # recorded in the results: one bad example must not stop a run
        result = _error_result(example, exc, controller)
        error = f"{type(exc).__name__}: {exc}"
    latency_ms = (time.perf_counter() - started) * 1000
    return EvalRecord.model_validate(
        {
            **result.model_dump(),
            "example_id": example.example_id,
            "gold_status": example.gold_status,
            "latency_ms": latency_ms,
            "error": error,
        }
    )


def _error_result(example: LabeledExample, exc: Exception, controller: str) -> CriterionResult:
    """An abstention standing in for a failed evaluation, so errors cost accuracy."""
    return CriterionResult(
        criterion_id=example.criterion_id,
        status=CriterionStatus.UNCERTAIN,
        confidence=0.0,
        rationale=f"Evaluation failed: {type(exc).__name__}.",
        controller=controller,
    )


def _invalid_record(bad: InvalidExample, controller: str) -> EvalRecord:
    """The error row of a dataset line that was not a usable example."""
    return EvalRecord(
        criterion_id=bad.criterion_id,
        status=CriterionStatus.UNCERTAIN,
        confidence=0.0,
        rationale="Not evaluated: the dataset line is not a valid example.",
        controller=controller,
        example_id=bad.example_id,
        gold_status=bad.gold_status,
        error=f"InvalidExample: {bad.error}",
        invalid=True,
    )


def _append(sink: TextIO, record: EvalRecord) -> None:
    sink.write(record.model_dump_json() + "\n")
    sink.flush()


def _finish(
    selected: list[LabeledExample],
    done: dict[str, EvalRecord],
    out_dir: Path,
    run_info: dict[str, Any],
    *,
    evaluated: int,
    invalid: int = 0,
) -> EvalSummary:
    pairs = [(e, done[e.example_id]) for e in selected if e.example_id in done]
    records = [r for _, r in pairs]
    summary = EvalSummary(
        run_info={
            **_observed_info(records),
            **run_info,
            "finished_at": dt.datetime.now(dt.UTC).isoformat(),
        },
        counts=RunCounts(
            selected=len(selected),
            evaluated=evaluated,
            resumed=len(pairs) - evaluated,
            errors=sum(r.error is not None for r in records),
            invalid=invalid,
        ),
        metrics=compute_metrics(pairs),
    )
    (out_dir / SUMMARY_FILE).write_text(summary.model_dump_json(indent=2), encoding="utf-8")
    write_report(out_dir / REPORT_FILE, summary, pairs)
    return summary


def _observed_info(records: list[EvalRecord]) -> dict[str, Any]:
    """Controller, prompt and model as the results report them; `run_info` may override."""

    def values(name: str) -> str | None:
        seen = sorted({str(v) for r in records if (v := getattr(r, name)) is not None})
        return ",".join(seen) or None

    return {
        "controller": values("controller"),
        "prompt_id": values("prompt_id"),
        "model": values("model"),
        "provider": values("provider"),
    }
