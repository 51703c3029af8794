"""Every exception class the SDKs export maps to a transient or permanent `LLMError`.

Like httpx's `test_httpcore_all_exceptions_mapped`: when an SDK upgrade adds an exception, this
fails until someone decides what it means for us.
"""

from __future__ import annotations

import anthropic
import httpx2
import openai
import pytest
from anthropic._error_classes import ERROR_CLASSES
from openai.types.chat import ChatCompletion

from reasoning_service.errors import (
    LLMConnectionError,
    LLMError,
    LLMTimeout,
    PermanentLLMError,
    ProviderUnavailable,
    QuotaExhausted,
    RateLimited,
    TransientLLMError,
)
from reasoning_service.llm import anthropic as anthropic_adapter
from reasoning_service.llm import openai as openai_adapter

_REQUEST = httpx2.Request("POST", "http://127.0.0.1/v1/messages")
_TRANSIENT_STATUSES = {408, 409, 429, 499, 500, 501, 502, 503, 504, 529}


def _exported(module: object, base: type[BaseException]) -> list[type[BaseException]]:
    found = {
        value
        for name in dir(module)
        if not name.startswith("_")
        and isinstance(value := getattr(module, name), type)
        and issubclass(value, base)
    }
    return sorted(found, key=lambda cls: cls.__name__)


def _status_of(cls: type[BaseException]) -> int:
    status = getattr(cls, "status_code", None)
    return status if isinstance(status, int) else 500


def _build_openai(cls: type[BaseException]) -> BaseException:
    response = httpx2.Response(_status_of(cls), request=_REQUEST)
    if issubclass(cls, openai.OAuthError):
        return cls(response=response, body=None)
    if issubclass(cls, openai.APIStatusError):
        return cls("boom", response=response, body={"message": "boom", "code": None})
    if issubclass(cls, openai.APIConnectionError):
        return cls(request=_REQUEST)
    if issubclass(cls, openai.APIResponseValidationError):
        return cls(httpx2.Response(200, request=_REQUEST), None)
    if issubclass(cls, openai.APIError):
        return cls("boom", _REQUEST, body=None)
    if issubclass(cls, openai.LengthFinishReasonError):
        return cls(completion=ChatCompletion.model_construct(usage=None))
    if issubclass(cls, openai.ContentFilterFinishReasonError):
        return cls()
    if cls.__name__ == "WebSocketConnectionClosedError":
        return cls("closed", unsent_messages=[])
    return cls("boom")


def _build_anthropic(cls: type[BaseException], status: int | None = None, code: str | None = None):
    response = httpx2.Response(status or _status_of(cls), request=_REQUEST)
    if issubclass(cls, anthropic.APIStatusError):
        error: dict[str, object] = {"type": "api_error", "message": "boom"}
        if code is not None:
            error["details"] = {"error_code": code}
        return cls("boom", response=response, body={"type": "error", "error": error})
    if issubclass(cls, anthropic.APIConnectionError):
        return cls(request=_REQUEST)
    if issubclass(cls, anthropic.APIResponseValidationError):
        return cls(httpx2.Response(200, request=_REQUEST), None)
    if issubclass(cls, anthropic.APIError):
        return cls("boom", _REQUEST, body=None)
    return cls("boom")


def _mapped(map_errors, exc: BaseException) -> LLMError:  # type: ignore[no-untyped-def]
    with pytest.raises(LLMError) as caught, map_errors("p", "m"):
        raise exc
    assert caught.value.__cause__ is exc
    return caught.value


@pytest.mark.parametrize("cls", _exported(openai, openai.OpenAIError), ids=lambda c: c.__name__)
def test_every_openai_exception_is_mapped(cls: type[BaseException]) -> None:
    error = _mapped(openai_adapter.map_errors, _build_openai(cls))
    assert isinstance(error, TransientLLMError | PermanentLLMError)
    if issubclass(cls, openai.APIStatusError):
        assert isinstance(error, TransientLLMError) == (_status_of(cls) in _TRANSIENT_STATUSES)


@pytest.mark.parametrize(
    "cls", _exported(anthropic, anthropic.AnthropicError), ids=lambda c: c.__name__
)
def test_every_anthropic_exception_is_mapped(cls: type[BaseException]) -> None:
    error = _mapped(anthropic_adapter.map_errors, _build_anthropic(cls))
    assert isinstance(error, TransientLLMError | PermanentLLMError)


@pytest.mark.parametrize(
    ("key", "cls"), sorted(ERROR_CLASSES.items(), key=str), ids=lambda v: str(v)
)
def test_every_anthropic_status_class_is_mapped_by_status(
    key: tuple[int, str | None], cls: type[BaseException]
) -> None:
    status, code = key
    error = _mapped(anthropic_adapter.map_errors, _build_anthropic(cls, status, code))
    assert isinstance(error, TransientLLMError) == (status in _TRANSIENT_STATUSES)
    assert error.status == status


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (openai.APITimeoutError(request=_REQUEST), LLMTimeout),
        (openai.APIConnectionError(request=_REQUEST), LLMConnectionError),
        (
            openai.RateLimitError(
                "quota",
                response=httpx2.Response(429, request=_REQUEST),
                body={
                    "message": "quota",
                    "code": "insufficient_quota",
                    "type": "insufficient_quota",
                },
            ),
            QuotaExhausted,
        ),
        (
            openai.RateLimitError(
                "slow", response=httpx2.Response(429, request=_REQUEST), body=None
            ),
            RateLimited,
        ),
    ],
)
def test_openai_specific_mappings(exc: BaseException, expected: type[LLMError]) -> None:
    assert type(_mapped(openai_adapter.map_errors, exc)) is expected


def test_anthropic_overloaded_mid_stream_is_transient() -> None:
    """A stream error event arrives as an APIStatusError with the stream's 200 status."""
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    exc = anthropic.APIStatusError(
        "Overloaded", response=httpx2.Response(200, request=_REQUEST), body=body
    )
    assert type(_mapped(anthropic_adapter.map_errors, exc)) is ProviderUnavailable
    timeout = anthropic.APITimeoutError(request=_REQUEST)
    assert type(_mapped(anthropic_adapter.map_errors, timeout)) is LLMTimeout
    retryable = anthropic.RetryableError("middleware says retry")
    assert type(_mapped(anthropic_adapter.map_errors, retryable)) is ProviderUnavailable
