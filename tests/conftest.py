"""Fixtures every test can use; the data behind them is read by `testdata.py`, the one source."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reasoning_service.models import CaseBundle, Policy
from retrieval import RetrievalService
from testdata import load_case, load_case_json, load_policy


@pytest.fixture
def cpap_case() -> CaseBundle:
    return load_case("cpap-dev-001")


@pytest.fixture
def cpap_case_json() -> dict:
    return load_case_json("cpap-dev-001")


@pytest.fixture
def cpap_policy() -> Policy:
    """NCD-240.4 (CPAP) from examples/, with its criteria."""
    return load_policy("NCD-240.4")


@pytest.fixture
async def retrieval(cpap_policy: Policy) -> AsyncIterator[RetrievalService]:
    """A retrieval service with the CPAP policy indexed."""
    service = RetrievalService()
    await service.index_policy(cpap_policy.policy_id, cpap_policy.tree)
    yield service
    await service.aclose()
