"""Anthropic Messages adapter.

Map: `to_wire_request` (→ `to_wire_system`, `to_wire_messages`, `to_wire_tools`,
`to_wire_tool_choice`) builds the `messages.create` arguments; `from_wire_reply`
(→ `from_wire_usage`) reads the answer back; `map_errors` turns SDK exceptions into `LLMError`s
through `classify`. All but `AnthropicClient` and `build_anthropic_client` are pure.

How our flat conversation maps onto the Messages API:
- system messages become the top-level `system` list of text blocks; the last one carries
  `cache_control: {"type": "ephemeral"}`, so tools + system prompt form a cached prefix;
- assistant tool calls are `tool_use` blocks; tool results are `tool_result` blocks (with
  `is_error`) inside a *user* message, and consecutive tool/user messages merge into one user
  message, because the API wants roles to alternate and results to answer the previous turn;
- `temperature` is not sent: the Messages API of SDK 2.x takes no sampling parameters;
- `input_tokens` in our `Usage` counts every prompt token: Anthropic's uncached `input_tokens`
  plus `cache_read_input_tokens` plus `cache_creation_input_tokens`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anthropic
from anthropic.types import Message as WireMessage
from anthropic.types import Usage as WireUsage

from reasoning_service.errors import ConfigError
from reasoning_service.llm.classify import ErrorFacts, classify, parse_retry_after
from reasoning_service.logging_setup import quiet_body_loggers
from reasoning_service.models.conversation import (
    LLMReply,
    LLMRequest,
    Message,
    StopReason,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from reasoning_service.models.result import Usage
from reasoning_service.settings import Settings

__all__ = [
    "AnthropicClient",
    "build_anthropic_client",
    "from_wire_reply",
    "from_wire_usage",
    "map_errors",
    "to_wire_messages",
    "to_wire_request",
    "to_wire_system",
    "to_wire_tool_choice",
    "to_wire_tools",
]

_CACHE_BREAKPOINT = {"type": "ephemeral"}

_STOP_REASONS = {
    "end_turn": StopReason.END_TURN,
    "stop_sequence": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_CALLS,
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "refusal": StopReason.REFUSAL,
}


class AnthropicClient:
    """`LLMClient` over `AsyncAnthropic.messages`; only translates, never retries."""

    def __init__(
        self, sdk_client: anthropic.AsyncAnthropic, *, model: str, provider: str = "anthropic"
    ) -> None:
        self._sdk = sdk_client
        self._model = model
        self._provider = provider

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, request: LLMRequest) -> LLMReply:
        # The body goes out as `extra_body`: the SDK's own pass over typed parameters changes
        # nothing in these and costs CPU on every call (anthropic-sdk-python#1195).
        wire = to_wire_request(request, model=self._model)
        started = time.perf_counter()
        with map_errors(self._provider, self._model):
            message = await self._sdk.messages.create(
                model=wire.pop("model"),
                messages=[],
                max_tokens=wire.pop("max_tokens"),
                extra_body=wire,
            )
        latency_ms = (time.perf_counter() - started) * 1000
        if message.type != "message":
            raise classify(_facts_from_error_body(message, self._provider, self._model))
        reply = from_wire_reply(message)
        if reply.stop_reason is StopReason.REFUSAL and not reply.tool_calls:
            raise classify(
                ErrorFacts(self._provider, self._model, message=reply.content, is_refusal=True)
            )
        return reply.model_copy(
            update={"usage": reply.usage.model_copy(update={"latency_ms": latency_ms})}
        )

    async def aclose(self) -> None:
        await self._sdk.close()


def build_anthropic_client(settings: Settings) -> AnthropicClient:
    """Build the adapter from settings, with SDK retries off (`retry.py` is the one retry layer).

    Raises:
        ConfigError: no key and no base URL (a proxy or a test server may need none).
    """
    quiet_body_loggers()
    if settings.llm_api_key is not None:
        api_key = settings.llm_api_key.get_secret_value()
    elif settings.llm_base_url is not None:
        api_key = "not-needed"
    else:
        raise ConfigError("REASONING_LLM_API_KEY is required for provider 'anthropic'")
    sdk = anthropic.AsyncAnthropic(
        api_key=api_key,
        base_url=settings.llm_base_url,
        timeout=settings.llm_timeout_s,
        max_retries=0,
        http_client=anthropic.DefaultAioHttpClient(),  # see build_openai_client
    )
    return AnthropicClient(sdk, model=settings.llm_model)


# --- to the wire -------------------------------------------------------------------------------


def to_wire_request(request: LLMRequest, *, model: str) -> dict[str, Any]:
    """Keyword arguments for `messages.create`.

    Raises:
        ConfigError: an `output_schema`, which this adapter does not send (use a tool).
    """
    if request.output_schema is not None:
        raise ConfigError("the Anthropic adapter has no output_schema: ask for a tool call")
    wire: dict[str, Any] = {
        "model": model,
        "messages": to_wire_messages(request.messages),
        "max_tokens": request.max_output_tokens,
    }
    if system := to_wire_system(request.messages):
        wire["system"] = system
    if request.tools:
        wire["tools"] = to_wire_tools(request.tools)
        wire["tool_choice"] = to_wire_tool_choice(request.tool_choice)
    return wire


def to_wire_system(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """System messages as text blocks, the last one marked as the end of the cached prefix."""
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": message.content}
        for message in messages
        if message.role == "system" and message.content
    ]
    if blocks:
        blocks[-1]["cache_control"] = dict(_CACHE_BREAKPOINT)
    return blocks


def to_wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Non-system messages as alternating user/assistant turns of content blocks."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _to_wire_blocks(message)
        if not blocks:
            continue  # the API rejects empty content; an empty turn says nothing anyway
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _to_wire_blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content,
        }
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call)}
        for call in message.tool_calls
    )
    return blocks


def _tool_input(call: ToolCall) -> dict[str, Any]:
    """`tool_use.input` must be an object; arguments that never parsed are kept, wrapped."""
    try:
        parsed = json.loads(call.arguments_json or "{}")
    except json.JSONDecodeError:
        return {"_unparsed_arguments": call.arguments_json}
    return parsed if isinstance(parsed, dict) else {"_unparsed_arguments": call.arguments_json}


def to_wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


def to_wire_tool_choice(choice: ToolChoice | str) -> dict[str, Any]:
    """`auto`, `any` (our REQUIRED), or one named tool."""
    if choice == ToolChoice.AUTO:
        return {"type": "auto"}
    if choice == ToolChoice.REQUIRED:
        return {"type": "any"}
    return {"type": "tool", "name": str(choice)}


# --- from the wire -----------------------------------------------------------------------------


def from_wire_reply(message: WireMessage) -> LLMReply:
    """Text blocks joined, `tool_use` blocks as tool calls (input re-serialised as JSON)."""
    texts: list[str] = []
    tool_calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            tool_calls.append(
                ToolCall(id=block.id, name=block.name, arguments_json=json.dumps(block.input))
            )
    return LLMReply(
        content="".join(texts),
        tool_calls=tuple(tool_calls),
        stop_reason=_STOP_REASONS.get(str(message.stop_reason), StopReason.OTHER),
        usage=from_wire_usage(message.usage),
        model=message.model or "",
    )


def from_wire_usage(usage: WireUsage | None) -> Usage:
    """All prompt tokens as `input_tokens`, cache reads as `cached_input_tokens`."""
    if usage is None:
        return Usage(llm_calls=1)
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
    return Usage(
        input_tokens=(usage.input_tokens or 0) + cache_read + cache_write,
        output_tokens=usage.output_tokens or 0,
        cached_input_tokens=cache_read,
        llm_calls=1,
    )


# --- errors --------------------------------------------------------------------------------------


@contextmanager
def map_errors(provider: str, model: str) -> Iterator[None]:
    """Re-raise any `anthropic.AnthropicError` as the `LLMError` that `classify` picks."""
    try:
        yield
    except anthropic.AnthropicError as exc:
        raise classify(facts_from_error(exc, provider=provider, model=model)) from exc


def facts_from_error(exc: anthropic.AnthropicError, *, provider: str, model: str) -> ErrorFacts:
    """Read status, error type/code, message and Retry-After off an Anthropic SDK exception.

    An error event inside a stream arrives as an `APIStatusError` whose status is the stream's
    200; its `overloaded_error` type is what makes it transient.
    """
    if isinstance(exc, anthropic.APITimeoutError):
        return ErrorFacts(provider, model, message=str(exc), is_timeout=True)
    if isinstance(exc, anthropic.APIConnectionError):
        return ErrorFacts(provider, model, message=str(exc), is_connection_error=True)
    if isinstance(exc, anthropic.APIStatusError):
        return ErrorFacts(
            provider,
            model,
            status=exc.status_code,
            error_code=exc.error_code,
            error_type=exc.type,
            message=exc.api_message or exc.message,
            retry_after_s=parse_retry_after(exc.response.headers),
        )
    return ErrorFacts(
        provider,
        model,
        message=f"{type(exc).__name__}: {exc}",
        sdk_says_retryable=isinstance(exc, anthropic.RetryableError),
    )


def _facts_from_error_body(message: WireMessage, provider: str, model: str) -> ErrorFacts:
    """A 200 whose body is an error object (what a proxy relays when a stream fails midway)."""
    raw = message.model_dump()
    error = raw.get("error") if isinstance(raw.get("error"), dict) else {}
    return ErrorFacts(
        provider,
        model,
        error_type=error.get("type") or "api_error",
        message=str(error.get("message") or "error body in a 200 reply"),
    )
