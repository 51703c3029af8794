"""`RecordingLLMClient` inside `RetryingLLMClient`: one record per attempt; and the factory."""

from __future__ import annotations

import logging

import pytest

from reasoning_service.errors import AuthFailed, ProviderUnavailable
from reasoning_service.llm.factory import build_llm_client
from reasoning_service.llm.recording import RecordingLLMClient
from reasoning_service.llm.retry import RetryingLLMClient
from reasoning_service.llm.text_react import TextReActClient
from reasoning_service.models.conversation import LLMInteraction, LLMRequest, Message
from reasoning_service.settings import Settings
from reasoning_service.testing import ScriptedLLM, ScriptedServer, http_error, text

SECRET_CASE_TEXT = "Patient Jane Roe, HbA1c 9.1"
REQUEST = LLMRequest(messages=(Message(role="user", content=SECRET_CASE_TEXT),))


async def _no_sleep(_: float) -> None:
    return None


async def test_each_attempt_is_recorded_with_its_number() -> None:
    records: list[LLMInteraction] = []
    down = ProviderUnavailable("down", provider="scripted", model="m", status=503)
    llm = ScriptedLLM([down, text("ok")])
    client = RetryingLLMClient(RecordingLLMClient(llm, records), sleep=_no_sleep)
    await client.complete(REQUEST)
    assert [(r.attempt, r.success, r.error_kind) for r in records] == [
        (1, False, "transient"),
        (2, True, None),
    ]
    assert records[0].error_message and records[0].error_message.startswith("ProviderUnavailable")
    assert records[1].reply is not None and records[1].reply.usage.llm_calls == 1
    assert records[1].request_messages == list(REQUEST.messages)
    assert records[1].duration_ms >= 0 and records[1].provider == "scripted"


async def test_permanent_failure_is_recorded_and_re_raised() -> None:
    seen: list[LLMInteraction] = []
    llm = ScriptedLLM([AuthFailed("bad key", provider="p", model="m", status=401)])
    with pytest.raises(AuthFailed):
        await RecordingLLMClient(llm, seen.append).complete(REQUEST)
    assert len(seen) == 1 and seen[0].error_kind == "permanent" and seen[0].attempt == 1


async def test_case_text_and_key_never_reach_the_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    records: list[LLMInteraction] = []
    with ScriptedServer([http_error(503), text("ok")]) as server:
        settings = Settings(
            llm_provider="openai",
            llm_api_key="sk-very-secret-key",
            llm_base_url=server.base_url,
            retry_base_s=0.0,
        )
        client = build_llm_client(settings, sink=records, sleep=_no_sleep)
        assert client is not None
        await client.complete(REQUEST)
        await client.aclose()
        assert server.requests[0].headers["authorization"] == "Bearer sk-very-secret-key"
    assert len(records) == 2 and records[1].success
    assert SECRET_CASE_TEXT not in caplog.text and "sk-very-secret-key" not in caplog.text


def test_factory_returns_none_without_provider() -> None:
    assert build_llm_client(Settings()) is None


def test_factory_stack_order() -> None:
    settings = Settings(
        llm_provider="local", llm_base_url="http://127.0.0.1:9/v1", tool_calling_mode="text"
    )
    client = build_llm_client(settings, sink=[])
    assert isinstance(client, TextReActClient)
    retrying = client._inner
    assert isinstance(retrying, RetryingLLMClient)
    assert isinstance(retrying._inner, RecordingLLMClient)
    assert (client.provider, client.model) == ("local", settings.llm_model)
