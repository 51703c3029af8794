"""A run as a self-contained HTML page, and two runs compared (`eval compare RUN_A RUN_B`).

The page opens offline: CSS is inline and plots are inline base64 PNGs drawn by matplotlib's
Agg canvas (no pyplot global state, so it is safe in a server or a thread). Every string that
can come from a case, a policy or a model is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from reasoning_service.harness.datasets import LabeledExample
from reasoning_service.harness.metrics import (
    UNSAFE_GOLD,
    EvalMetrics,
    example_score,
    feedback_for,
)
from reasoning_service.harness.records import (
    RESULTS_FILE,
    EvalRecord,
    EvalSummary,
    load_summary,
    read_records,
)
from reasoning_service.models import CriterionResult, CriterionStatus

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "SCALAR_METRICS",
    "Comparison",
    "MetricDelta",
    "StatusFlip",
    "compare_runs",
    "render_comparison",
    "render_report",
    "write_report",
]

SCALAR_METRICS: tuple[tuple[str, str, bool], ...] = (
    ("composite", "Composite score", True),
    ("citation_accuracy", "Citation accuracy (40%)", True),
    ("reasoning_coherence", "Reasoning coherence (30%)", True),
    ("calibration", "Calibration, 1 − ECE (20%)", True),
    ("status_accuracy", "Status accuracy (10%)", True),
    ("policy_citation_accuracy", "Policy citation accuracy", True),
    ("case_citation_f1", "Case citation F1", True),
    ("ece", "Expected calibration error", False),
    ("macro_f1", "Macro-F1", True),
    ("unsafe_met_rate", "Unsafe-met rate", False),
    ("abstention_rate", "Abstention rate (uncertain)", False),
    ("cost.mean_total_tokens", "Mean tokens / example", False),
    ("cost.mean_llm_calls", "Mean LLM calls / example", False),
    ("cost.mean_tool_calls", "Mean tool calls / example", False),
    ("cost.mean_latency_ms", "Mean latency ms / example", False),
)
"""(attribute path in EvalMetrics, label, higher is better)."""

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.unsafe{color:#b00020;font-weight:bold}
.example{border:1px solid #bbb;border-radius:6px;padding:.6em 1em;margin:1em 0}
.side{display:grid;grid-template-columns:1fr 1fr;gap:1em}
pre{white-space:pre-wrap;word-break:break-word;background:#fafafa;padding:.4em;margin:.2em 0}
img{max-width:560px;margin-right:1em}
"""

MAX_WORST = 25


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _metric(metrics: EvalMetrics, path: str) -> float:
    value: object = metrics
    for part in path.split("."):
        value = getattr(value, part)
    return float(value)  # type: ignore[arg-type]


# --- plots ----------------------------------------------------------------------------------


