"""A deterministic, policy-aware scripted agent that answers over the wire (`ScriptedServer`).

It plays a sensible ReAct agent for one criterion, whatever the client:

1. `pi_search(query=<the criterion's content words>)`
2. `facts_get(pattern=<the criterion's most specific word>)`
3. finish: the policy quote is the first sentence of the first node text `pi_search` returned,
   the case quote the first document line (or sourced fact) `facts_get` returned; the status is
   a trivial rule: `met` when the case showed anything for the pattern, else `missing_info`.

`PolicyAgent.__call__(request_json)` is a `ScriptedServer` responder. It reads two dialects:
OpenAI native tool calling (the service's ReAct loop, and its LLM tree search), and dspy's
`ChatAdapter` text format (`[[ ## next_tool_name ## ]]` …), which `dspy.ReAct` speaks. Both sides
see the same tool results, so they take the same decisions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from reasoning_service.models import LLMReply, StopReason
from reasoning_service.testing.scripted_llm import finish, text, tool_call
from retrieval.query import to_query_tokens

__all__ = ["AgentPlan", "PolicyAgent", "plan_step"]

_NODE = re.compile(r'"node_id":\s*"(\d{4})"')
_NODE_TEXT = re.compile(r'"node_id":\s*"(\d{4})".*?"text":\s*"((?:[^"\\]|\\.)*)"', re.S)
_LINE = re.compile(
    r'"doc_id":\s*"((?:[^"\\]|\\.)*)",\s*"page":\s*(\d+),\s*"line":\s*"((?:[^"\\]|\\.)*)"'
)
_FACT = re.compile(
    r'"doc_id":\s*"((?:[^"\\]|\\.)*)",\s*"page":\s*(\d+),\s*"quote":\s*"((?:[^"\\]|\\.)*)"'
)
_SENTENCE_END = re.compile(r"(?<=[.:;])\s")
_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\[\[ ## |\Z)", re.S)


@dataclass(frozen=True)
class AgentPlan:
    """The next action: a tool with arguments, or the finish arguments."""

    tool: str
    arguments: dict[str, Any]


def plan_step(criterion: str, observations: list[tuple[str, str]]) -> AgentPlan:
    """The agent's policy: what to do after `observations` (tool name, raw result text)."""
    done = {name for name, _ in observations}
    if "pi_search" not in done:
        return AgentPlan("pi_search", {"query": " ".join(to_query_tokens(criterion)[:8])})
    if "facts_get" not in done:
        return AgentPlan("facts_get", {"pattern": _pattern(criterion)})
    search = next(result for name, result in observations if name == "pi_search")
    facts = next(result for name, result in observations if name == "facts_get")
    policy_citations = _policy_quote(search)
    case_evidence = _case_quote(facts)
    met = bool(case_evidence)
    return AgentPlan(
        "finish",
        {
            "status": "met" if met else "missing_info",
            "confidence": 0.8 if met else 0.7,
            "rationale": "The case record shows it." if met else "The record does not show it.",
            "policy_citations": policy_citations,
            "case_evidence": case_evidence,
        },
    )


def _pattern(criterion: str) -> str:
    words = [w for w in to_query_tokens(criterion) if w.isalpha()]
    return max(words, key=len) if words else "patient"


def _unescape(raw: str) -> str:
    try:
        return str(json.loads(f'"{raw}"'))
    except json.JSONDecodeError:
        return raw


def _policy_quote(search_result: str) -> list[dict[str, str]]:
    for node_id, raw in _NODE_TEXT.findall(search_result):
        node_text = _unescape(raw).strip()
        if not node_text:
            continue
        first_line = node_text.splitlines()[0].strip()
        sentence = _SENTENCE_END.split(first_line, maxsplit=1)[0].strip()
        if len(sentence) >= 8:
            return [{"node_id": node_id, "quote": sentence}]
    return []


def _case_quote(facts_result: str) -> list[dict[str, Any]]:
    for pattern in (_LINE, _FACT):
        match = pattern.search(facts_result)
        if match and _unescape(match.group(3)).strip():
            doc_id, page, quote = match.groups()
            return [{"doc_id": _unescape(doc_id), "page": int(page), "quote": _unescape(quote)}]
    return []


