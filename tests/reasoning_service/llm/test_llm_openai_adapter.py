"""`OpenAIClient` through the real `openai` SDK against the scripted server on 127.0.0.1."""

from __future__ import annotations

import json

import openai
import pytest

from reasoning_service.errors import (
    AuthFailed,
    ConfigError,
    ContentRefused,
    ModelNotFound,
    ProviderUnavailable,
    QuotaExhausted,
)
from reasoning_service.llm.openai import (
    OpenAIClient,
    build_openai_client,
    to_wire_messages,
    to_wire_request,
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
    text,
    tool_call,
    tool_calls,
)

FACTS_GET = ToolSpec(
    name="facts_get",
    description="Read one fact of the case.",
    parameters={"type": "object", "properties": {"field": {"type": "string"}}},
)
FINISH = ToolSpec(name="finish", description="Give the verdict.", parameters={"type": "object"})
SYSTEM = Message(role="system", content="You verify policy criteria.")
USER = Message(role="user", content="Is the patient at least 18?")


def request(*messages: Message, tool_choice: ToolChoice | str = ToolChoice.AUTO) -> LLMRequest:
    return LLMRequest(
        messages=(SYSTEM, USER, *messages), tools=(FACTS_GET, FINISH), tool_choice=tool_choice
    )


@pytest.fixture
def client(openai_sdk: openai.AsyncOpenAI) -> OpenAIClient:
    return OpenAIClient(openai_sdk, model="gpt-test")


async def test_parallel_tool_calls_round_trip(client: OpenAIClient, server: ScriptedServer) -> None:
    server.push(
        tool_calls(
            tool_call("facts_get", {"field": "age"}, id="call_1"),
            tool_call("facts_get", {"field": "dob"}, id="call_2"),
        ),
        text("Done."),
    )
    first = await client.complete(request())
    assert first.stop_reason is StopReason.TOOL_CALLS
    assert [(c.id, c.name, json.loads(c.arguments_json)) for c in first.tool_calls] == [
        ("call_1", "facts_get", {"field": "age"}),
        ("call_2", "facts_get", {"field": "dob"}),
    ]
    history = (
        Message(role="assistant", tool_calls=first.tool_calls),
        Message(role="tool", tool_call_id="call_1", content="age = 42"),
        Message(role="tool", tool_call_id="call_2", content="dob = 1983-01-01", is_error=False),
    )
    second = await client.complete(request(*history))
    assert second == LLMReply(
        content="Done.", stop_reason=StopReason.END_TURN, usage=second.usage, model="gpt-test"
    )

    sent = server.requests[1].messages
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert sent[2]["content"] == ""  # not null: llama.cpp rejects null next to tool_calls
    assert [c["id"] for c in sent[2]["tool_calls"]] == ["call_1", "call_2"]
    assert [m["tool_call_id"] for m in sent[3:]] == ["call_1", "call_2"]
    assert server.requests[0].body["tools"][0]["function"]["name"] == "facts_get"
    assert server.requests[0].body["tool_choice"] == "auto"


async def test_usage_reports_cached_prefix(client: OpenAIClient, server: ScriptedServer) -> None:
    server.push(tool_call("facts_get", {"field": "age"}, id="call_1"), text("ok"))
    first = await client.complete(request())
    second = await client.complete(
        request(
            Message(role="assistant", tool_calls=first.tool_calls),
            Message(role="tool", tool_call_id="call_1", content="42"),
        )
    )
    assert first.usage.cached_input_tokens == 0
    assert first.usage.llm_calls == 1 and first.usage.output_tokens > 0
    assert 0 < second.usage.cached_input_tokens < second.usage.input_tokens
    assert second.usage.cached_input_tokens >= first.usage.input_tokens - 2
    assert second.usage.latency_ms > 0


async def test_named_tool_choice_and_required(client: OpenAIClient, server: ScriptedServer) -> None:
    server.push(tool_call("finish", {"status": "met"}), tool_call("facts_get", {}))
    await client.complete(request(tool_choice="finish"))
    await client.complete(request(tool_choice=ToolChoice.REQUIRED))
    assert server.requests[0].body["tool_choice"] == {
        "type": "function",
        "function": {"name": "finish"},
    }
    assert server.requests[1].body["tool_choice"] == "required"


