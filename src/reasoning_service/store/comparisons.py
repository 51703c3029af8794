"""Shadow comparisons: one row per criterion, and the agreement report over a time window.

Rows hold ids, statuses and numbers only: no case id and no case content (PHI).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict

from reasoning_service.store.base import Store
from reasoning_service.store.tables import Tables

__all__ = [
    "AgreementCount",
    "ShadowComparison",
    "ShadowReport",
    "list_comparisons",
    "save_comparisons",
    "shadow_report",
]


class ShadowComparison(BaseModel):
    """Control (served) against candidate (shadow) on one criterion of one evaluation."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    comparison_id: str
    evaluation_id: str
    criterion_id: str
    created_at: dt.datetime
    control_controller: str
    candidate_controller: str | None = None
    control_prompt_id: str | None = None
    candidate_prompt_id: str | None = None
    control_status: str
    candidate_status: str | None = None
    """None when the candidate failed outright (`candidate_error` says how)."""
    agree: bool
    confidence_delta: float | None = None
    """Candidate confidence minus control confidence."""
    control_latency_ms: float = 0.0
    candidate_latency_ms: float = 0.0
    control_tokens: int = 0
    candidate_tokens: int = 0
    control_error: str | None = None
    """The control's reason code when it is an error or a fallback."""
    candidate_error: str | None = None
    """The candidate's reason code when it is an error or a fallback, or the exception type."""


class AgreementCount(BaseModel):
    """Agreement of one slice (a criterion, a status pair, or everything)."""

    comparisons: int
    agreements: int
    agreement_rate: float | None
    """agreements / comparisons; None with no comparison."""


class ShadowReport(BaseModel):
    """`GET /v1/shadow/report`: how often the candidate agrees with the served control."""

    since: dt.datetime
    until: dt.datetime
    overall: AgreementCount
    per_criterion: dict[str, AgreementCount]
    per_status_pair: dict[str, int]
    """`control->candidate` status pairs and how often each happened."""
    candidate_errors: int
    control_errors: int
    mean_confidence_delta: float | None
    mean_control_latency_ms: float | None
    mean_candidate_latency_ms: float | None
    control_tokens: int
    candidate_tokens: int


def _row(c: ShadowComparison) -> dict[str, Any]:
    row = c.model_dump(mode="json")
    row["agree"] = int(c.agree)
    return row


async def save_comparisons(store: Store, comparisons: list[ShadowComparison]) -> None:
    rows = [_row(c) for c in comparisons]
    await store.run(lambda tables: tables.insert_all("shadow_comparisons", rows))


async def list_comparisons(
    store: Store, *, since: dt.datetime, until: dt.datetime | None = None
) -> list[ShadowComparison]:
    until = until or dt.datetime.now(dt.UTC)

    def read(tables: Tables) -> list[dict[str, Any]]:
        return tables.select(
            "shadow_comparisons",
            "created_at >= ? and created_at <= ?",
            [since.isoformat(), until.isoformat()],
            order_by="created_at",
        )

    return [ShadowComparison.model_validate(r) for r in await store.run(read)]


def _count(rows: list[ShadowComparison]) -> AgreementCount:
    agreements = sum(1 for r in rows if r.agree)
    return AgreementCount(
        comparisons=len(rows),
        agreements=agreements,
        agreement_rate=round(agreements / len(rows), 4) if rows else None,
    )


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def summarise(
    rows: list[ShadowComparison], *, since: dt.datetime, until: dt.datetime
) -> ShadowReport:
    """The report for `rows` (pure, so the API and the CLI print the same numbers)."""
    by_criterion: dict[str, list[ShadowComparison]] = defaultdict(list)
    for r in rows:
        by_criterion[r.criterion_id].append(r)
    pairs = Counter(f"{r.control_status}->{r.candidate_status or 'error'}" for r in rows)
    return ShadowReport(
        since=since,
        until=until,
        overall=_count(rows),
        per_criterion={cid: _count(rs) for cid, rs in sorted(by_criterion.items())},
        per_status_pair=dict(sorted(pairs.items())),
        candidate_errors=sum(1 for r in rows if r.candidate_error),
        control_errors=sum(1 for r in rows if r.control_error),
        mean_confidence_delta=_mean(
            [r.confidence_delta for r in rows if r.confidence_delta is not None]
        ),
        mean_control_latency_ms=_mean([r.control_latency_ms for r in rows]),
        mean_candidate_latency_ms=_mean([r.candidate_latency_ms for r in rows]),
        control_tokens=sum(r.control_tokens for r in rows),
        candidate_tokens=sum(r.candidate_tokens for r in rows),
    )


async def shadow_report(store: Store, *, window_hours: float = 24.0) -> ShadowReport:
    """Agreement over the last `window_hours`."""
    until = dt.datetime.now(dt.UTC)
    since = until - dt.timedelta(hours=window_hours)
    rows = await list_comparisons(store, since=since, until=until)
    return summarise(rows, since=since, until=until)