def _png(draw: Callable[[Figure], None]) -> str:
    """Render a figure-drawing function to a data: URI."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError("report plots need matplotlib: install reasoning-service[eval]") from exc

    figure = Figure(figsize=(5.5, 4.5), dpi=100)
    FigureCanvasAgg(figure)
    draw(figure)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _confusion_png(metrics: EvalMetrics) -> str:
    labels = [s.value for s in CriterionStatus]
    counts = [[metrics.confusion.get(g, {}).get(p, 0) for p in labels] for g in labels]

    def draw(figure: Figure) -> None:
        axes = figure.add_subplot()
        axes.imshow(counts, cmap="Blues")
        axes.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
        axes.set_yticks(range(len(labels)), labels)
        axes.set_xlabel("predicted")
        axes.set_ylabel("gold")
        axes.set_title("Confusion matrix")
        peak = max((c for row in counts for c in row), default=0)
        for i, row in enumerate(counts):
            for j, count in enumerate(row):
                colour = "white" if peak and count > peak / 2 else "black"
                axes.text(j, i, str(count), ha="center", va="center", color=colour)

    return _png(draw)


def _reliability_png(metrics: EvalMetrics) -> str:
    bins = metrics.reliability

    def draw(figure: Figure) -> None:
        axes = figure.add_subplot()
        axes.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
        used = [b for b in bins if b.count]
        axes.bar(
            [b.lower for b in used],
            [b.accuracy for b in used],
            width=0.1,
            align="edge",
            edgecolor="black",
            alpha=0.7,
            label="accuracy",
        )
        axes.plot(
            [b.mean_confidence for b in used],
            [b.accuracy for b in used],
            "o",
            color="darkred",
            label="mean confidence",
        )
        axes.set_xlim(0, 1)
        axes.set_ylim(0, 1)
        axes.set_xlabel("confidence")
        axes.set_ylabel("accuracy")
        axes.set_title(f"Reliability (ECE {metrics.ece:.3f})")
        axes.legend(loc="best", framealpha=0.9)

    return _png(draw)


# --- HTML sections --------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f'<td class="num">{value:.3f}</td>'
    if isinstance(value, int):
        return f'<td class="num">{value}</td>'
    return f"<td>{_e(value)}</td>"


def _summary_section(summary: EvalSummary) -> str:
    m = summary.metrics
    rows: list[list[object]] = [[label, _metric(m, path)] for path, label, _ in SCALAR_METRICS]
    rows.insert(
        10,
        [
            "Unsafe met / at risk (gold not_met or missing_info)",
            f"{m.unsafe_met} / {m.unsafe_met_denominator}",
        ],
    )
    counts = summary.counts
    info = [[k, "" if v is None else v] for k, v in summary.run_info.items()]
    return (
        "<h2>Summary</h2>"
        + _table(["metric", "value"], rows)
        + "<h2>Run</h2>"
        + _table(["field", "value"], info)
        + _table(
            ["selected", "evaluated now", "resumed", "errors"],
            [[counts.selected, counts.evaluated, counts.resumed, counts.errors]],
        )
    )


def _status_section(metrics: EvalMetrics) -> str:
    rows = [
        [s.status.value, s.precision, s.recall, s.f1, s.support, s.predicted]
        for s in metrics.per_status
    ]
    labels = [s.value for s in CriterionStatus]
    matrix = [[g, *(metrics.confusion.get(g, {}).get(p, 0) for p in labels)] for g in labels]
    return (
        "<h2>Per status</h2>"
        + _table(["status", "precision", "recall", "F1", "gold support", "predicted"], rows)
        + "<h2>Confusion matrix</h2>"
        + f'<img alt="confusion matrix" src="{_confusion_png(metrics)}">'
        + _table(["gold \\ predicted", *labels], matrix)
    )


def _calibration_section(metrics: EvalMetrics) -> str:
    rows = [
        [f"{b.lower:.1f}–{b.upper:.1f}", b.count, b.mean_confidence, b.accuracy]
        for b in metrics.reliability
    ]
    return (
        "<h2>Calibration</h2>"
        + f'<img alt="reliability diagram" src="{_reliability_png(metrics)}">'
        + _table(["confidence bin", "count", "mean confidence", "accuracy"], rows)
    )


def _worst(pairs: Sequence[tuple[LabeledExample, CriterionResult]]) -> list[int]:
    """Indexes of the worst examples: unsafe, then other wrong statuses, then low scores."""

    def rank(i: int) -> tuple[int, float]:
        example, result = pairs[i]
        if result.status == example.gold_status:
            return 2, example_score(example, result)
        unsafe = result.status == CriterionStatus.MET and example.gold_status in UNSAFE_GOLD
        return (0 if unsafe else 1), -result.confidence

    return sorted(range(len(pairs)), key=rank)[:MAX_WORST]


def _atoms_table(result: CriterionResult) -> str:
    """Per-atom verdicts and the evidence that decided each (empty without conditions)."""
    if not result.atoms:
        return ""
    rows = []
    for atom in result.atoms:
        evidence = "<br>".join(
            f"[{_e(e.field or e.doc_id or '')}{_e(f' p{e.page}' if e.page else '')}] {_e(e.quote)}"
            for e in atom.evidence[:3]
        )
        label = ("if " if atom.applicability else "") + atom.label
        rows.append(
            f"<tr><td>{_e(label)}</td><td>{_e(atom.state.value)} ({_e(atom.decided_by)})</td>"
            f"<td>{_e(atom.note)}</td><td>{evidence}</td></tr>"
        )
    head = "<tr><th>condition</th><th>verdict</th><th>what was found</th><th>evidence</th></tr>"
    return f"<p><b>Conditions</b></p><table>{head}{''.join(rows)}</table>"


def _example_block(example: LabeledExample, result: CriterionResult) -> str:
    unsafe = result.status == CriterionStatus.MET and example.gold_status in UNSAFE_GOLD
    flag = ' <span class="unsafe">UNSAFE MET</span>' if unsafe else ""
    error = getattr(result, "error", None)
    policy = "".join(f"<pre>[{_e(c.node_id)}] {_e(c.quote)}</pre>" for c in result.policy_citations)
    case = "".join(
        f"<pre>[{_e(c.field or c.doc_id or '')}{_e(f' p{c.page}' if c.page else '')}] "
        f"{_e(c.quote)}</pre>"
        for c in result.case_evidence
    )
    trace = "".join(
        f"<pre>{s.index}. {_e(s.kind.value)}{_e(f' {s.tool}' if s.tool else '')}"
        f"{_e(f' {s.arguments}' if s.arguments else '')}: {_e(s.content)}</pre>"
        for s in result.reasoning_trace
    )
    atoms = _atoms_table(result)
    gold_case = "".join(f"<pre>{_e(q)}</pre>" for q in example.gold_case_quotes)
    sentence_ids = (
        f"<p>sentence ids: {_e(example.gold_sentence_ids)}</p>"
        if example.gold_sentence_ids is not None
        else ""
    )
    return f"""<div class="example"><h3>{_e(example.example_id)}{flag}</h3>
