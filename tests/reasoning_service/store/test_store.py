"""The store keeps what it was given across a restart and never keeps half an evaluation, on
SQLite and on PostgreSQL alike (`database_url` runs each test on both)."""

from __future__ import annotations

import datetime as dt

import pytest

from reasoning_service.errors import ConflictError, StoreError
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
from reasoning_service.store import Idempotency, SqliteStore, open_store
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


async def test_an_evaluation_survives_a_restart(database_url):
    store = open_store(database_url)
    await store.save_policy(policy())
    await store.save_evaluation(evaluation(), case=CASE, traces=trace(), owner="key-1")
    await store.aclose()

    reopened = open_store(database_url)
    stored = await reopened.get_evaluation("e-1")
    assert stored is not None and stored.owner == "key-1"
    assert stored.result == evaluation()
    traces = await reopened.get_traces("e-1")
    assert traces["P-1/C1"].interactions[0].error_kind == "transient"
    assert traces["P-1/C1"].messages[0].content == "hi"
    assert (await reopened.get_policy("P-1")).tree[0].text == "Some text."
    await reopened.aclose()


async def test_latest_version_is_returned_unless_one_is_named(store):
    assert await store.save_policy(policy("1", NOW))
    assert await store.save_policy(policy("2", NOW + dt.timedelta(days=1)))
    assert not await store.save_policy(policy("1", NOW))  # stored already: nothing written
    assert (await store.get_policy("P-1")).version == "2"
    assert (await store.get_policy("P-1", "1")).version == "1"
    assert await store.get_policy("P-2") is None
    assert [p.version for p in await store.list_policies()] == ["1", "2"]


async def test_a_failed_write_leaves_nothing_half_written(store):
    await store.save_evaluation(evaluation(), case=CASE, traces=trace())
    with pytest.raises(StoreError):
        # Same id again: the evaluations insert fails, so no criterion row may be added either.
        await store.save_evaluation(evaluation(), case=CASE, traces={})
    assert await store.run(lambda tables: tables.count("criterion_results")) == 1


async def test_an_operation_that_raises_writes_nothing(store):
    def insert_then_fail(tables):
        tables.insert("audit_log", {"at": "2026", "action": "x", "outcome": "ok"})
        raise RuntimeError("the operation failed halfway")

    with pytest.raises(RuntimeError):
        await store.run(insert_then_fail)
    assert await store.run(lambda tables: tables.count("audit_log")) == 0


async def test_an_idempotency_key_or_a_job_holds_one_evaluation(store):
    key = Idempotency.of("key-1", "k", "sha")
    await store.save_evaluation(evaluation("e-1"), case=CASE, traces={}, idempotency=key)
    with pytest.raises(ConflictError, match="Idempotency-Key"):
        await store.save_evaluation(evaluation("e-2"), case=CASE, traces={}, idempotency=key)
    found = await store.find_idempotent(key.scope)
    assert found.evaluation.result.evaluation_id == "e-1" and found.request_sha256 == "sha"

    await store.save_evaluation(evaluation("e-3"), case=CASE, traces={}, job_id="job-1")
    with pytest.raises(ConflictError, match="job_id"):
        await store.save_evaluation(evaluation("e-4"), case=CASE, traces={}, job_id="job-1")
    assert (await store.find_job_evaluation("job-1")).result.evaluation_id == "e-3"
    assert await store.find_job_evaluation("job-2") is None
    assert await store.run(lambda tables: tables.count("evaluations")) == 2


async def test_wal_is_on_for_files(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    assert store.db.execute("pragma journal_mode").fetchone()[0] == "wal"
    await store.aclose()
