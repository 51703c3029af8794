"""The files a run leaves behind: `results.jsonl` records and `summary.json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reasoning_service.harness.metrics import EvalMetrics
from reasoning_service.models import CriterionResult, CriterionStatus

__all__ = [
    "REPORT_FILE",
    "RESULTS_FILE",
    "SUMMARY_FILE",
    "EvalRecord",
    "EvalSummary",
    "RunCounts",
    "load_summary",
    "read_records",
]

RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"


class EvalRecord(CriterionResult):
    """One line of `results.jsonl`: the result plus what the harness knows about the example."""

    example_id: str
    gold_status: CriterionStatus | None
    """None only on an `invalid` row whose line did not say."""
    latency_ms: float = 0.0
    """Wall-clock time of the `evaluate` call as the harness saw it."""
    error: str | None = None
    """`<ExceptionType>: <message>` when evaluation failed; the result is then a placeholder."""
    invalid: bool = False
    """The dataset line was not a usable example (`error` says why); it is out of the metrics."""


class RunCounts(BaseModel):
    """How the selected examples of a run were covered."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    selected: int
    """Examples in this run after `limit`."""
    evaluated: int
    """Evaluated by this call."""
    resumed: int
    """Already in results.jsonl from an earlier call."""
    errors: int
    """Selected examples whose record carries an error."""
    invalid: int = 0
    """Dataset lines that were not usable examples (bad JSON, invalid case or field, repeated
    id): recorded as error rows in results.jsonl, left out of the metrics."""


class EvalSummary(BaseModel):
    """What `summary.json` holds."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    run_info: dict[str, Any] = Field(default_factory=dict)
    counts: RunCounts
    metrics: EvalMetrics


def read_records(path: Path, *, repair: bool = False) -> list[EvalRecord]:
    """Records of a results.jsonl; a truncated last line (an interrupted write) is ignored.

    With `repair`, that partial line is also cut from the file so appends start on a new line.
    The last record of an example id wins.

    Raises:
        ValueError: a line other than the last one is not a valid record.
    """
    if not path.exists():
        return []
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    records: list[EvalRecord] = []
    good_bytes = 0
    for number, line in enumerate(lines, start=1):
        is_last = number == len(lines)
        if line.strip():
            try:
                records.append(EvalRecord.model_validate_json(line))
            except ValidationError as exc:
                if not is_last:
                    raise ValueError(f"{path}:{number}: not a result record: {exc}") from exc
                break
        good_bytes += len(line) + (0 if is_last else 1)
    if repair and good_bytes < len(raw):
        with path.open("r+b") as handle:
            handle.truncate(good_bytes)
    return list({r.example_id: r for r in records}.values())


def load_summary(run_dir: Path) -> EvalSummary:
    """The summary.json of a finished run."""
    return EvalSummary.model_validate(json.loads((run_dir / SUMMARY_FILE).read_text("utf-8")))