<p>criterion {_e(example.criterion_id)} · score {example_score(example, result):.3f}
{f' · <span class="unsafe">error: {_e(error)}</span>' if error else ""}</p>
<div class="side"><div><h4>Result: {_e(result.status.value)} ({result.confidence:.2f})
{_e(f" · {result.reason_code.value}" if result.reason_code else "")}</h4>
<p><b>Rationale</b></p><pre>{_e(result.rationale)}</pre>
<p><b>Policy citations</b></p>{policy or "<p>none</p>"}
{atoms}<p><b>Case evidence</b></p>{case or "<p>none</p>"}
<details><summary>Trace ({len(result.reasoning_trace)} steps)</summary>{trace}</details></div>
<div><h4>Gold: {_e(example.gold_status.value)}</h4>
<p><b>Note</b></p><pre>{_e(example.note)}</pre>
<p><b>Policy quote</b></p><pre>{_e(example.gold_policy_quote)}</pre>
<p><b>Case quotes</b></p>{gold_case or "<p>none</p>"}{sentence_ids}
<p><b>Fact fields</b></p><pre>{_e(", ".join(example.gold_fact_fields))}</pre>
<p><b>Feedback</b></p><pre>{_e(feedback_for(example, result))}</pre></div></div></div>"""


def render_report(
    summary: EvalSummary, pairs: Sequence[tuple[LabeledExample, CriterionResult]]
) -> str:
    """The whole report page as one HTML string."""
    worst = "".join(_example_block(*pairs[i]) for i in _worst(pairs))
    info = summary.run_info
    title = f"Evaluation: {info.get('controller') or ''} {info.get('prompt_id') or ''}".strip()
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>
<style>{_CSS}</style></head><body>
<h1>{_e(title)}</h1>
{_summary_section(summary)}
{_status_section(summary.metrics)}
{_calibration_section(summary.metrics)}
<h2>Worst examples</h2>
<p>Wrong statuses first (unsafe met before the rest, most confident first), then the lowest
per-example scores.</p>
{worst or "<p>none</p>"}
</body></html>
"""


