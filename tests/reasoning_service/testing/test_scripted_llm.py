"""`ScriptedLLM` and its builders."""

from __future__ import annotations

import json

import pytest

from reasoning_service.errors import RateLimited
from reasoning_service.llm.base import LLMClient
from reasoning_service.models.conversation import LLMReply, LLMRequest, Message
from reasoning_service.testing import (
    ScriptedLLM,
    UnconsumedLLMSteps,
    UnexpectedLLMCall,
    finish,
    text,
    tool_call,
    tool_calls,
)

REQUEST = LLMRequest(messages=(Message(role="user", content="hi"),))


async def test_replays_replies_exceptions_and_functions() -> None:
    limited = RateLimited("slow", provider="scripted", model="m", status=429)

    async def echo(request: LLMRequest) -> LLMReply:
        return text(f"you said {request.messages[-1].content}")

    llm = ScriptedLLM([tool_call("facts_get", {"field": "age"}, id="c1"), limited, echo])
    assert isinstance(llm, LLMClient)
    first = await llm.complete(REQUEST)
    assert first.tool_calls[0].id == "c1" and first.usage.llm_calls == 1
    with pytest.raises(RateLimited):
        await llm.complete(REQUEST)
    assert (await llm.complete(REQUEST)).content == "you said hi"
    assert [call.index for call in llm.calls] == [0, 1, 2]
    llm.assert_complete()
    with pytest.raises(UnexpectedLLMCall):
        await llm.complete(REQUEST)


def test_unused_steps_fail_the_test() -> None:
    with pytest.raises(UnconsumedLLMSteps):
        ScriptedLLM([text("never asked")]).assert_complete()


def test_builders() -> None:
    reply = finish(status="not_met", confidence=0.7, policy_citations=[{"node_id": "n1"}])
    assert reply.tool_calls[0].name == "finish"
    assert json.loads(reply.tool_calls[0].arguments_json) == {
        "status": "not_met",
        "confidence": 0.7,
        "rationale": "Scripted rationale.",
        "policy_citations": [{"node_id": "n1"}],
        "case_evidence": [],
    }
    both = tool_calls(tool_call("a", {}), tool_call("b", "{not json"))
    assert [c.name for c in both.tool_calls] == ["a", "b"]
    assert both.tool_calls[1].arguments_json == "{not json"
