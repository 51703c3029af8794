"""Item 6: the same criterion task through a plain `dspy.ReAct` program, side by side.

Same examples, same tools (the service's `ToolExecutor`: pi_search with the lexical search,
facts_get, spans_tighten, with the same per-criterion cache and truncation), same instructions
(the service's system prompt), same model: the scripted OpenAI API with `PolicyAgent`, which
also speaks dspy's `ChatAdapter` text format. Both sides are charged by `RecordingAgent` from
what went on the wire, one request at a time. dspy runs through litellm, as users run it.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Literal

from reasoning_service.agent.react_controller import initial_messages
from reasoning_service.bench.data import BenchData, BenchExample
from reasoning_service.bench.wire import RecordingAgent
from reasoning_service.models import CriterionResult, StepKind, ToolCall
from reasoning_service.prompts import Prompt
from reasoning_service.testing.live_server import LiveServer
from reasoning_service.testing.scripted_server import ScriptedAPI
from reasoning_service.tools.executor import FINISH, TOOL_DESCRIPTIONS, ToolExecutor
from reasoning_service.tools.tree_search import LexicalTreeSearch
from retrieval.service import RetrievalService

__all__ = ["run_dspy_compare"]

_Status = Literal["met", "not_met", "missing_info", "uncertain", "not_applicable"]


async def run_dspy_compare(
    data: BenchData,
    examples: list[BenchExample],
    prompt: Prompt,
    service_side: dict[str, Any],
) -> dict[str, Any]:
    """Run dspy.ReAct on `examples`; `service_side` is the service's row from the same examples."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
    os.environ.setdefault("DSPY_CACHEDIR", os.path.join(tempfile.gettempdir(), "bench-dspy"))
    try:
        import dspy
    except ImportError:
        return {"skipped": "dspy is not installed (the bench extra: make setup)"}
    agent = RecordingAgent()
    api = ScriptedAPI(responder=agent)
    retrieval = RetrievalService()
    statuses: list[str] = []
    tool_calls = 0
    try:
        for policy in data.policies.values():
            await retrieval.index_policy(policy.policy_id, policy.tree)
        search = LexicalTreeSearch(retrieval)
        with LiveServer(api.app) as server:
            lm = dspy.LM(
                "openai/bench-model",
                api_base=f"{server.url}/v1",
                api_key="sk-bench-not-a-key",
                cache=False,
                num_retries=0,
                max_tokens=800,
                temperature=0.0,
            )
            signature = _signature(dspy).with_instructions(prompt.system)
            for example in examples:
                task = example.task(data.policies)
                executor = ToolExecutor(task, retrieval=retrieval, tree_search=search)
                tools, counter = _tools(dspy, executor)
                program = dspy.ReAct(signature, tools=tools, max_iters=10)
                with dspy.context(lm=lm):
                    prediction = await program.acall(
                        criterion=task.criterion.text,
                        case_outline=initial_messages(prompt, task)[1].content,
                    )
                statuses.append(str(prediction.status))
                tool_calls += counter[0]
    finally:
        await retrieval.aclose()
    wire = agent.since(0).as_dict()
    n = max(len(examples), 1)
    dspy_side = {
        "llm_calls_per_criterion": round(wire["llm_calls"] / n, 3),
        "tool_calls_per_criterion": round(tool_calls / n, 3),
        "input_tokens_per_criterion": round(wire["input_tokens"] / n, 1),
        "cached_input_tokens_per_criterion": round(wire["cached_input_tokens"] / n, 1),
        "output_tokens_per_criterion": round(wire["output_tokens"] / n, 1),
        "cost_usd_per_criterion": round(wire["cost_usd"] / n, 7),
        "accuracy": _accuracy(examples, statuses) if data.labeled else "skipped: no labels",
        "total": wire,
    }
    return {
        "what": "same examples, tools, instructions and scripted model; tokens charged from the "
        "wire for both (~4 chars/token, cached = unchanged prefix), gpt-4o-mini prices",
        "dspy_version": dspy.__version__,
        "tool_calls_note": "tool calls exclude finish on both sides",
        "criteria": len(examples),
        "service": service_side,
        "dspy_react": dspy_side,
        "ratio_tokens_service_to_dspy": _ratio(_tokens(service_side), _tokens(dspy_side)),
        "ratio_cost_service_to_dspy": _ratio(
            service_side["cost_usd_per_criterion"], dspy_side["cost_usd_per_criterion"]
        ),
        "ratio_llm_calls_service_to_dspy": _ratio(
            service_side["llm_calls_per_criterion"], dspy_side["llm_calls_per_criterion"]
        ),
    }


