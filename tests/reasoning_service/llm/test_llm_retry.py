"""`RetryingLLMClient`: unit schedule tests with `ScriptedLLM`, then end to end over HTTP."""

from __future__ import annotations

import anthropic
import openai
import pytest

from reasoning_service.errors import (
    AuthFailed,
    BadLLMRequest,
    LLMConnectionError,
    LLMTimeout,
    ProviderUnavailable,
    RateLimited,
    TransientLLMError,
)
from reasoning_service.llm.anthropic import AnthropicClient
from reasoning_service.llm.openai import OpenAIClient
from reasoning_service.llm.retry import RetryingLLMClient, backoff_s
from reasoning_service.models.conversation import LLMRequest, Message
from reasoning_service.testing import (
    ScriptedLLM,
    ScriptedServer,
    delayed,
    http_error,
    overloaded,
    rate_limited,
    text,
)

REQUEST = LLMRequest(messages=(Message(role="user", content="hello"),))


def NO_JITTER() -> float:
    """The top of each jitter range: the plain 1 s, 2 s, 4 s schedule."""
    return 1.0


class SleepRecorder:
    """Stands in for `asyncio.sleep`: remembers each wait instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def transient(retry_after_s: float | None = None) -> ProviderUnavailable:
    return ProviderUnavailable(
        "down", provider="p", model="m", status=503, retry_after_s=retry_after_s
    )


def test_backoff_is_exponential_unless_retry_after_says_otherwise() -> None:
    waits = [backoff_s(transient(), n, base_s=1.0, retry_after_cap_s=30) for n in (1, 2, 3)]
    assert waits == [1.0, 2.0, 4.0]
    assert backoff_s(transient(2.0), 3, base_s=1.0, retry_after_cap_s=30) == 2.0
    assert backoff_s(transient(120.0), 1, base_s=1.0, retry_after_cap_s=30) == 30.0


async def test_transient_errors_are_retried_then_succeed() -> None:
    sleep, retries = SleepRecorder(), []
    llm = ScriptedLLM([transient(), transient(), text("ok")])
    client = RetryingLLMClient(
        llm,
        sleep=sleep,
        jitter=NO_JITTER,
        on_retry=lambda error, attempt, wait: retries.append((attempt, wait)),
    )
    assert (await client.complete(REQUEST)).content == "ok"
    assert sleep.waits == [1.0, 2.0]
    assert retries == [(1, 1.0), (2, 2.0)]
    llm.assert_complete()


async def test_last_transient_error_is_raised_not_retry_error() -> None:
    sleep = SleepRecorder()
    last = transient()
    llm = ScriptedLLM([transient(), transient(), transient(), last])
    with pytest.raises(ProviderUnavailable) as caught:
        await RetryingLLMClient(llm, sleep=sleep, jitter=NO_JITTER, max_retries=3).complete(REQUEST)
    assert caught.value is last
    assert sleep.waits == [1.0, 2.0, 4.0]


async def test_permanent_errors_are_not_retried() -> None:
    sleep = SleepRecorder()
    llm = ScriptedLLM([AuthFailed("no", provider="p", model="m", status=401)])
    with pytest.raises(AuthFailed):
        await RetryingLLMClient(llm, sleep=sleep, jitter=NO_JITTER).complete(REQUEST)
    assert sleep.waits == [] and len(llm.calls) == 1


async def test_a_retry_after_above_the_cap_gives_up_at_once() -> None:
    """Issue 13: waiting 300 s (or 30 s, then failing again) holds the request; the controller
    falls back instead."""
    sleep = SleepRecorder()
    refused = transient(retry_after_s=300)
    llm = ScriptedLLM([refused, text("never asked")])
    client = RetryingLLMClient(llm, sleep=sleep, jitter=NO_JITTER, retry_after_cap_s=30)
    with pytest.raises(ProviderUnavailable) as caught:
        await client.complete(REQUEST)
    assert caught.value is refused
    assert sleep.waits == [] and len(llm.calls) == 1


async def test_a_retry_after_within_the_cap_is_waited_exactly() -> None:
    sleep = SleepRecorder()
    llm = ScriptedLLM([transient(retry_after_s=30), text("ok")])
    client = RetryingLLMClient(llm, sleep=sleep, jitter=lambda: 0.1, retry_after_cap_s=30)
    assert (await client.complete(REQUEST)).content == "ok"
    assert sleep.waits == [30]


async def test_backoff_has_full_jitter_within_the_exponential_bounds() -> None:
    import random

    sleep = SleepRecorder()
    llm = ScriptedLLM([transient(), transient(), transient(), text("ok")])
    client = RetryingLLMClient(llm, sleep=sleep, jitter=random.Random(7).random)
    await client.complete(REQUEST)
    assert len(sleep.waits) == 3
    assert all(0 <= wait <= 2**n for n, wait in enumerate(sleep.waits))
    assert sleep.waits != [1.0, 2.0, 4.0]


def test_jitter_scales_only_the_exponential_part() -> None:
    assert backoff_s(transient(), 3, base_s=1.0, retry_after_cap_s=30, jitter=0.25) == 1.0
    assert backoff_s(transient(), 1, base_s=1.0, retry_after_cap_s=30, jitter=0.0) == 0.0
    assert backoff_s(transient(5.0), 1, base_s=1.0, retry_after_cap_s=30, jitter=0.0) == 5.0


async def test_zero_retries_means_one_try() -> None:
    llm = ScriptedLLM([transient()])
    with pytest.raises(TransientLLMError):
        await RetryingLLMClient(
            llm, max_retries=0, sleep=SleepRecorder(), jitter=NO_JITTER
        ).complete(REQUEST)


# --- end to end: real SDKs, real HTTP, scripted server -------------------------------------------


@pytest.fixture
def sleep() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def openai_retrying(openai_sdk: openai.AsyncOpenAI, sleep: SleepRecorder) -> RetryingLLMClient:
    return RetryingLLMClient(
        OpenAIClient(openai_sdk, model="gpt-test"), sleep=sleep, jitter=NO_JITTER
    )


async def test_429_with_retry_after_waits_as_told(
    openai_retrying: RetryingLLMClient, server: ScriptedServer, sleep: SleepRecorder
) -> None:
    server.push(rate_limited(retry_after=2), text("ok"))
    assert (await openai_retrying.complete(REQUEST)).content == "ok"
    assert sleep.waits == [2]
    assert len(server.requests) == 2


async def test_four_500s_wait_1_2_4_then_raise(
    openai_retrying: RetryingLLMClient, server: ScriptedServer, sleep: SleepRecorder
) -> None:
    server.push(*[http_error(500, "boom")] * 4)
    with pytest.raises(ProviderUnavailable):
        await openai_retrying.complete(REQUEST)
    assert sleep.waits == [1, 2, 4]
    assert len(server.requests) == 4
    server.assert_complete()


async def test_529_overloaded_is_retried(
    anthropic_sdk: anthropic.AsyncAnthropic, server: ScriptedServer, sleep: SleepRecorder
) -> None:
    client = RetryingLLMClient(
        AnthropicClient(anthropic_sdk, model="claude-test"), sleep=sleep, jitter=NO_JITTER
    )
    server.push(overloaded(), text("ok"))
    assert (await client.complete(REQUEST)).content == "ok"
    assert sleep.waits == [1]


async def test_timeout_is_retried(
    openai_retrying: RetryingLLMClient, server: ScriptedServer, sleep: SleepRecorder
) -> None:
    server.push(delayed(text("too late"), 4.0), text("ok"))  # the client gives up after 2 s
    assert (await openai_retrying.complete(REQUEST)).content == "ok"
    assert sleep.waits == [1]


async def test_timeouts_exhaust_into_llm_timeout(
    openai_sdk: openai.AsyncOpenAI, server: ScriptedServer, sleep: SleepRecorder
) -> None:
    client = RetryingLLMClient(
        OpenAIClient(openai_sdk, model="m"), sleep=sleep, jitter=NO_JITTER, max_retries=1
    )
    server.push(delayed(text("late"), 4.0), delayed(text("late"), 4.0))
    with pytest.raises(LLMTimeout):
        await client.complete(REQUEST)
    assert sleep.waits == [1]


@pytest.mark.parametrize(
    ("step", "expected"),
    [(http_error(401, "bad key"), AuthFailed), (http_error(400, "bad schema"), BadLLMRequest)],
)
async def test_permanent_http_errors_hit_the_server_once(
    openai_retrying: RetryingLLMClient,
    server: ScriptedServer,
    sleep: SleepRecorder,
    step: object,
    expected: type[Exception],
) -> None:
    server.push(step)  # type: ignore[arg-type]
    with pytest.raises(expected):
        await openai_retrying.complete(REQUEST)
    assert len(server.requests) == 1 and sleep.waits == []


async def test_server_dying_mid_run_is_a_connection_error(sleep: SleepRecorder) -> None:
    server = ScriptedServer([text("first")]).start()
    sdk = openai.AsyncOpenAI(api_key="k", base_url=server.base_url, max_retries=0, timeout=2.0)
    client = RetryingLLMClient(
        OpenAIClient(sdk, model="m"), sleep=sleep, jitter=NO_JITTER, max_retries=2
    )
    try:
        assert (await client.complete(REQUEST)).content == "first"
        server.kill()
        with pytest.raises(LLMConnectionError):
            await client.complete(REQUEST)
        assert sleep.waits == [1, 2]
    finally:
        await sdk.close()
        server.kill()


async def test_rate_limited_without_header_uses_backoff(
    openai_sdk: openai.AsyncOpenAI, server: ScriptedServer, sleep: SleepRecorder
) -> None:
    seen: list[type[TransientLLMError]] = []
    client = RetryingLLMClient(
        OpenAIClient(openai_sdk, model="m"),
        sleep=sleep,
        jitter=NO_JITTER,
        on_retry=lambda error, attempt, wait: seen.append(type(error)),
    )
    server.push(rate_limited(), rate_limited(), text("ok"))
    await client.complete(REQUEST)
    assert sleep.waits == [1, 2]
    assert seen == [RateLimited, RateLimited]


async def test_429_with_retry_after_above_the_cap_is_raised_without_a_second_request(
    openai_sdk: openai.AsyncOpenAI, server: ScriptedServer, sleep: SleepRecorder
) -> None:
    client = RetryingLLMClient(
        OpenAIClient(openai_sdk, model="m"), sleep=sleep, jitter=NO_JITTER, retry_after_cap_s=30
    )
    server.push(rate_limited(retry_after=120), text("never sent"))
    with pytest.raises(RateLimited) as caught:
        await client.complete(REQUEST)
    assert caught.value.retry_after_s == 120
    assert len(server.requests) == 1 and sleep.waits == []
