"""The tools the ReAct agent can call, and `ToolExecutor`, which validates and runs them.

Tools: `pi_search` (find the governing policy section), `facts_get` (case facts and document
lines), `spans_tighten` (exact sentences of one section), and `finish` (the criterion result), whose
schema, parsing and checks live in `finish.py`: the agent checks it there, it is never run here.
Arguments are validated against each tool's JSON schema before anything
runs; a bad call becomes an error result that tells the model how to fix it. Results are JSON,
truncated for the model. A cache keyed on tool name plus canonical arguments lives as long as
the executor, i.e. one criterion evaluation.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from reasoning_service.models import CaseBundle, Fact, ToolCall, ToolSpec, Usage
from reasoning_service.models.task import CriterionTask
from reasoning_service.tools.arguments import check_arguments, validators_for
from reasoning_service.tools.finish import FINISH, FINISH_DESCRIPTION, FINISH_PARAMETERS
from reasoning_service.tools.tree_search import TreeSearch
from retrieval.service import RetrievalService
from retrieval.tree import find_node

TOOL_DESCRIPTIONS: dict[str, str] = {
    "pi_search": "Find the policy sections that govern a question. Returns node ids, titles, "
    "pages and the start of each section's text.",
    "facts_get": "Look up the case: extracted facts whose field name matches `field` (exact or "
    "prefix, e.g. 'sleep_study'), and/or facts and document lines containing `pattern` "
    "(words, case-insensitive). Each item says where it comes from (doc_id, page).",
    "spans_tighten": "Return the exact sentences of one policy section (node_id from pi_search) "
    "that best match a query, to quote them verbatim.",
    FINISH: FINISH_DESCRIPTION,
}

# No `maxLength` and no `pattern`: grammar-constrained runtimes (llama.cpp) expand a length into
# one rule per character and crash on some regexes. Long arguments are cut in code instead
# (`arguments.MAX_ARGUMENT_CHARS`) and node ids are checked against the tree.
_PARAMETERS: dict[str, dict[str, Any]] = {
    "pi_search": {
        "type": "object",
        "properties": {"query": {"type": "string", "minLength": 2}},
        "required": ["query"],
        "additionalProperties": False,
    },
    "facts_get": {
        "type": "object",
        "properties": {
            "field": {"type": "string", "minLength": 1},
            "pattern": {"type": "string", "minLength": 1},
        },
        "additionalProperties": False,
    },
    "spans_tighten": {
        "type": "object",
        "properties": {
            "node_id": {"type": "string", "minLength": 1},
            "query": {"type": "string", "minLength": 2},
        },
        "required": ["node_id", "query"],
        "additionalProperties": False,
    },
    FINISH: FINISH_PARAMETERS,
}

_VALIDATORS = validators_for(_PARAMETERS)


def tool_specs(descriptions: dict[str, str] | None = None) -> tuple[ToolSpec, ...]:
    """The four tool specs; `descriptions` overrides the texts (prompt versions, GEPA)."""
    texts = {**TOOL_DESCRIPTIONS, **(descriptions or {})}
    return tuple(
        ToolSpec(name=name, description=texts[name], parameters=_PARAMETERS[name])
        for name in _PARAMETERS
    )


@dataclass(frozen=True)
class ToolOutcome:
    """The answer to one tool call, tied to its id; `is_error` results tell the model a fix."""

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    cache_hit: bool = False
    duration_ms: float = 0.0
    arguments: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    """LLM tokens the tool itself spent (tree search); the loop adds them to the criterion's."""


def parse_arguments(call: ToolCall) -> dict[str, Any] | str:
    """The call's arguments checked against its tool's schema, or a message the model can act on."""
    return check_arguments(call, _PARAMETERS, _VALIDATORS, precheck=_needs_field_or_pattern)


def _needs_field_or_pattern(name: str, arguments: dict[str, Any]) -> str | None:
    # Not in the schema: grammar-constrained runtimes reject `anyOf` of `required` lists.
    if name == "facts_get" and not (arguments.get("field") or arguments.get("pattern")):
        return "facts_get needs `field` (a fact name such as 'sleep_study.ahi') or `pattern`."
    return None


