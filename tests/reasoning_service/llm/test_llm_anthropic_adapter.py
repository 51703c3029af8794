"""`AnthropicClient` through the real `anthropic` SDK against the scripted server on 127.0.0.1."""

from __future__ import annotations

import json

import anthropic
import pytest

from reasoning_service.errors import (
    AuthFailed,
    BadLLMRequest,
    ConfigError,
    ContentRefused,
    ProviderUnavailable,
    RateLimited,
)
from reasoning_service.llm.anthropic import (
    AnthropicClient,
    build_anthropic_client,
    from_wire_usage,
    to_wire_messages,
    to_wire_tool_choice,
)
from reasoning_service.models.conversation import (
    LLMReply,
    LLMRequest,
    Message,
    StopReason,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from reasoning_service.settings import Settings
from reasoning_service.testing import (
    ScriptedServer,
    error_in_body,
    http_error,
    overloaded,
    text,
    tool_call,
    tool_calls,
)

FACTS_GET = ToolSpec(
    name="facts_get",
    description="Read one fact of the case.",
    parameters={"type": "object", "properties": {"field": {"type": "string"}}},
)
SYSTEM = Message(role="system", content="You verify policy criteria.")
USER = Message(role="user", content="Is the patient at least 18?")


def request(*messages: Message, tool_choice: ToolChoice | str = ToolChoice.AUTO) -> LLMRequest:
    return LLMRequest(
        messages=(SYSTEM, USER, *messages), tools=(FACTS_GET,), tool_choice=tool_choice
    )


@pytest.fixture
def client(anthropic_sdk: anthropic.AsyncAnthropic) -> AnthropicClient:
    return AnthropicClient(anthropic_sdk, model="claude-test")


async def test_tool_use_round_trip_merges_tool_results(
    client: AnthropicClient, server: ScriptedServer
) -> None:
    server.push(
        tool_calls(
            tool_call("facts_get", {"field": "age"}, id="toolu_1"),
            tool_call("facts_get", {"field": "dob"}, id="toolu_2"),
            content="Let me check.",
        ),
        text("Both read."),
    )
    first = await client.complete(request())
    assert first.content == "Let me check."
    assert first.stop_reason is StopReason.TOOL_CALLS
    assert [(c.id, json.loads(c.arguments_json)) for c in first.tool_calls] == [
        ("toolu_1", {"field": "age"}),
        ("toolu_2", {"field": "dob"}),
    ]
    second = await client.complete(
        request(
            Message(role="assistant", content=first.content, tool_calls=first.tool_calls),
            Message(role="tool", tool_call_id="toolu_1", content="age = 42"),
            Message(role="tool", tool_call_id="toolu_2", content="no such field", is_error=True),
        )
    )
    assert second.content == "Both read." and second.stop_reason is StopReason.END_TURN

    body = server.requests[1].body
    assert body["system"] == [
        {"type": "text", "text": SYSTEM.content, "cache_control": {"type": "ephemeral"}}
    ]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant, results = body["messages"][1]["content"], body["messages"][2]["content"]
    assert [b["type"] for b in assistant] == ["text", "tool_use", "tool_use"]
    assert assistant[1]["input"] == {"field": "age"}
    assert results == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "age = 42"},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_2",
            "content": "no such field",
            "is_error": True,
        },
    ]
    assert body["tools"] == [
        {
            "name": "facts_get",
            "description": FACTS_GET.description,
            "input_schema": FACTS_GET.parameters,
        }
    ]


async def test_usage_counts_cached_prompt_tokens(
    client: AnthropicClient, server: ScriptedServer
) -> None:
    server.push(text("one"), text("two"))
    first = await client.complete(request())
    second = await client.complete(request(Message(role="assistant", content="one")))
    assert first.usage.cached_input_tokens == 0
    assert second.usage.cached_input_tokens > 0
    assert second.usage.input_tokens > second.usage.cached_input_tokens


def test_from_wire_usage_adds_cache_reads_and_writes() -> None:
    usage = anthropic.types.Usage(
        input_tokens=10, output_tokens=5, cache_read_input_tokens=100, cache_creation_input_tokens=7
    )
    converted = from_wire_usage(usage)
    assert (converted.input_tokens, converted.cached_input_tokens) == (117, 100)
    assert (converted.output_tokens, converted.llm_calls) == (5, 1)


def test_tool_choice_mapping() -> None:
    assert to_wire_tool_choice(ToolChoice.AUTO) == {"type": "auto"}
    assert to_wire_tool_choice(ToolChoice.REQUIRED) == {"type": "any"}
    assert to_wire_tool_choice("finish") == {"type": "tool", "name": "finish"}


def test_a_nudge_after_tool_results_joins_the_same_user_turn() -> None:
    call = ToolCall(id="t1", name="facts_get", arguments_json="not json")
    wire = to_wire_messages(
        [
            USER,
            Message(role="assistant", tool_calls=(call,)),
            Message(role="tool", tool_call_id="t1", content="42"),
            Message(role="user", content="Now call finish."),
        ]
    )
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert wire[1]["content"] == [
        {
            "type": "tool_use",
            "id": "t1",
            "name": "facts_get",
            "input": {"_unparsed_arguments": "not json"},
        }
    ]
    assert [b["type"] for b in wire[2]["content"]] == ["tool_result", "text"]


async def test_refusal_stop_reason_is_content_refused(
    client: AnthropicClient, server: ScriptedServer
) -> None:
    server.push(LLMReply(content="I won't.", stop_reason=StopReason.REFUSAL))
    with pytest.raises(ContentRefused):
        await client.complete(request())


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (overloaded(), ProviderUnavailable),
        (error_in_body("overloaded_error"), ProviderUnavailable),  # failed mid-stream
        (http_error(429, retry_after=3), RateLimited),
        (http_error(401, "invalid x-api-key"), AuthFailed),
        (http_error(400, "prompt is too long: 250000 tokens > 200000 maximum"), BadLLMRequest),
    ],
)
async def test_errors_on_the_wire_are_classified(
    client: AnthropicClient, server: ScriptedServer, step: object, expected: type[Exception]
) -> None:
    server.push(step)  # type: ignore[arg-type]
    with pytest.raises(expected):
        await client.complete(request())


async def test_retry_after_is_read_from_anthropic_headers(
    client: AnthropicClient, server: ScriptedServer
) -> None:
    server.push(http_error(429, retry_after_ms=1500))
    with pytest.raises(RateLimited) as caught:
        await client.complete(request())
    assert caught.value.retry_after_s == 1.5
    assert isinstance(caught.value.__cause__, anthropic.RateLimitError)


def test_factory_turns_sdk_retries_off() -> None:
    client = build_anthropic_client(
        Settings(llm_provider="anthropic", llm_api_key="sk-ant-secret", llm_model="claude-x")
    )
    assert client._sdk.max_retries == 0 and client.model == "claude-x"
    with pytest.raises(ConfigError):
        build_anthropic_client(Settings(llm_provider="anthropic"))


def test_an_output_schema_is_refused_rather_than_dropped() -> None:
    from reasoning_service.llm.anthropic import to_wire_request
    from reasoning_service.models.conversation import LLMRequest, Message

    schema_request = LLMRequest(
        messages=(Message(role="user", content="?"),), output_schema={"type": "object"}
    )
    with pytest.raises(ConfigError, match="output_schema"):
        to_wire_request(schema_request, model="claude-test")
