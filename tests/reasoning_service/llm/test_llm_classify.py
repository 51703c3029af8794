"""The status → error type table of `llm/classify.py`, row by row."""

from __future__ import annotations

import datetime as dt

import pytest

from reasoning_service.errors import (
    AuthFailed,
    BadLLMRequest,
    ContentRefused,
    LLMConnectionError,
    LLMError,
    LLMTimeout,
    ModelNotFound,
    PermanentLLMError,
    ProviderUnavailable,
    QuotaExhausted,
    RateLimited,
    TransientLLMError,
)
from reasoning_service.llm.classify import ErrorFacts, classify, parse_retry_after, redact


def facts(**fields: object) -> ErrorFacts:
    return ErrorFacts("openai", "gpt-test", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"status": 408}, ProviderUnavailable),
        ({"status": 409}, ProviderUnavailable),
        ({"status": 429}, RateLimited),
        ({"status": 429, "error_code": "insufficient_quota"}, QuotaExhausted),
        ({"status": 429, "error_type": "insufficient_quota"}, QuotaExhausted),
        ({"status": 500}, ProviderUnavailable),
        ({"status": 502}, ProviderUnavailable),
        ({"status": 503}, ProviderUnavailable),
        ({"status": 504}, ProviderUnavailable),
        ({"status": 529}, ProviderUnavailable),
        ({"status": 529, "error_type": "overloaded_error"}, ProviderUnavailable),
        ({"status": 200, "error_type": "overloaded_error"}, ProviderUnavailable),  # mid-stream
        ({"error_type": "overloaded_error"}, ProviderUnavailable),
        ({"error_type": "api_error"}, ProviderUnavailable),
        ({"error_type": "rate_limit_error"}, RateLimited),
        ({"is_timeout": True}, LLMTimeout),
        ({"is_connection_error": True}, LLMConnectionError),
        ({"sdk_says_retryable": True}, ProviderUnavailable),
        ({"status": 400}, BadLLMRequest),
        ({"status": 400, "error_code": "context_length_exceeded"}, BadLLMRequest),
        ({"status": 400, "error_code": "content_filter"}, ContentRefused),
        ({"status": 401}, AuthFailed),
        ({"status": 402, "error_type": "billing_error"}, QuotaExhausted),
        ({"status": 403}, AuthFailed),
        ({"status": 404}, ModelNotFound),
        ({"status": 413}, BadLLMRequest),
        ({"status": 418}, BadLLMRequest),
        ({"status": 422}, BadLLMRequest),
        ({"is_refusal": True}, ContentRefused),
        ({}, PermanentLLMError),
    ],
)
def test_classify_table(fields: dict[str, object], expected: type[LLMError]) -> None:
    error = classify(facts(**fields))
    assert type(error) is expected
    assert error.provider == "openai" and error.model == "gpt-test"


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503, 529])
def test_transient_statuses_are_transient(status: int) -> None:
    assert isinstance(classify(facts(status=status)), TransientLLMError)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_permanent_statuses_are_permanent(status: int) -> None:
    error = classify(facts(status=status))
    assert isinstance(error, PermanentLLMError) and error.kind == "permanent"


def test_error_keeps_status_and_retry_after() -> None:
    error = classify(facts(status=429, retry_after_s=2.5, message="slow down"))
    assert (error.status, error.retry_after_s, error.kind) == (429, 2.5, "transient")
    assert "HTTP 429" in str(error) and "slow down" in str(error)


def test_vllm_tool_parser_misconfiguration_is_permanent_with_a_hint() -> None:
    message = (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    )
    error = classify(facts(status=400, error_type="BadRequestError", message=message))
    assert isinstance(error, BadLLMRequest)
    assert "text ReAct" in str(error)


def test_context_length_gets_a_hint() -> None:
    message = "This model's maximum context length is 8192 tokens."
    assert "context window" in str(classify(facts(status=400, message=message)))


def test_api_keys_in_provider_messages_are_masked() -> None:
    message = "Incorrect API key provided: sk-proj-abcdEFGH1234****wxyz."
    assert "abcdEFGH" not in str(classify(facts(status=401, message=message)))
    assert redact("key sk-live1234567890") == "key sk-live***"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"Retry-After": "2", "retry-after-ms": "250"}, 0.25),
        ({"Retry-After": "Thu, 01 Jan 2026 00:00:30 GMT"}, 30.0),
        ({"Retry-After": "Wed, 31 Dec 2025 23:59:00 GMT"}, 0.0),  # in the past
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "-3"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert parse_retry_after(headers, now=now) == expected