class ToolExecutor:
    """Runs validated tool calls for one criterion task (never `finish`: see `finish.py`)."""

    def __init__(
        self,
        task: CriterionTask,
        *,
        retrieval: RetrievalService | None,
        tree_search: TreeSearch,
        max_result_chars: int = 2500,
    ) -> None:
        self._task = task
        self._retrieval = retrieval
        self._tree_search = tree_search
        self._max_chars = max_result_chars
        self._cache: dict[str, str] = {}

    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolOutcome]:
        """Run the calls concurrently (they only read), in the order given."""
        return list(await asyncio.gather(*(self._execute_one(call) for call in calls)))

    async def _execute_one(self, call: ToolCall) -> ToolOutcome:
        started = time.perf_counter()
        arguments = parse_arguments(call)
        if isinstance(arguments, str):
            return ToolOutcome(call.id, call.name, arguments, is_error=True)
        key = f"{call.name}:{json.dumps(arguments, sort_keys=True)}"
        if key in self._cache:
            return ToolOutcome(
                call.id, call.name, self._cache[key], cache_hit=True, arguments=arguments
            )
        try:
            result, usage = await self._dispatch(call.name, arguments)
        except ToolUnavailable as exc:
            return ToolOutcome(call.id, call.name, str(exc), is_error=True, arguments=arguments)
        content = self._truncate(json.dumps(result, ensure_ascii=False, default=str))
        self._cache[key] = content
        elapsed = (time.perf_counter() - started) * 1000
        return ToolOutcome(
            call.id, call.name, content, duration_ms=elapsed, arguments=arguments, usage=usage
        )

    async def _dispatch(self, name: str, arguments: dict[str, Any]) -> tuple[Any, Usage]:
        """The tool's result and the LLM tokens it spent."""
        match name:
            case "pi_search":
                return await self._pi_search(arguments["query"])
            case "facts_get":
                found = facts_get(self._task.case, arguments.get("field"), arguments.get("pattern"))
                return found, Usage()
            case "spans_tighten":
                return await self._spans_tighten(arguments["node_id"], arguments["query"]), Usage()
        raise ToolUnavailable(f"Unknown tool {name!r}.")

    async def _pi_search(self, query: str) -> tuple[dict[str, Any], Usage]:
        policy = self._task.policy
        found = await self._tree_search.search(
            policy, query, interactions=self._task.trace.interactions
        )
        nodes = []
        for node_id in found.node_ids:
            node = find_node(policy.tree, node_id)
            if node is None:
                continue
            nodes.append(
                {
                    "node_id": node.node_id,
                    "title": node.title,
                    "pages": [node.start_index, node.end_index] if node.start_index else None,
                    "text": node.text[:700],
                }
            )
        return {"policy_id": policy.policy_id, "method": found.method, "nodes": nodes}, found.usage

    async def _spans_tighten(self, node_id: str, query: str) -> dict[str, Any]:
        if self._retrieval is None:
            raise ToolUnavailable(
                "spans_tighten is unavailable: no FTS5 span index is configured. "
                "Quote from the text returned by pi_search instead."
            )
        if find_node(self._task.policy.tree, node_id) is None:
            raise ToolUnavailable(
                f"node_id {node_id!r} is not in this policy. Use a node_id returned by pi_search."
            )
        spans = await self._retrieval.spans_tighten(self._task.policy.policy_id, node_id, query)
        return {"node_id": node_id, "spans": [s.text for s in spans]}

    def _truncate(self, content: str) -> str:
        if len(content) <= self._max_chars:
            return content
        return content[: self._max_chars] + '…"(truncated)'


class ToolUnavailable(Exception):
    """A tool cannot answer this call; the message goes back to the model."""


_WORD = re.compile(r"[a-z0-9.]+")


def facts_get(case: CaseBundle, field: str | None, pattern: str | None) -> dict[str, Any]:
    """Facts by field (exact or dotted prefix) and/or by words; document lines by words."""
    facts = [f for f in case.facts if _field_matches(f.field, field)] if field else []
    lines: list[dict[str, Any]] = []
    if pattern:
        words = _WORD.findall(pattern.lower())
        facts += [f for f in case.facts if f not in facts and _words_in(_fact_text(f), words)]
        lines = _document_lines(case, words)
    return {
        "as_of": case.as_of.isoformat() if case.as_of else None,
        "patient": case.patient.model_dump(exclude_none=True),
        "facts": [_fact_view(f) for f in facts[:15]],
        "document_lines": lines[:12],
    }


def _field_matches(name: str, wanted: str) -> bool:
    wanted = wanted.strip().lower()
    name = name.lower()
    return name == wanted or name.startswith(wanted + ".") or wanted in name.split(".")


def _words_in(text: str, words: list[str]) -> bool:
    text = text.lower()
    return bool(words) and all(word in text for word in words)


def _fact_text(fact: Fact) -> str:
    quote = fact.source.quote if fact.source else ""
    return f"{fact.field} {fact.value} {fact.unit or ''} {quote}"


def _fact_view(fact: Fact) -> dict[str, Any]:
    view: dict[str, Any] = {"field": fact.field, "value": fact.value}
    if fact.unit:
        view["unit"] = fact.unit
    view["confidence"] = fact.confidence
    if fact.source:
        view.update(doc_id=fact.source.doc_id, page=fact.source.page, quote=fact.source.quote)
    return view


def _document_lines(case: CaseBundle, words: list[str]) -> list[dict[str, Any]]:
    hits = []
    for document in case.documents:
        for page_number, page in enumerate(document.pages, start=1):
            for line in page.splitlines():
                if line.strip() and _words_in(line, words):
                    hits.append(
                        {"doc_id": document.doc_id, "page": page_number, "line": line.strip()}
                    )
    return hits
