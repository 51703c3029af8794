"""Turn the facts of a failed provider call into the right `LLMError`; status rules live only here.

Adapters read facts off their SDK's exception (`ErrorFacts`) and `raise classify(facts) from exc`.
Rules, first match wins::

    facts                                          error                kind
    ─────────────────────────────────────────────  ───────────────────  ─────────
    refusal (content filter, refusal code)          ContentRefused       permanent
    error type `overloaded_error` (any status,      ProviderUnavailable  transient
      incl. an error event mid-stream)
    timeout                                         LLMTimeout           transient
    connection error                                LLMConnectionError   transient
    429 with `insufficient_quota`                   QuotaExhausted       permanent
    429                                             RateLimited          transient
    408, 409, 499 (client closed), 5xx, 529         ProviderUnavailable  transient
    401, 403                                        AuthFailed           permanent
    402 (billing)                                   QuotaExhausted       permanent
    404                                             ModelNotFound        permanent
    400 and any other 4xx (schema, context length,  BadLLMRequest        permanent
      vLLM tool-parser misconfiguration …)
    no status, SDK marked it retryable              ProviderUnavailable  transient
    no status, `api_error`/`server_error`/          ProviderUnavailable  transient
      `rate_limit_error` body (an error event         / RateLimited
      inside a 200 stream)
    anything else                                   PermanentLLMError    permanent

Unknown errors are permanent on purpose: retrying what we do not understand only delays the
fallback. Messages get a hint for the two 400s that need an operator (context length, tool parser)
and never carry an API key (provider messages sometimes echo a masked one; we mask it again).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import re
from collections.abc import Mapping
from dataclasses import dataclass

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
)

__all__ = ["ErrorFacts", "classify", "parse_retry_after"]

_QUOTA_CODES = frozenset({"insufficient_quota", "billing_error", "billing_hard_limit_reached"})
_REFUSAL_CODES = frozenset({"content_filter", "content_policy_violation", "refusal"})
_CONTEXT_LENGTH = re.compile(
    r"context[_ ]length|maximum context|prompt is too long|too many tokens", re.IGNORECASE
)
_TOOL_PARSER = re.compile(
    r"tool[-_ ]call[-_ ]parser|enable[-_]auto[-_]tool[-_]choice|tool choice requires", re.IGNORECASE
)
_API_KEY = re.compile(r"\b(sk-[A-Za-z0-9]{0,4})[A-Za-z0-9_*\-]{6,}")


@dataclass(frozen=True, slots=True)
class ErrorFacts:
    """What an adapter could learn about a failed call, independent of the SDK it came from."""

    provider: str
    model: str
    status: int | None = None
    """HTTP status, when the server answered at all."""
    error_code: str | None = None
    """Machine code from the body (OpenAI `error.code`, Anthropic `error.details.error_code`)."""
    error_type: str | None = None
    """Category from the body (OpenAI `error.type`, Anthropic `error.type`)."""
    message: str = ""
    retry_after_s: float | None = None
    """From `retry-after-ms` or `Retry-After`; see `parse_retry_after`."""
    is_timeout: bool = False
    is_connection_error: bool = False
    is_refusal: bool = False
    """The provider declined to answer (content filter, refusal stop reason)."""
    sdk_says_retryable: bool = False
    """The SDK raised an error it documents as retryable (e.g. `anthropic.RetryableError`)."""


def classify(facts: ErrorFacts) -> LLMError:
    """Return the `LLMError` subclass the table in the module docstring assigns to `facts`."""
    error_type = _type_for(facts)
    return error_type(
        _describe(facts, error_type),
        provider=facts.provider,
        model=facts.model,
        status=facts.status,
        retry_after_s=facts.retry_after_s,
    )


def _type_for(facts: ErrorFacts) -> type[LLMError]:
    labels = {facts.error_code, facts.error_type}
    if facts.is_refusal or labels & _REFUSAL_CODES:
        return ContentRefused
    if "overloaded_error" in labels:
        return ProviderUnavailable
    if facts.is_timeout:
        return LLMTimeout
    if facts.is_connection_error:
        return LLMConnectionError
    if facts.status is None or facts.status < 400:
        return _type_without_status(facts)
    return _type_for_status(facts.status, labels)


def _type_for_status(status: int, labels: set[str | None]) -> type[LLMError]:
    if status == 429:
        return QuotaExhausted if labels & _QUOTA_CODES else RateLimited
    if status in (408, 409, 499, 529) or status >= 500:
        return ProviderUnavailable
    if status in (401, 403):
        return AuthFailed
    if status == 402:
        return QuotaExhausted
    if status == 404:
        return ModelNotFound
    return BadLLMRequest


def _type_without_status(facts: ErrorFacts) -> type[LLMError]:
    if facts.error_type == "rate_limit_error":
        return RateLimited
    if facts.sdk_says_retryable or facts.error_type in ("api_error", "server_error"):
        return ProviderUnavailable
    return PermanentLLMError


def _describe(facts: ErrorFacts, error_type: type[LLMError]) -> str:
    parts = [f"{facts.provider}/{facts.model}:"]
    if facts.status is not None:
        parts.append(f"HTTP {facts.status}")
    if label := facts.error_code or facts.error_type:
        parts.append(f"[{label}]")
    parts.append(redact(facts.message) or error_type.__name__)
    text = " ".join(parts)
    if error_type is BadLLMRequest and _TOOL_PARSER.search(facts.message):
        text += " (hint: the server needs native tool calling enabled, or use text ReAct mode)"
    elif error_type is BadLLMRequest and _CONTEXT_LENGTH.search(facts.message):
        text += " (hint: the conversation exceeds the model's context window)"
    return text


def redact(message: str) -> str:
    """Mask anything shaped like an API key, however the provider already masked it."""
    return _API_KEY.sub(r"\1***", message)


def parse_retry_after(
    headers: Mapping[str, str], *, now: dt.datetime | None = None
) -> float | None:
    """Seconds the server asked us to wait, or None.

    Reads `retry-after-ms` first (OpenAI and Anthropic send it, more precise), then `Retry-After`
    as seconds (floats tolerated) or as an HTTP date. Negative or unparsable values are ignored.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    if (millis := _as_float(lowered.get("retry-after-ms"))) is not None:
        return millis / 1000 if millis >= 0 else None
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    if (seconds := _as_float(raw)) is not None:
        return seconds if seconds >= 0 else None
    return _seconds_until(raw, now or dt.datetime.now(dt.UTC))


def _as_float(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        return None


def _seconds_until(http_date: str, now: dt.datetime) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - now).total_seconds())