class PolicyAgent:
    """`ScriptedServer(responder=PolicyAgent())`: answers the service's and dspy's requests."""

    def __call__(self, body: dict[str, Any]) -> LLMReply:
        messages = body.get("messages", [])
        system = str(messages[0].get("content", "")) if messages else ""
        if "[[ ## next_tool_name ## ]]" in system:
            return text(_dspy_react_step(messages))
        if "[[ ## " in system:
            return text(_dspy_extract(messages))
        tool_names = [t["function"]["name"] for t in body.get("tools", [])]
        if tool_names == ["select_nodes"]:
            return _select_nodes(messages)
        return _native_step(messages, body.get("tool_choice"))


def _native_step(messages: list[dict[str, Any]], tool_choice: Any) -> LLMReply:
    criterion = _native_criterion(messages)
    names: dict[str, str] = {}
    observations: list[tuple[str, str]] = []
    finish_rejected = False
    for message in messages:
        for call in message.get("tool_calls") or ():
            names[call["id"]] = call["function"]["name"]
        if message.get("role") == "tool":
            name = names.get(message.get("tool_call_id", ""), "")
            if name == "finish":
                finish_rejected = True
            else:
                observations.append((name, str(message.get("content", ""))))
    plan = plan_step(criterion, observations)
    forced = isinstance(tool_choice, dict)
    if plan.tool != "finish" and not forced:
        return tool_call(plan.tool, plan.arguments)
    final = plan_step(criterion, [*observations, ("pi_search", ""), ("facts_get", "")])
    arguments = plan.arguments if plan.tool == "finish" else final.arguments
    if finish_rejected:  # citations were refused once: keep only what verifies for sure
        arguments = {**arguments, "policy_citations": []}
    return finish(**arguments)


def _native_criterion(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user":
            try:
                return str(json.loads(message["content"])["criterion"]["text"])
            except (json.JSONDecodeError, KeyError, TypeError):
                return str(message.get("content", ""))
    return ""


def _select_nodes(messages: list[dict[str, Any]]) -> LLMReply:
    content = str(messages[-1].get("content", "")) if messages else ""
    node_ids = list(dict.fromkeys(_NODE.findall(content)))[1:3]
    reply = tool_call("select_nodes", {"thinking": "Sections by title.", "node_list": node_ids})
    return reply.model_copy(update={"stop_reason": StopReason.TOOL_CALLS})


def _dspy_fields(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Every `[[ ## name ## ]]` field of the last user message; the trajectory's own fields
    (`tool_name_0`, `observation_0` …) come out at the same level."""
    user = str(messages[-1].get("content", "")) if messages else ""
    return {name: value.strip() for name, value in _FIELD.findall(user)}


def _dspy_observations(fields: dict[str, str]) -> list[tuple[str, str]]:
    observations = []
    for index in range(50):
        name = fields.get(f"tool_name_{index}")
        if name is None:
            break
        observations.append((name.strip(), fields.get(f"observation_{index}", "")))
    return observations


def _dspy_react_step(messages: list[dict[str, Any]]) -> str:
    fields = _dspy_fields(messages)
    observations = _dspy_observations(fields)
    plan = plan_step(fields.get("criterion", ""), observations)
    name, arguments = (plan.tool, plan.arguments) if plan.tool != "finish" else ("finish", {})
    return (
        f"[[ ## next_thought ## ]]\nNext: {name}.\n\n"
        f"[[ ## next_tool_name ## ]]\n{name}\n\n"
        f"[[ ## next_tool_args ## ]]\n{json.dumps(arguments)}\n\n"
        "[[ ## completed ## ]]"
    )


def _dspy_extract(messages: list[dict[str, Any]]) -> str:
    fields = _dspy_fields(messages)
    observations = _dspy_observations(fields)
    observations = [(n, o) for n, o in observations if n in ("pi_search", "facts_get")]
    plan = plan_step(
        fields.get("criterion", ""), [*observations, ("pi_search", ""), ("facts_get", "")]
    )
    arguments = plan.arguments
    return (
        "[[ ## reasoning ## ]]\nFrom the trajectory.\n\n"
        f"[[ ## status ## ]]\n{arguments['status']}\n\n"
        f"[[ ## confidence ## ]]\n{arguments['confidence']}\n\n"
        f"[[ ## rationale ## ]]\n{arguments['rationale']}\n\n"
        f"[[ ## policy_citations ## ]]\n{json.dumps(arguments['policy_citations'])}\n\n"
        f"[[ ## case_evidence ## ]]\n{json.dumps(arguments['case_evidence'])}\n\n"
        "[[ ## completed ## ]]"
    )
