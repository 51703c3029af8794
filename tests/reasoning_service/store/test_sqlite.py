"""The store keeps what it was given across a restart and never keeps half an evaluation."""

from __future__ import annotations

import datetime as dt

import pytest

from reasoning_service.errors import StoreError
from reasoning_service.models import (
    CaseBundle,
    CriterionResult,
    CriterionStatus,
    EvaluationResult,
    LLMInteraction,
    Message,
    Policy,
    PolicyRef,
    Recommendation,
    SourceFormat,
)
from reasoning_service.models.task import CriterionTrace
from reasoning_service.store import SqliteStore
from retrieval import TreeNode

NOW = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def policy(version: str = "1", created_at: dt.datetime = NOW) -> Policy:
    return Policy(
        policy_id="P-1",
        version=version,
        sha256="ab" * 32,
        title="Test policy",
        source_format=SourceFormat.MARKDOWN,
        created_at=created_at,
        tree=[TreeNode(title="A", node_id="0000", text="Some text.")],
    )


def evaluation(evaluation_id: str = "e-1") -> EvaluationResult:
    return EvaluationResult(
        evaluation_id=evaluation_id,
        case_id="case-1",
        policy=PolicyRef(policy_id="P-1", version="1", sha256="ab" * 32),
        recommendation=Recommendation.PEND_FOR_REVIEW,
        summary="s",
        results=[
            CriterionResult(
                criterion_id="P-1/C1",
                status=CriterionStatus.MISSING_INFO,
                confidence=0.5,
                rationale="r",
                controller="react",
            )
        ],
        controller="react",
        service_version="test",
        created_at=NOW,
    )


def trace() -> dict[str, CriterionTrace]:
    interaction = LLMInteraction(
        provider="openai",
        model="m",
        request_messages=[Message(role="user", content="hi")],
        success=False,
        error_kind="transient",
        error_message="500",
        duration_ms=3.0,
        started_at=NOW,
    )
    return {
        "P-1/C1": CriterionTrace(
            messages=[Message(role="user", content="hi")], interactions=[interaction]
        )
    }


CASE = CaseBundle(case_id="case-1", facts=[{"field": "x", "value": 1}])


async def test_an_evaluation_survives_a_restart(tmp_path):
    path = tmp_path / "store.db"
    store = SqliteStore(path)
    await store.save_policy(policy())
    await store.save_evaluation(evaluation(), case=CASE, traces=trace(), owner="key-1")
    await store.aclose()

    reopened = SqliteStore(path)
    stored = await reopened.get_evaluation("e-1")
    assert stored is not None and stored.owner == "key-1"
    assert stored.result == evaluation()
    traces = await reopened.get_traces("e-1")
    assert traces["P-1/C1"].interactions[0].error_kind == "transient"
    assert (await reopened.get_policy("P-1")).tree[0].text == "Some text."
    await reopened.aclose()


async def test_latest_version_is_returned_unless_one_is_named(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    await store.save_policy(policy("1", NOW))
    await store.save_policy(policy("2", NOW + dt.timedelta(days=1)))
    assert (await store.get_policy("P-1")).version == "2"
    assert (await store.get_policy("P-1", "1")).version == "1"
    assert await store.get_policy("P-2") is None
    await store.aclose()


async def test_a_failed_write_leaves_nothing_half_written(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    await store.save_evaluation(evaluation(), case=CASE, traces=trace())
    with pytest.raises(StoreError):
        # Same id again: the evaluations insert fails, so no criterion row may be added either.
        await store.save_evaluation(evaluation(), case=CASE, traces={})
    rows = await store.run(
        lambda db: db.execute("select count(*) from criterion_results").fetchone()
    )
    assert rows[0] == 1
    await store.aclose()


async def test_wal_is_on_for_files(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    mode = await store.run(lambda db: db.execute("pragma journal_mode").fetchone()[0])
    assert mode == "wal"
    await store.aclose()
