"""The text ReAct parser, case by case, and `TextReActClient` round trips against `ScriptedLLM`."""

from __future__ import annotations

import json

import pytest

from reasoning_service.llm.text_react import (
    ReActKind,
    TextReActClient,
    parse_react_text,
    to_text_request,
)
from reasoning_service.models.conversation import (
    LLMRequest,
    Message,
    StopReason,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from reasoning_service.testing import ScriptedLLM, text

# --- parser ---------------------------------------------------------------------------


def test_full_action() -> None:
    parsed = parse_react_text(
        'Thought: I need the age.\nAction: facts_get\nAction Input: {"field": "age"}'
    )
    assert parsed.kind is ReActKind.ACTION
    assert (parsed.thought, parsed.action, parsed.action_input) == (
        "I need the age.",
        "facts_get",
        {"field": "age"},
    )


def test_missing_thought_and_case_variations() -> None:
    parsed = parse_react_text('ACTION: facts_get\naction input: {"field": "age"}')
    assert (parsed.kind, parsed.thought, parsed.action) == (ReActKind.ACTION, "", "facts_get")
    assert parsed.action_input == {"field": "age"}


def test_preamble_counts_as_thought_and_markdown_bold_is_ignored() -> None:
    parsed = parse_react_text(
        'Let me look.\n**Action:** `facts_get`\n**Action Input:** {"field": "bmi"}'
    )
    assert (parsed.thought, parsed.action, parsed.action_input) == (
        "Let me look.",
        "facts_get",
        {"field": "bmi"},
    )


def test_code_fenced_json_and_trailing_text() -> None:
    parsed = parse_react_text(
        "Thought: x\nAction: policy_search\nAction Input:\n"
        '```json\n{"query": "age >= 18",\n "k": 3}\n```\n'
        "I will wait for the result."
    )
    assert parsed.action_input == {"query": "age >= 18", "k": 3}


def test_json_followed_by_prose_on_the_same_line() -> None:
    parsed = parse_react_text('Action: facts_get\nAction Input: {"field": "age"} (the age field)')
    assert parsed.action_input == {"field": "age"}


def test_key_value_pairs() -> None:
    parsed = parse_react_text(
        'Action: policy_search\nAction Input: query="age limit", k=3, exact=true'
    )
    assert parsed.action_input == {"query": "age limit", "k": 3, "exact": True}


def test_bare_string_input() -> None:
    parsed = parse_react_text(
        "Action: policy_search\nAction Input: age limit for bariatric surgery"
    )
    assert parsed.action_input == {"input": "age limit for bariatric surgery"}


def test_call_syntax_on_the_action_line() -> None:
    parsed = parse_react_text('Action: facts_get({"field": "age"})')
    assert (parsed.action, parsed.action_input) == ("facts_get", {"field": "age"})


def test_hallucinated_observation_is_cut_off() -> None:
    parsed = parse_react_text(
        'Action: facts_get\nAction Input: {"field": "age"}\nObservation: 42\n'
        'Thought: done\nFinal Answer: {"status": "met"}'
    )
    assert parsed.kind is ReActKind.ACTION and parsed.action == "facts_get"


def test_final_answer() -> None:
    parsed = parse_react_text(
        "Thought: The patient is 42.\n"
        'Final Answer: ```json\n{"status": "met", "confidence": 0.9}\n```'
    )
    assert parsed.kind is ReActKind.FINAL_ANSWER
    assert parsed.thought == "The patient is 42."
    assert parsed.final_answer == {"status": "met", "confidence": 0.9}


def test_final_answer_with_python_literals() -> None:
    parsed = parse_react_text("Final Answer: {'status': 'not_met', 'policy_citations': []}")
    assert parsed.final_answer == {"status": "not_met", "policy_citations": []}


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("The patient seems eligible.", "no 'Action:'"),
        ("Final Answer: the criterion is met", "JSON object"),
        ("Action: \nAction Input: {}", "names no tool"),
    ],
)
def test_malformed(reply: str, reason: str) -> None:
    parsed = parse_react_text(reply)
    assert parsed.kind is ReActKind.MALFORMED and reason in parsed.reason


# --- client ---------------------------------------------------------------------------

FACTS_GET = ToolSpec(
    name="facts_get",
    description="Read one fact of the case.",
    parameters={"type": "object", "properties": {"field": {"type": "string"}}},
)
FINISH = ToolSpec(
    name="finish",
    description="Give the verdict.",
    parameters={"type": "object", "properties": {"status": {"type": "string"}}},
)
SYSTEM = Message(role="system", content="You verify policy criteria.")
USER = Message(role="user", content="Is the patient at least 18?")


def ids() -> object:
    counter = iter(range(1, 100))
    return lambda: f"react_{next(counter)}"


async def test_round_trip_action_observation_final_answer() -> None:
    llm = ScriptedLLM(
        [
            text("Thought: need the age\nAction: facts_get\nAction Input: age"),
            text('Thought: 42 is enough\nFinal Answer: {"status": "met"}'),
        ]
    )
    client = TextReActClient(llm, new_call_id=ids())  # type: ignore[arg-type]
    request = LLMRequest(messages=(SYSTEM, USER), tools=(FACTS_GET, FINISH))

    first = await client.complete(request)
    assert first.stop_reason is StopReason.TOOL_CALLS and first.content == "need the age"
    assert first.tool_calls == (
        ToolCall(id="react_1", name="facts_get", arguments_json=json.dumps({"field": "age"})),
    )  # the bare string went to the tool's only property

    history = (
        Message(role="assistant", content=first.content, tool_calls=first.tool_calls),
        Message(role="tool", tool_call_id="react_1", content="age = 42"),
    )
    second = await client.complete(
        request.model_copy(update={"messages": (SYSTEM, USER, *history)})
    )
    assert second.tool_calls[0].name == "finish"
    assert json.loads(second.tool_calls[0].arguments_json) == {"status": "met"}

    sent = llm.calls[1].request
    assert sent.tools == () and sent.tool_choice == ToolChoice.AUTO
    assert [m.role for m in sent.messages] == ["system", "user", "assistant", "user"]
    assert "### facts_get" in sent.messages[0].content and '"field"' in sent.messages[0].content
    assert sent.messages[0].content.startswith(SYSTEM.content)
    assert sent.messages[2].content == (
        'Thought: need the age\nAction: facts_get\nAction Input: {"field": "age"}'
    )
    assert sent.messages[3].content == "Observation: age = 42"
    llm.assert_complete()


async def test_malformed_reply_stays_plain_text() -> None:
    llm = ScriptedLLM([text("I think it is met.")])
    reply = await TextReActClient(llm).complete(
        LLMRequest(messages=(USER,), tools=(FACTS_GET, FINISH))
    )
    assert reply.tool_calls == () and reply.content == "I think it is met."


def test_error_observations_and_named_tool_choice_are_rendered() -> None:
    call = ToolCall(id="c1", name="facts_get", arguments_json='{"field": 7}')
    request = LLMRequest(
        messages=(
            USER,
            Message(role="assistant", tool_calls=(call,)),
            Message(
                role="tool", tool_call_id="c1", content="field must be a string", is_error=True
            ),
            Message(role="user", content="Please call finish now."),
        ),
        tools=(FACTS_GET, FINISH),
        tool_choice="finish",
    )
    sent = to_text_request(request)
    assert sent.messages[0].role == "system"
    assert sent.messages[0].content.endswith("Your next answer must be your Final Answer.")
    assert sent.messages[-1].content == (
        "Observation (error): field must be a string\n\nPlease call finish now."
    )
