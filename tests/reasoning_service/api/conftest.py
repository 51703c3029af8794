"""The service runs under uvicorn on 127.0.0.1; tests talk to it with a real HTTP client.

Auth is on (the default): `client` sends an admin key created in the test database first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reasoning_service.api.app import create_app
from reasoning_service.settings import Settings
from reasoning_service.store import open_store
from reasoning_service.store.keys import create_api_key
from reasoning_service.testing.live_server import LiveServer


def make_settings(db_path: Path, **overrides: object) -> Settings:
    return Settings(db_path=db_path, **overrides)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "service.db")


def new_key(db: Path | str, *, admin: bool = False) -> str:
    """Create an API key in the database (a SQLite file or a URL) and return it, as the CLI
    would."""

    async def create() -> str:
        store = open_store(db if isinstance(db, str) else f"sqlite:///{db}")
        try:
            return (await create_api_key(store, admin=admin))[1]
        finally:
            await store.aclose()

    return asyncio.run(create())


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def admin_key(settings: Settings) -> str:
    return new_key(settings.db_path, admin=True)


@pytest.fixture
def client(settings: Settings, admin_key: str) -> Iterator[httpx.Client]:
    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, timeout=60, headers=bearer(admin_key)) as http,
    ):
        yield http
