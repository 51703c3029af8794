"""OpenAI chat-completions adapter; also serves OpenAI-compatible servers (vLLM, llama.cpp).

Map: `to_wire_request` (→ `to_wire_messages`, `to_wire_tools`, `to_wire_tool_choice`) builds the
`chat.completions.create` arguments; `from_wire_reply` (→ `from_wire_usage`) reads the answer back;
`map_errors` turns SDK exceptions into `LLMError`s through `classify`. All but `OpenAIClient` and
`build_openai_client` are pure.

Wire details that servers disagree on, settled here:
- an assistant message carrying `tool_calls` sends `content: ""`, not null (llama.cpp rejects null);
- `tools` and `tool_choice` are omitted when there are no tools (OpenAI rejects a lone choice);
- local servers get `max_tokens`, OpenAI gets `max_completion_tokens` (o-series reject the former);
- an `output_schema` is `response_format`: llama.cpp's `{"type": "json_object", "schema": …}` for
  local servers (its server rejects `json_schema` with HTTP 500), OpenAI's `json_schema` otherwise;
- a `refusal` or a `content_filter` finish is `StopReason.REFUSAL`, and `complete` raises
  `ContentRefused` for it: a refusal is permanent (DESIGN.md, "The ReAct loop").
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import openai
from openai.types.chat import ChatCompletion
from openai.types.completion_usage import CompletionUsage

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
    "LOCAL_PLACEHOLDER_KEY",
    "OpenAIClient",
    "build_openai_client",
    "from_wire_reply",
    "from_wire_usage",
    "map_errors",
    "to_wire_messages",
    "to_wire_request",
    "to_wire_response_format",
    "to_wire_tool_choice",
    "to_wire_tools",
]

LOCAL_PLACEHOLDER_KEY = "not-needed"
"""Sent to local servers that need no key; the SDK refuses to start without one."""

MaxTokensField = Literal["max_completion_tokens", "max_tokens"]

_FINISH_REASONS = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_CALLS,
    "function_call": StopReason.TOOL_CALLS,
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.REFUSAL,
}


class OpenAIClient:
    """`LLMClient` over `AsyncOpenAI.chat.completions`; only translates, never retries."""

    def __init__(
        self,
        sdk_client: openai.AsyncOpenAI,
        *,
        model: str,
        provider: str = "openai",
        max_tokens_field: MaxTokensField = "max_completion_tokens",
    ) -> None:
        self._sdk = sdk_client
        self._model = model
        self._provider = provider
        self._max_tokens_field: MaxTokensField = max_tokens_field

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, request: LLMRequest) -> LLMReply:
        # The body goes out as `extra_body`: the SDK's own pass over typed parameters changes
        # nothing in these and cost 13% of the service's CPU with 500 evaluations in flight.
        wire = to_wire_request(
            request,
            model=self._model,
            max_tokens_field=self._max_tokens_field,
            local=self._provider == "local",
        )
        started = time.perf_counter()
        with map_errors(self._provider, self._model):
            completion = await self._sdk.chat.completions.create(
                model=wire.pop("model"), messages=[], extra_body=wire
            )
        latency_ms = (time.perf_counter() - started) * 1000
        if not completion.choices:
            raise classify(_facts_from_error_body(completion, self._provider, self._model))
        reply = from_wire_reply(completion)
        if reply.stop_reason is StopReason.REFUSAL and not reply.tool_calls:
            raise classify(
                ErrorFacts(self._provider, self._model, message=reply.content, is_refusal=True)
            )
        return reply.model_copy(
            update={"usage": reply.usage.model_copy(update={"latency_ms": latency_ms})}
        )

    async def aclose(self) -> None:
        await self._sdk.close()


def build_openai_client(settings: Settings, *, provider: str | None = None) -> OpenAIClient:
    """Build the adapter from settings, with SDK retries off (`retry.py` is the one retry layer).

    `provider="local"` means an OpenAI-compatible server: `llm_base_url` is required, the key may
    be absent (a placeholder is sent) and `max_tokens` is used.

    Raises:
        ConfigError: no key for api.openai.com, or no base URL for a local server.
    """
    quiet_body_loggers()
    provider = provider or settings.llm_provider or "openai"
    base_url = settings.llm_base_url
    if provider == "local" and base_url is None:
        raise ConfigError("REASONING_LLM_PROVIDER=local needs REASONING_LLM_BASE_URL")
    if settings.llm_api_key is not None:
        api_key = settings.llm_api_key.get_secret_value()
    elif base_url is not None:
        api_key = LOCAL_PLACEHOLDER_KEY
    else:
        raise ConfigError(f"REASONING_LLM_API_KEY is required for provider {provider!r}")
    sdk = openai.AsyncOpenAI(
        api_key=api_key,
        base_url=base_url,
        timeout=settings.llm_timeout_s,
        max_retries=0,
        # aiohttp's pool holds hundreds of calls in flight at a fraction of httpx's CPU cost
        # (bench: 300 concurrent requests, 11.6 s with httpx, 1.3 s with aiohttp).
        http_client=openai.DefaultAioHttpClient(),
    )
    field: MaxTokensField = "max_tokens" if provider == "local" else "max_completion_tokens"
    return OpenAIClient(sdk, model=settings.llm_model, provider=provider, max_tokens_field=field)


# --- to the wire -------------------------------------------------------------------------------


def to_wire_request(
    request: LLMRequest,
    *,
    model: str,
    max_tokens_field: MaxTokensField = "max_completion_tokens",
    local: bool = False,
) -> dict[str, Any]:
    """Keyword arguments for `chat.completions.create`; `local` for llama.cpp's server."""
    wire: dict[str, Any] = {
        "model": model,
        "messages": to_wire_messages(request.messages),
        max_tokens_field: request.max_output_tokens,
        "temperature": request.temperature,
    }
    if request.tools:
        wire["tools"] = to_wire_tools(request.tools)
        wire["tool_choice"] = to_wire_tool_choice(request.tool_choice)
    if request.output_schema is not None:
        wire["response_format"] = to_wire_response_format(request.output_schema, local=local)
    return wire


