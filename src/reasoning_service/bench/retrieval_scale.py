"""Item 5: the tree + FTS5 index over 1, 100 and 1000 policies, and query latency at each size.

Policies are synthesised from the real ones: copy i of a policy gets its own id, a numbered
title, every number in its text shifted by i, and a few words swapped for synonyms, so the
index holds distinct documents of realistic shape and vocabulary. Per size: tree build and
index build time (per page: 3,000 characters of Markdown, about one printed page, since
Markdown has no pages), then `pi_search`'s lexical fallback (`LexicalTreeSearch`) and
`spans_tighten` on random policies with the real criteria as queries (p50/p99).
"""

from __future__ import annotations

import random
import re
import time
from typing import Any

from reasoning_service.bench.data import BenchData
from reasoning_service.bench.stats import rss_mb, summarise_ms
from reasoning_service.models import Policy
from reasoning_service.tools.tree_search import LexicalTreeSearch
from retrieval.markdown import build_tree_from_markdown
from retrieval.service import RetrievalService
from retrieval.tree import walk

__all__ = ["run_retrieval_scale", "synthesise_markdown"]

CHARS_PER_PAGE = 3000
_NUMBER = re.compile(r"\b\d+\b")
_SWAPS = {
    "patient": "beneficiary",
    "beneficiary": "patient",
    "covered": "reimbursed",
    "treatment": "therapy",
    "must": "shall",
    "documented": "recorded",
}
_SWAP = re.compile(r"\b(" + "|".join(_SWAPS) + r")\b")


def synthesise_markdown(markdown: str, copy: int) -> str:
    """Copy `copy` of a policy: numbers shifted, some words swapped, a numbered title."""
    rng = random.Random(copy)
    shifted = _NUMBER.sub(lambda m: str(int(m.group()) + copy), markdown)
    swapped = _SWAP.sub(lambda m: _SWAPS[m.group()] if rng.random() < 0.3 else m.group(), shifted)
    return f"# Synthetic policy copy {copy}\n\n{swapped}"


async def run_retrieval_scale(
    data: BenchData, *, sizes: list[int], queries: int, seed: int = 7
) -> dict[str, Any]:
    """Build an index of each size and time queries against it."""
    rows = [await _one_size(data, size, queries, seed) for size in sizes]
    return {
        "what": "tree + FTS5 index over N synthesised policies; lexical pi_search and "
        "spans_tighten latency; build time per 3,000-character page",
        "queries_per_size": queries,
        "sizes": rows,
    }


async def _one_size(data: BenchData, size: int, queries: int, seed: int) -> dict[str, Any]:
    sources = list(data.markdown.items())
    criteria = [
        (policy_id, c.text)
        for policy_id, policy in data.policies.items()
        if policy.criteria is not None
        for c in policy.criteria.criteria
    ]
    retrieval = RetrievalService()
    try:
        trees: dict[str, tuple[str, list[Any]]] = {}
        chars, tree_s = 0, 0.0
        for i in range(size):
            base_id, markdown = sources[i % len(sources)]
            text = markdown if i < len(sources) else synthesise_markdown(markdown, i)
            started = time.perf_counter()
            tree = build_tree_from_markdown(text)
            tree_s += time.perf_counter() - started
            chars += len(text)
            trees[f"{base_id}~{i}"] = (base_id, tree)
        started = time.perf_counter()
        for policy_id, (_, tree) in trees.items():
            await retrieval.index_policy(policy_id, tree)
        index_s = time.perf_counter() - started
        pages = max(chars / CHARS_PER_PAGE, 1e-9)
        search = LexicalTreeSearch(retrieval)
        rng = random.Random(seed)
        ids = list(trees)
        search_s, spans_s = [], []
        for _ in range(queries):
            policy_id = rng.choice(ids)
            base_id, tree = trees[policy_id]
            query = rng.choice([text for pid, text in criteria if pid == base_id] or ["coverage"])
            policy = _stub_policy(data.policies[base_id], policy_id, tree)
            started = time.perf_counter()
            found = await search.search(policy, query)
            search_s.append(time.perf_counter() - started)
            node_id = found.node_ids[0] if found.node_ids else next(walk(tree)).node_id
            started = time.perf_counter()
            await retrieval.spans_tighten(policy_id, node_id, query)
            spans_s.append(time.perf_counter() - started)
        nodes = sum(sum(1 for _ in walk(tree)) for _, tree in trees.values())
    finally:
        await retrieval.aclose()
    return {
        "policies": size,
        "nodes": nodes,
        "pages": round(pages, 1),
        "tree_build_ms_per_page": round(tree_s * 1000 / pages, 3),
        "index_build_ms_per_page": round(index_s * 1000 / pages, 3),
        "index_build_s": round(index_s, 3),
        "pi_search_lexical": summarise_ms(search_s),
        "spans_tighten": summarise_ms(spans_s),
        "process_rss_mb": rss_mb().get("rss_mb"),
    }


def _stub_policy(policy: Policy, policy_id: str, tree: list[Any]) -> Policy:
    return policy.model_copy(update={"policy_id": policy_id, "tree": tree})
