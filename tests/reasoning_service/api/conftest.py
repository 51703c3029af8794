"""The service runs under uvicorn on 127.0.0.1; tests talk to it with a real HTTP client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reasoning_service.api.app import create_app
from reasoning_service.settings import Settings
from reasoning_service.testing.live_server import LiveServer


def make_settings(db_path: Path, **overrides: object) -> Settings:
    return Settings(db_path=db_path, **overrides)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "service.db")


@pytest.fixture
def client(settings: Settings) -> Iterator[httpx.Client]:
    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        yield http
