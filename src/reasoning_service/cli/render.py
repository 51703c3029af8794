"""Human-readable rendering of evaluation results for the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from reasoning_service.models import (
    AtomResult,
    AtomState,
    CaseEvidence,
    CriterionResult,
    CriterionStatus,
    EvaluationResult,
)

_STYLE = {
    CriterionStatus.MET: "green",
    CriterionStatus.NOT_MET: "red",
    CriterionStatus.MISSING_INFO: "yellow",
    CriterionStatus.UNCERTAIN: "magenta",
    CriterionStatus.NOT_APPLICABLE: "dim",
}


_ATOM_MARK = {
    AtomState.HOLDS: "[green]✓[/]",
    AtomState.FAILS: "[red]✗[/]",
    AtomState.NO_EVIDENCE: "[yellow]?[/]",
    AtomState.CONFLICTING: "[magenta]≠[/]",
}


def _clip(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _evidence_cell(result: CriterionResult) -> str:
    """Per atom: its verdict and the evidence that decided it; else the case evidence."""
    if not result.atoms:
        lines = [escape(_clip(result.rationale, 160))]
        lines += [_quote(evidence) for evidence in result.case_evidence]
        return "\n".join(lines)
    return "\n".join(_atom_lines(atom) for atom in result.atoms)


def _atom_lines(atom: AtomResult) -> str:
    label = escape(_clip(atom.label, 70))
    head = f"{_ATOM_MARK[atom.state]} {'if ' if atom.applicability else ''}{label}"
    detail = f"    {escape(_clip(atom.note, 90))}" if atom.note and not atom.evidence else ""
    shown = list({evidence.quote: evidence for evidence in atom.evidence}.values())[:2]
    quotes = [f"    ↳ {_quote(evidence)}" for evidence in shown]
    return "\n".join(filter(None, [head, detail, *quotes]))


def _quote(evidence: CaseEvidence) -> str:
    where = evidence.doc_id or evidence.field
    page = f" p{evidence.page}" if evidence.page else ""
    return escape(f"[{where}{page}] “{_clip(evidence.quote, 70)}”")


def render_evaluation(result: EvaluationResult, console: Console) -> None:
    """Print the recommendation, one row per criterion, and what to request."""
    console.print(
        f"[bold]{result.case_id}[/] vs [bold]{result.policy.policy_id}[/] v{result.policy.version}"
        f" (sha256 {result.policy.sha256[:12]}…) — controller [bold]{result.controller}[/]"
        + (f", model {result.model}" if result.model else "")
    )
    table = Table(show_lines=True)
    for column in ("criterion", "status", "policy citation", "conditions and case evidence"):
        table.add_column(column, overflow="fold")
    for r in result.results:
        policy = "\n".join(
            escape(f"[{c.node_id} {_clip(c.section_title, 30)}] “{_clip(c.quote, 70)}”")
            for c in r.policy_citations
        )
        status = f"[{_STYLE[r.status]}]{r.status.value}[/] {r.confidence:.2f}"
        if r.reason_code:
            status += f"\n({r.reason_code.value})"
        table.add_row(r.criterion_id, status, policy, _evidence_cell(r))
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