async def test_refusal_is_content_refused(client: OpenAIClient, server: ScriptedServer) -> None:
    server.push(LLMReply(content="I can't help with that.", stop_reason=StopReason.REFUSAL))
    with pytest.raises(ContentRefused, match="can't help"):
        await client.complete(request())


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (http_error(401, "Incorrect API key provided: sk-test****1234"), AuthFailed),
        (
            http_error(404, "The model `gpt-test` does not exist", code="model_not_found"),
            ModelNotFound,
        ),
        (
            http_error(429, "You exceeded your current quota", code="insufficient_quota"),
            QuotaExhausted,
        ),
        (http_error(503, "Service unavailable"), ProviderUnavailable),
        (error_in_body("server_error", "upstream died"), ProviderUnavailable),
    ],
)
async def test_errors_on_the_wire_are_classified(
    client: OpenAIClient, server: ScriptedServer, step: object, expected: type[Exception]
) -> None:
    server.push(step)  # type: ignore[arg-type]
    with pytest.raises(expected) as caught:
        await client.complete(request())
    assert caught.value.__cause__ is None or isinstance(caught.value.__cause__, openai.OpenAIError)


def test_wire_messages_are_pure_translation() -> None:
    call = ToolCall(id="c1", name="facts_get", arguments_json='{"field": "age"}')
    wire = to_wire_messages(
        [
            Message(role="assistant", content="Checking.", tool_calls=(call,)),
            Message(role="tool", tool_call_id="c1", content="oops", is_error=True),
        ]
    )
    assert wire == [
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "facts_get", "arguments": '{"field": "age"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "oops"},
    ]
    assert to_wire_tool_choice(ToolChoice.AUTO) == "auto"


def test_no_tools_means_no_tool_choice() -> None:
    wire = to_wire_request(LLMRequest(messages=(USER,)), model="m", max_tokens_field="max_tokens")
    assert "tools" not in wire and "tool_choice" not in wire
    assert wire["max_tokens"] == 1024


def test_factory_turns_sdk_retries_off_and_needs_a_key() -> None:
    settings = Settings(llm_provider="openai", llm_api_key="sk-secret", llm_timeout_s=5)
    client = build_openai_client(settings)
    assert client._sdk.max_retries == 0 and client._sdk.timeout == 5
    with pytest.raises(ConfigError):
        build_openai_client(Settings(llm_provider="openai"))
    with pytest.raises(ConfigError):
        build_openai_client(Settings(llm_provider="local"))


def test_factory_for_local_servers_uses_a_placeholder_key() -> None:
    settings = Settings(llm_provider="local", llm_base_url="http://127.0.0.1:9/v1")
    client = build_openai_client(settings, provider="local")
    assert client.provider == "local"
    assert client._sdk.api_key == "not-needed"
    assert client._max_tokens_field == "max_tokens"


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def test_an_output_schema_is_llama_cpps_json_object_locally_and_json_schema_hosted() -> None:
    plain = LLMRequest(messages=(SYSTEM, USER), output_schema=SCHEMA)

    local = to_wire_request(plain, model="qwen", max_tokens_field="max_tokens", local=True)
    hosted = to_wire_request(plain, model="gpt-test")

    # llama.cpp's server answers 500 to `json_schema`; it builds a grammar from this form.
    assert local["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert hosted["response_format"]["type"] == "json_schema"
    assert hosted["response_format"]["json_schema"]["schema"] == SCHEMA
    assert "tools" not in local and "response_format" not in to_wire_request(
        request(), model="gpt-test"
    )


async def test_the_local_client_sends_response_format_on_the_wire(
    openai_sdk: openai.AsyncOpenAI, server: ScriptedServer
) -> None:
    client = OpenAIClient(openai_sdk, model="qwen", provider="local", max_tokens_field="max_tokens")
    server.push(text('{"answer": "yes"}'))

    reply = await client.complete(LLMRequest(messages=(SYSTEM, USER), output_schema=SCHEMA))

    assert reply.content == '{"answer": "yes"}'
    assert server.requests[0].body["response_format"] == {"type": "json_object", "schema": SCHEMA}
