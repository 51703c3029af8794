"""Forced mode: the model sees one forced function, `act`; the controller sees real tools."""

from __future__ import annotations

import json

from reasoning_service.llm.forced_tools import ACT, ForcedToolClient, from_act_reply, to_act_request
from reasoning_service.models import LLMReply, LLMRequest, Message, ToolCall, ToolSpec
from reasoning_service.testing.scripted_llm import ScriptedLLM, tool_call
from reasoning_service.tools.executor import tool_specs

TOOLS = tool_specs()


def act(tool: str, args: dict, thought: str = "t", id: str = "c1") -> LLMReply:
    return tool_call(ACT, {"thought": thought, "tool": tool, "args": args}, id=id)


def test_a_request_with_tools_offers_only_act_forced_by_name():
    request = LLMRequest(messages=(Message(role="user", content="go"),), tools=TOOLS)
    forced = to_act_request(request)
    assert [t.name for t in forced.tools] == [ACT] and forced.tool_choice == ACT
    assert forced.tools[0].parameters["properties"]["tool"]["enum"] == [t.name for t in TOOLS]


def test_a_named_tool_choice_is_kept_but_history_speaks_act():
    history = (
        Message(role="user", content="go"),
        Message(
            role="assistant",
            content="look up AHI",
            tool_calls=(ToolCall(id="c1", name="facts_get", arguments_json='{"field": "ahi"}'),),
        ),
        Message(role="tool", content="{}", tool_call_id="c1"),
    )
    request = LLMRequest(messages=history, tools=TOOLS[-1:], tool_choice="finish")
    forced = to_act_request(request)
    assert forced.tool_choice == "finish" and forced.tools == TOOLS[-1:]
    call = forced.messages[1].tool_calls[0]
    assert call.name == ACT and call.id == "c1"
    assert json.loads(call.arguments_json) == {
        "thought": "look up AHI",
        "tool": "facts_get",
        "args": {"field": "ahi"},
    }


def test_an_act_reply_becomes_the_real_call_with_its_thought():
    reply = from_act_reply(act("facts_get", {"pattern": "AHI"}, thought="need the AHI"))
    assert reply.content == "need the AHI"
    assert reply.tool_calls == (
        ToolCall(id="c1", name="facts_get", arguments_json='{"pattern": "AHI"}'),
    )


def test_a_malformed_act_is_passed_on_for_the_controller_to_correct():
    reply = from_act_reply(tool_call(ACT, '{"tool": '))
    assert reply.tool_calls[0].name == ACT


async def test_the_client_round_trip_through_a_scripted_model():
    scripted = ScriptedLLM([act("pi_search", {"query": "AHI"})])
    client = ForcedToolClient(scripted)
    reply = await client.complete(
        LLMRequest(messages=(Message(role="user", content="go"),), tools=TOOLS)
    )
    assert reply.tool_calls[0].name == "pi_search"
    assert scripted.calls[0].request.tool_choice == ACT
    assert isinstance(scripted.calls[0].request.tools[0], ToolSpec)
