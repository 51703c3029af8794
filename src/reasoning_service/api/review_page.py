"""The reviewer's page (`GET /review/{id}`): one evaluation as server-rendered HTML.

What a reviewer sees first is the recommendation and the criteria that keep the case from
approval, each with the documentation to request; then every criterion (open ones first) with
its status, per-atom verdicts, the policy quote, and the case evidence marked (`<mark>`) in its
document page. No scripts and no external assets: the page works offline and without JavaScript.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from jinja2 import Environment, PackageLoader, select_autoescape

from reasoning_service.models import (
    CaseBundle,
    CaseEvidence,
    CriterionResult,
    CriterionStatus,
    EvaluationResult,
)

__all__ = ["render_review"]

_OPEN_FIRST = {
    CriterionStatus.NOT_MET: 0,
    CriterionStatus.MISSING_INFO: 1,
    CriterionStatus.UNCERTAIN: 2,
    CriterionStatus.MET: 3,
    CriterionStatus.NOT_APPLICABLE: 4,
}


@dataclass
class _PageView:
    """One document page with the evidence spans marked: (text, marked) segments."""

    doc_id: str
    title: str
    page: int
    segments: list[tuple[str, bool]]


@dataclass
class _CriterionView:
    result: CriterionResult
    text: str
    documentation: str | None
    pages: list[_PageView] = field(default_factory=list)
    facts: list[CaseEvidence] = field(default_factory=list)


@cache
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("reasoning_service.api", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_review(result: EvaluationResult, case: CaseBundle | None, *, trace_href: str) -> str:
    """The page's HTML; without the stored case, evidence is shown as quotes only."""
    open_by_id = {o.criterion_id: o for o in result.open_criteria}
    criteria = []
    for criterion in sorted(result.results, key=lambda r: _OPEN_FIRST[r.status]):
        open_ = open_by_id.get(criterion.criterion_id)
        quote = criterion.policy_citations[0].quote if criterion.policy_citations else ""
        view = _CriterionView(
            result=criterion,
            text=open_.text if open_ else quote,
            documentation=open_.documentation_to_request if open_ else None,
        )
        _add_evidence(view, _evidence_of(criterion), case)
        criteria.append(view)
    template = _environment().get_template("review.html")
    return template.render(result=result, criteria=criteria, trace_href=trace_href)


def _evidence_of(criterion: CriterionResult) -> list[CaseEvidence]:
    """The criterion's evidence and its atoms', without repeats."""
    seen: dict[tuple, CaseEvidence] = {}
    for item in [*criterion.case_evidence, *(e for a in criterion.atoms for e in a.evidence)]:
        seen.setdefault((item.doc_id, item.page, item.field, item.quote), item)
    return list(seen.values())


def _add_evidence(view: _CriterionView, evidence: list[CaseEvidence], case: CaseBundle | None):
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for item in evidence:
        text = _page_text(case, item)
        if text is None or item.doc_id is None:
            view.facts.append(item)
            continue
        span = _span(text, item)
        if span is None:
            view.facts.append(item)
            continue
        spans.setdefault((item.doc_id, item.page or 1), []).append(span)
    for (doc_id, page), found in spans.items():
        document = case.document(doc_id) if case else None
        assert document is not None
        view.pages.append(
            _PageView(doc_id, document.title, page, _segments(document.pages[page - 1], found))
        )


def _page_text(case: CaseBundle | None, item: CaseEvidence) -> str | None:
    if case is None or item.doc_id is None:
        return None
    document = case.document(item.doc_id)
    page = item.page or 1
    if document is None or not 1 <= page <= len(document.pages):
        return None
    return document.pages[page - 1]


def _span(text: str, item: CaseEvidence) -> tuple[int, int] | None:
    start, end = item.char_start, item.char_end
    if start is not None and end is not None and text[start:end] == item.quote:
        return start, end
    found = text.find(item.quote) if item.quote else -1
    return (found, found + len(item.quote)) if found >= 0 else None


def _segments(text: str, spans: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    segments, cursor = [], 0
    for start, end in merged:
        segments.append((text[cursor:start], False))
        segments.append((text[start:end], True))
        cursor = end
    segments.append((text[cursor:], False))
    return [s for s in segments if s[0]]
