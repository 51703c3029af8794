"""Build the configured `LLMClient` stack from `Settings` (see `base.py` for the wrap order)."""

from __future__ import annotations

import asyncio

from reasoning_service.llm.anthropic import build_anthropic_client
from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.forced_tools import ForcedToolClient
from reasoning_service.llm.openai import build_openai_client
from reasoning_service.llm.recording import InteractionSink, RecordingLLMClient
from reasoning_service.llm.retry import OnRetry, RetryingLLMClient, Sleep
from reasoning_service.llm.text_react import TextReActClient
from reasoning_service.settings import Settings, ToolCallingMode

__all__ = ["build_llm_client", "with_tool_calling_mode"]


def build_llm_client(
    settings: Settings,
    *,
    sink: InteractionSink | None = None,
    sleep: Sleep = asyncio.sleep,
    on_retry: OnRetry | None = None,
) -> LLMClient | None:
    """The adapter for `settings.llm_provider`, recorded per attempt, retried and speaking the
    configured tool-calling mode; None without a provider.

    Args:
        sink: receives one `LLMInteraction` per attempt; no recording when None.
        sleep, on_retry: passed to `RetryingLLMClient` (tests, metrics).

    Raises:
        ConfigError: the provider needs a key or base URL that is not configured.
    """
    if settings.llm_provider is None:
        return None
    client: LLMClient
    if settings.llm_provider == "anthropic":
        client = build_anthropic_client(settings)
    else:
        client = build_openai_client(settings, provider=settings.llm_provider)
    if sink is not None:
        client = RecordingLLMClient(client, sink)
    client = RetryingLLMClient(
        client,
        max_retries=settings.retry_max_attempts,
        base_s=settings.retry_base_s,
        retry_after_cap_s=settings.retry_after_cap_s,
        sleep=sleep,
        on_retry=on_retry,
    )
    return with_tool_calling_mode(client, settings.effective_tool_calling_mode)


def with_tool_calling_mode(client: LLMClient, mode: ToolCallingMode) -> LLMClient:
    """Wrap `client` so a model that cannot pick tools natively still runs the same loop:
    `text` speaks Thought/Action/Action Input, `forced` forces one `act` function by name."""
    match mode:
        case "text":
            return TextReActClient(client)
        case "forced":
            return ForcedToolClient(client)
    return client