def service_side_row(
    tokens_section: dict[str, Any],
    examples: list[BenchExample],
    results: list[CriterionResult],
    labeled: bool,
) -> dict[str, Any]:
    """The service's row, from the service pass's wire accounting on the same examples.

    Tool calls exclude `finish`, as dspy's count does (its `finish` runs no tool).
    """
    wire = tokens_section["wire_accounting_total"]
    n = max(len(examples), 1)
    statuses = [r.status.value for r in results]
    tools = sum(
        1
        for r in results
        for step in r.reasoning_trace
        if step.kind is StepKind.TOOL_CALL and step.tool != FINISH
    )
    return {
        "llm_calls_per_criterion": round(wire["llm_calls"] / n, 3),
        "tool_calls_per_criterion": round(tools / n, 3),
        "input_tokens_per_criterion": round(wire["input_tokens"] / n, 1),
        "cached_input_tokens_per_criterion": round(wire["cached_input_tokens"] / n, 1),
        "output_tokens_per_criterion": round(wire["output_tokens"] / n, 1),
        "cost_usd_per_criterion": round(wire["cost_usd"] / n, 7),
        "accuracy": _accuracy(examples, statuses) if labeled else "skipped: no labels",
        "total": wire,
    }


def _tokens(row: dict[str, Any]) -> float:
    return float(row["input_tokens_per_criterion"] + row["output_tokens_per_criterion"])


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def _accuracy(examples: list[BenchExample], statuses: list[str]) -> float:
    right = sum(1 for e, s in zip(examples, statuses, strict=True) if s == e.gold)
    return round(right / max(len(examples), 1), 3)


def _signature(dspy: Any) -> Any:
    class CriterionCheck(dspy.Signature):  # type: ignore[misc,name-defined]
        criterion: str = dspy.InputField()
        case_outline: str = dspy.InputField(desc="the policy and the case, as JSON")
        status: _Status = dspy.OutputField()
        confidence: float = dspy.OutputField()
        rationale: str = dspy.OutputField()
        policy_citations: list[dict[str, Any]] = dspy.OutputField(desc="[{node_id, quote}]")
        case_evidence: list[dict[str, Any]] = dspy.OutputField(
            desc="[{doc_id, page, field, quote}]"
        )

    return CriterionCheck


def _tools(dspy: Any, executor: ToolExecutor) -> tuple[list[Any], list[int]]:
    """The service's tools as dspy tools (same executor, so the same results and cache)."""
    counter = [0]

    async def run(name: str, arguments: dict[str, Any]) -> str:
        counter[0] += 1
        call = ToolCall(id=f"dspy_{counter[0]}", name=name, arguments_json=json.dumps(arguments))
        (outcome,) = await executor.execute([call])
        return outcome.content

    async def pi_search(query: str) -> str:
        return await run("pi_search", {"query": query})

    async def facts_get(field: str | None = None, pattern: str | None = None) -> str:
        arguments = {k: v for k, v in (("field", field), ("pattern", pattern)) if v}
        return await run("facts_get", arguments)

    async def spans_tighten(node_id: str, query: str) -> str:
        return await run("spans_tighten", {"node_id": node_id, "query": query})

    tools = [
        dspy.Tool(pi_search, name="pi_search", desc=TOOL_DESCRIPTIONS["pi_search"]),
        dspy.Tool(facts_get, name="facts_get", desc=TOOL_DESCRIPTIONS["facts_get"]),
        dspy.Tool(spans_tighten, name="spans_tighten", desc=TOOL_DESCRIPTIONS["spans_tighten"]),
    ]
    return tools, counter
