"""One setting names the database: REASONING_DATABASE_URL, with REASONING_DB_PATH as shorthand."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from reasoning_service.settings import Settings
from reasoning_service.store import SqliteStore, open_store, sqlite_path_of


def test_the_default_is_a_sqlite_file_and_db_path_is_its_shorthand(monkeypatch):
    monkeypatch.delenv("REASONING_DATABASE_URL", raising=False)
    monkeypatch.delenv("REASONING_DB_PATH", raising=False)
    assert Settings().store_url == "sqlite:///reasoning.db"
    monkeypatch.setenv("REASONING_DB_PATH", "/data/r.db")
    assert Settings().store_url == "sqlite:////data/r.db"
    assert sqlite_path_of(Settings().store_url) == Path("/data/r.db")
    monkeypatch.setenv("REASONING_DATABASE_URL", "postgresql://u:p@db:5432/reasoning")
    assert Settings().store_url == "postgresql://u:p@db:5432/reasoning"


def test_an_unsupported_database_url_fails_at_start_up(monkeypatch):
    monkeypatch.setenv("REASONING_DATABASE_URL", "mysql://db/reasoning")
    with pytest.raises(ValidationError, match="REASONING_database_url"):
        Settings()


async def test_a_sqlite_url_opens_the_file(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    assert isinstance(store, SqliteStore) and store.kind == "sqlite"
    await store.aclose()
    assert (tmp_path / "x.db").exists()


async def test_a_postgresql_url_opens_the_server_and_migrates_it_twice(postgres_url):
    first = open_store(postgres_url)
    second = open_store(postgres_url)  # the schema is there: migrating again changes nothing
    assert first.kind == "postgresql"
    assert await second.run(lambda tables: tables.count("evaluations")) == 0
    await first.aclose()
    await second.aclose()
