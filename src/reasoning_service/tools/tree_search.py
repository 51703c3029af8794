"""`pi_search`: find the policy sections that govern a question.

The LLM sees the tree's titles and summaries, never the full text, and answers
`{"thinking": ..., "node_list": [...]}`; ids it invents are dropped. With no LLM, or when the
LLM fails or answers badly, the lexical search (FTS5 bm25 over titles, summaries and text)
answers instead, and the result says which method was used.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from typing import Protocol

from reasoning_service.errors import LLMError
from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.recording import complete_recorded
from reasoning_service.models import LLMInteraction, LLMRequest, Message, Policy, ToolSpec, Usage
from retrieval.service import RetrievalService
from retrieval.tree import TreeNode, walk

logger = logging.getLogger(__name__)

_PROMPT = (
    "You are given the table of contents of a coverage policy as JSON (node_id, title, summary, "
    "nodes). Select the nodes most likely to contain the text that answers the question. "
    "Call select_nodes with your reasoning and at most 3 node ids from the tree."
)
_SELECT = ToolSpec(
    name="select_nodes",
    description="Return the chosen node ids.",
    parameters={
        "type": "object",
        "properties": {
            "thinking": {"type": "string"},
            "node_list": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        },
        "required": ["thinking", "node_list"],
    },
)


@dataclass(frozen=True)
class TreeSearchResult:
    node_ids: list[str]
    method: str
    """`llm` or `lexical`."""
    thinking: str = ""
    usage: Usage = field(default_factory=Usage)
    """Tokens the LLM spent on this search (none for `lexical`); the criterion's usage adds it."""


class TreeSearch(Protocol):
    async def search(
        self, policy: Policy, query: str, *, interactions: list[LLMInteraction] | None = None
    ) -> TreeSearchResult:
        """Find the nodes for `query`; LLM calls are recorded into `interactions` (the
        criterion's trace) through `complete_recorded`, the same path as the loop's calls."""
        ...


class LexicalTreeSearch:
    """bm25 over the FTS5 node index."""

    def __init__(self, retrieval: RetrievalService, *, limit: int = 3) -> None:
        self._retrieval = retrieval
        self._limit = limit

    async def search(
        self, policy: Policy, query: str, *, interactions: list[LLMInteraction] | None = None
    ) -> TreeSearchResult:
        hits = await self._retrieval.search_nodes(policy.policy_id, query, limit=self._limit)
        return TreeSearchResult([h.node_id for h in hits], method="lexical")


class LLMTreeSearch:
    """PageIndex-style reasoning over the table of contents, with the lexical search behind it."""

    def __init__(self, llm: LLMClient, fallback: LexicalTreeSearch) -> None:
        self._llm = llm
        self._fallback = fallback

    async def search(
        self, policy: Policy, query: str, *, interactions: list[LLMInteraction] | None = None
    ) -> TreeSearchResult:
        request = LLMRequest(
            messages=(
                Message(role="system", content=_PROMPT),
                Message(
                    role="user",
                    content=f"Tree: {json.dumps(table_of_contents(policy.tree))}\n"
                    f"Question: {query}",
                ),
            ),
            tools=(_SELECT,),
            tool_choice=_SELECT.name,
            max_output_tokens=300,
        )
        try:
            reply = await complete_recorded(
                self._llm, request, interactions if interactions is not None else []
            )
        except LLMError as exc:
            logger.warning("tree search fell back to lexical", extra={"error_kind": exc.kind})
            return await self._fallback.search(policy, query)
        known = {node.node_id for node in walk(policy.tree)}
        for call in reply.tool_calls:
            try:
                arguments = json.loads(call.arguments_json)
                chosen = [str(n) for n in arguments.get("node_list", []) if str(n) in known]
            except (json.JSONDecodeError, AttributeError):
                continue
            if chosen:
                thinking = str(arguments.get("thinking", ""))
                return TreeSearchResult(chosen[:3], "llm", thinking, usage=reply.usage)
        found = await self._fallback.search(policy, query)
        return replace(found, usage=reply.usage)


def table_of_contents(nodes: list[TreeNode]) -> list[dict[str, object]]:
    """The tree without text: what the LLM may see."""
    return [
        {
            "node_id": n.node_id,
            "title": n.title,
            "summary": n.summary[:200],
            **({"nodes": table_of_contents(n.nodes)} if n.nodes else {}),
        }
        for n in nodes
    ]
