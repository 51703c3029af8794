"""The production ReAct loop against the real local model (llama.cpp, Qwen2.5-Coder-0.5B).

Structure, not verdicts: a run ends in a schema-valid `finish`, tool results reach the model, a
bad call is answered and the loop goes on, every LLM call is recorded, and the server is gone
afterwards. Skipped without `make setup-local`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from reasoning_service.agent.loop_state import ReActLimits
from reasoning_service.agent.react_controller import ReActController
from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.factory import build_llm_client
from reasoning_service.llm.forced_tools import ForcedToolClient
from reasoning_service.llm.local_server import LocalLlamaServer, find_model, is_runtime_installed
from reasoning_service.llm.recording import record_to_current_task
from reasoning_service.models import LLMReply, LLMRequest, StepKind, ToolCall
from reasoning_service.models.task import CriterionTask
from reasoning_service.prompts import load_prompt
from reasoning_service.settings import Settings
from reasoning_service.tools.executor import parse_arguments
from reasoning_service.tools.tree_search import LexicalTreeSearch

pytestmark = [pytest.mark.local_llm, pytest.mark.asyncio(loop_scope="module")]
SETTINGS = Settings()
BAD_CALL_ID = "call_bad_1"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def local_llm() -> AsyncIterator[tuple[LocalLlamaServer, LLMClient]]:
    model = find_model(SETTINGS.models_dir, SETTINGS.local_model)
    if not is_runtime_installed() or model is None:
        pytest.skip("llama.cpp runtime or model not installed (make setup-local)")
    server = LocalLlamaServer(model, model_alias=SETTINGS.local_model, startup_timeout_s=180)
    await server.start()
    settings = SETTINGS.model_copy(
        update={
            "llm_provider": "local",
            "llm_base_url": server.base_url,
            "llm_model": SETTINGS.local_model,
            "llm_timeout_s": 600.0,
        }
    )
    client = build_llm_client(settings, sink=record_to_current_task)
    assert isinstance(client, ForcedToolClient)  # `local` defaults to forced tool calling
    try:
        yield server, client
    finally:
        await client.aclose()
        await server.aclose()
        assert not server.is_running


class FirstReplyIsABadCall:
    """Answers the first request with an unknown tool, then lets the real model answer."""

    def __init__(self, inner: LLMClient) -> None:
        self._inner = inner
        self.provider, self.model = inner.provider, inner.model
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest) -> LLMReply:
        self.requests.append(request)
        if len(self.requests) == 1:
            bad = ToolCall(id=BAD_CALL_ID, name="lookup_everything", arguments_json="{}")
            return LLMReply(tool_calls=(bad,))
        return await self._inner.complete(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_a_react_run_on_the_local_model_ends_in_a_valid_finish(
    local_llm, cpap_case, cpap_policy, retrieval
):
    server, client = local_llm
    wrapped = FirstReplyIsABadCall(client)
    controller = ReActController(
        llm=wrapped,
        prompt=load_prompt(SETTINGS.prompts_dir, SETTINGS.prompt_id),
        retrieval=retrieval,
        tree_search=LexicalTreeSearch(retrieval),
        fallback=None,
        limits=ReActLimits(max_iterations=3, token_budget=20_000),
    )
    task = CriterionTask(
        case=cpap_case, policy=cpap_policy, criterion=cpap_policy.criteria.criterion("NCD-240.4/C5")
    )
    result = await controller.evaluate(task)

    assert result.controller == "react" and result.reason_code != "llm_transient_error"
    # The bad call was answered with how to fix it, tied to its id, and the real model went on.
    second = wrapped.requests[1].messages
    assert second[-1].role == "tool" and second[-1].tool_call_id == BAD_CALL_ID
    assert second[-1].is_error and "Available tools" in second[-1].content
    # Every later request carries the tool results before it: they reach the model.
    for request in wrapped.requests[2:]:
        assert sum(m.role == "tool" for m in request.messages) >= 2
    # The run ends in a finish whose arguments satisfy the schema.
    finishes = [
        s for s in result.reasoning_trace if s.tool == "finish" and s.kind is StepKind.TOOL_CALL
    ]
    assert finishes, [s.kind for s in result.reasoning_trace]
    call = ToolCall(id="x", name="finish", arguments_json=json.dumps(finishes[-1].arguments))
    assert isinstance(parse_arguments(call), dict)
    assert result.reasoning_trace[-1].kind is StepKind.DECISION
    # Each real call is recorded as an interaction, and succeeded.
    assert len(task.trace.interactions) == len(wrapped.requests) - 1
    assert all(i.success and i.provider == "local" for i in task.trace.interactions)
    assert server.is_running
