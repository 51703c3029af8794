"""Fixtures every test can use; the data behind them is read by `testdata.py`, the one source."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from reasoning_service.models import CaseBundle, Policy
from reasoning_service.store import Store, open_store
from reasoning_service.testing.postgres import TemporaryPostgres, find_postgres_bin
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


@pytest.fixture(scope="session")
def postgres() -> Iterator[TemporaryPostgres]:
    """One throwaway PostgreSQL server for the session (each test takes a database of its own).

    Skipped where PostgreSQL is not installed, except in CI (`CI` set), which installs it."""
    if find_postgres_bin() is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed: .ci/run installs it from Debian")
        pytest.skip("PostgreSQL is not installed (pg_ctl, initdb)")
    with TemporaryPostgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres: TemporaryPostgres) -> str:
    """A fresh, empty database on the session's throwaway server."""
    return postgres.create_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each backend in turn: a SQLite file, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    """An open store on each backend."""
    opened = open_store(database_url)
    yield opened
    await opened.aclose()
