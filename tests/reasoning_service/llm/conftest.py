"""Fixtures for the LLM layer: a `ScriptedServer` on 127.0.0.1 and real SDK clients pointed at it.

No test here may reach a real provider: provider environment variables are cleared, and every
SDK client is built with an explicit fake key, the scripted server's URL and `max_retries=0`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anthropic
import openai
import pytest

from reasoning_service.testing import ScriptedServer

_PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
)


@pytest.fixture(autouse=True)
def _no_provider_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def _running_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def server(_running_server: ScriptedServer) -> ScriptedServer:
    """A scripted server with an empty script; tests `push` their steps."""
    _running_server.reset()
    return _running_server


@pytest.fixture
async def openai_sdk(server: ScriptedServer) -> AsyncIterator[openai.AsyncOpenAI]:
    sdk = openai.AsyncOpenAI(
        api_key="test-key", base_url=server.base_url, max_retries=0, timeout=2.0
    )
    yield sdk
    await sdk.close()


@pytest.fixture
async def anthropic_sdk(server: ScriptedServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    sdk = anthropic.AsyncAnthropic(
        api_key="test-key", base_url=server.anthropic_base_url, max_retries=0, timeout=2.0
    )
    yield sdk
    await sdk.close()