def write_report(
    path: Path, summary: EvalSummary, pairs: Sequence[tuple[LabeledExample, CriterionResult]]
) -> None:
    """Write `render_report` to `path`."""
    path.write_text(render_report(summary, pairs), encoding="utf-8")


# --- comparison -----------------------------------------------------------------------------


class MetricDelta(BaseModel):
    name: str
    label: str
    a: float
    b: float
    delta: float
    """b − a."""
    higher_is_better: bool


class StatusFlip(BaseModel):
    example_id: str
    gold_status: CriterionStatus
    status_a: CriterionStatus
    status_b: CriterionStatus
    change: Literal["fixed", "broken", "changed"]
    """fixed: wrong in A, right in B; broken: the reverse; changed: wrong in both."""


class Comparison(BaseModel):
    """Run B against run A: metric deltas and per-example status flips."""

    run_a: str
    run_b: str
    info_a: dict[str, object]
    info_b: dict[str, object]
    deltas: list[MetricDelta]
    flips: list[StatusFlip]
    common: int
    """Examples recorded in both runs."""
    only_a: int
    only_b: int


def compare_runs(run_a_dir: Path, run_b_dir: Path) -> Comparison:
    """Compare two finished run directories (summary.json and results.jsonl of each)."""
    summary_a, summary_b = load_summary(run_a_dir), load_summary(run_b_dir)
    records_a = {r.example_id: r for r in read_records(run_a_dir / RESULTS_FILE)}
    records_b = {r.example_id: r for r in read_records(run_b_dir / RESULTS_FILE)}
    deltas = [
        MetricDelta(
            name=path,
            label=label,
            a=(a := _metric(summary_a.metrics, path)),
            b=(b := _metric(summary_b.metrics, path)),
            delta=b - a,
            higher_is_better=up,
        )
        for path, label, up in SCALAR_METRICS
    ]
    common = [eid for eid in records_a if eid in records_b]
    flips = [f for eid in common if (f := _flip(records_a[eid], records_b[eid])) is not None]
    return Comparison(
        run_a=str(run_a_dir),
        run_b=str(run_b_dir),
        info_a=summary_a.run_info,
        info_b=summary_b.run_info,
        deltas=deltas,
        flips=flips,
        common=len(common),
        only_a=len(records_a) - len(common),
        only_b=len(records_b) - len(common),
    )


def _flip(a: EvalRecord, b: EvalRecord) -> StatusFlip | None:
    if a.status == b.status or a.gold_status is None:
        return None
    gold = a.gold_status
    change: Literal["fixed", "broken", "changed"] = (
        "fixed" if b.status == gold else "broken" if a.status == gold else "changed"
    )
    return StatusFlip(
        example_id=a.example_id,
        gold_status=gold,
        status_a=a.status,
        status_b=b.status,
        change=change,
    )


def render_comparison(comparison: Comparison) -> str:
    """The comparison as Markdown: a metric table, then the status flips."""
    lines = [
        f"# {comparison.run_b} vs {comparison.run_a}",
        "",
        f"Examples in both: {comparison.common}; only in A: {comparison.only_a}; "
        f"only in B: {comparison.only_b}.",
        "",
        "| metric | A | B | Δ (B − A) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for d in comparison.deltas:
        better = d.delta > 0 if d.higher_is_better else d.delta < 0
        mark = "" if abs(d.delta) < 1e-12 else (" ▲" if better else " ▼")
        lines.append(f"| {d.label} | {d.a:.3f} | {d.b:.3f} | {d.delta:+.3f}{mark} |")
    lines += ["", f"## Status flips ({len(comparison.flips)})", ""]
    if comparison.flips:
        lines += ["| example | gold | A | B | change |", "| --- | --- | --- | --- | --- |"]
        order = {"broken": 0, "changed": 1, "fixed": 2}
        for f in sorted(comparison.flips, key=lambda f: (order[f.change], f.example_id)):
            lines.append(
                f"| {f.example_id} | {f.gold_status.value} | {f.status_a.value} | "
                f"{f.status_b.value} | {f.change} |"
            )
    else:
        lines.append("none")
    return "\n".join(lines) + "\n"