def to_wire_response_format(schema: dict[str, Any], *, local: bool) -> dict[str, Any]:
    """llama.cpp's form for local servers (grammar from the schema), OpenAI's structured output
    otherwise (not strict: strict mode rejects schemas with optional keys)."""
    if local:
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


def to_wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our messages as chat-completions messages, one for one, order kept."""
    return [_to_wire_message(message) for message in messages]


def _to_wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content,  # "" rather than null: llama.cpp rejects null here
            "tool_calls": [_to_wire_tool_call(call) for call in message.tool_calls],
        }
    return {"role": message.role, "content": message.content}


def _to_wire_tool_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_json},
    }


def to_wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def to_wire_tool_choice(choice: ToolChoice | str) -> str | dict[str, Any]:
    """`auto`, `required`, or the named-function object for one tool."""
    if choice in (ToolChoice.AUTO, ToolChoice.REQUIRED):
        return str(choice)
    return {"type": "function", "function": {"name": str(choice)}}


# --- from the wire -----------------------------------------------------------------------------


def from_wire_reply(completion: ChatCompletion) -> LLMReply:
    """The first choice as an `LLMReply`. The caller checks that there is a choice."""
    choice = completion.choices[0]
    message = choice.message
    tool_calls = tuple(
        ToolCall(
            id=call.id or f"call_{uuid.uuid4().hex[:12]}",
            name=call.function.name,
            arguments_json=call.function.arguments or "{}",
        )
        for call in message.tool_calls or ()
        if call.type == "function"
    )
    stop_reason = _FINISH_REASONS.get(str(choice.finish_reason), StopReason.OTHER)
    if tool_calls and stop_reason is StopReason.END_TURN:
        stop_reason = StopReason.TOOL_CALLS  # some local servers say "stop" after tool calls
    if message.refusal:
        stop_reason = StopReason.REFUSAL
    return LLMReply(
        content=message.refusal or message.content or "",
        tool_calls=tool_calls,
        stop_reason=stop_reason,
        usage=from_wire_usage(completion.usage),
        model=completion.model or "",
    )


def from_wire_usage(usage: CompletionUsage | None) -> Usage:
    """Prompt tokens include cached ones, as in our `Usage`; `llm_calls` is 1."""
    if usage is None:
        return Usage(llm_calls=1)
    details = usage.prompt_tokens_details
    return Usage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cached_input_tokens=(details.cached_tokens or 0) if details else 0,
        llm_calls=1,
    )


# --- errors --------------------------------------------------------------------------------------


@contextmanager
def map_errors(provider: str, model: str) -> Iterator[None]:
    """Re-raise any `openai.OpenAIError` as the `LLMError` that `classify` picks."""
    try:
        yield
    except openai.OpenAIError as exc:
        raise classify(facts_from_error(exc, provider=provider, model=model)) from exc


def facts_from_error(exc: openai.OpenAIError, *, provider: str, model: str) -> ErrorFacts:
    """Read status, body code/type, message and Retry-After off an OpenAI SDK exception."""
    if isinstance(exc, openai.APITimeoutError):
        return ErrorFacts(provider, model, message=str(exc), is_timeout=True)
    if isinstance(exc, openai.APIConnectionError):
        return ErrorFacts(provider, model, message=str(exc), is_connection_error=True)
    if isinstance(exc, openai.ContentFilterFinishReasonError):
        return ErrorFacts(provider, model, message=str(exc), is_refusal=True)
    if isinstance(exc, openai.APIStatusError):
        return ErrorFacts(
            provider,
            model,
            status=exc.status_code,
            error_code=exc.code,
            error_type=exc.type,
            message=_body_message(exc.body) or exc.message,
            retry_after_s=parse_retry_after(exc.response.headers),
        )
    return ErrorFacts(provider, model, message=f"{type(exc).__name__}: {exc}")


def _facts_from_error_body(completion: ChatCompletion, provider: str, model: str) -> ErrorFacts:
    """A 200 without choices: an error object relayed by a proxy, or a broken server."""
    raw = completion.model_dump()
    error = raw.get("error") if isinstance(raw.get("error"), dict) else {}
    return ErrorFacts(
        provider,
        model,
        error_code=error.get("code"),
        error_type=error.get("type"),
        message=str(error.get("message") or "reply had no choices"),
    )


def _body_message(body: object) -> str | None:
    """`message` of the error body; the SDK already unwrapped OpenAI's `{"error": {...}}`."""
    if isinstance(body, dict):
        message = body.get("message")
        return message if isinstance(message, str) else None
    return body if isinstance(body, str) and body else None
