"""A real policy (NCD-240.4 from examples/) indexed for retrieval, and a real dev case."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reasoning_service.models import CriteriaSet, Policy, SourceFormat
from retrieval import RetrievalService, build_tree_from_markdown

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def load_policy(policy_id: str) -> Policy:
    text = (EXAMPLES / "policies" / f"{policy_id}.md").read_text()
    criteria = CriteriaSet.model_validate(
        json.loads((EXAMPLES / "criteria" / f"{policy_id}.json").read_text())
    )
    return Policy(
        policy_id=policy_id,
        version=criteria.version,
        sha256="0" * 64,
        title=policy_id,
        source_format=SourceFormat.MARKDOWN,
        created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        tree=build_tree_from_markdown(text),
        criteria=criteria,
    )


@pytest.fixture
def cpap_policy() -> Policy:
    return load_policy("NCD-240.4")


@pytest.fixture
async def retrieval(cpap_policy: Policy) -> AsyncIterator[RetrievalService]:
    service = RetrievalService()
    await service.index_policy(cpap_policy.policy_id, cpap_policy.tree)
    yield service
    await service.aclose()
