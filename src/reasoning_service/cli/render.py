"""Human-readable rendering of evaluation results for the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from reasoning_service.models import CriterionStatus, EvaluationResult

_STYLE = {
    CriterionStatus.MET: "green",
    CriterionStatus.NOT_MET: "red",
    CriterionStatus.MISSING_INFO: "yellow",
    CriterionStatus.UNCERTAIN: "magenta",
    CriterionStatus.NOT_APPLICABLE: "dim",
}


def _clip(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_evaluation(result: EvaluationResult, console: Console) -> None:
    """Print the recommendation, one row per criterion, and what to request."""
    console.print(
        f"[bold]{result.case_id}[/] vs [bold]{result.policy.policy_id}[/] v{result.policy.version}"
        f" (sha256 {result.policy.sha256[:12]}…) — controller [bold]{result.controller}[/]"
        + (f", model {result.model}" if result.model else "")
    )
    table = Table(show_lines=True)
    for column in ("criterion", "status", "conf.", "policy citation", "case evidence", "rationale"):
        table.add_column(column, overflow="fold")
    for r in result.results:
        policy = "\n".join(
            f"[{c.node_id} {_clip(c.section_title, 30)}] “{_clip(c.quote, 70)}”"
            for c in r.policy_citations
        )
        case = "\n".join(
            f"[{e.doc_id or e.field} p{e.page or '-'}] “{_clip(e.quote, 60)}”"
            for e in r.case_evidence
        )
        status = f"[{_STYLE[r.status]}]{r.status.value}[/]"
        if r.reason_code:
            status += f"\n({r.reason_code.value})"
        table.add_row(
            r.criterion_id, status, f"{r.confidence:.2f}", policy, case, _clip(r.rationale, 160)
        )
    console.print(table)
    colour = "green" if result.recommendation.value == "approve" else "yellow"
    console.print(
        f"Recommendation: [bold {colour}]{result.recommendation.value}[/] — {result.summary}"
    )
    for item in result.open_criteria:
        if item.documentation_to_request:
            console.print(
                f"  • {item.criterion_id} ({item.status.value}): {item.documentation_to_request}"
            )
    console.print(f"Evaluation id: {result.evaluation_id}")
