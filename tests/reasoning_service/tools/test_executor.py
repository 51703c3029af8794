"""`ToolExecutor` and the tool handlers: argument checks, the three read-only tools, the cache."""

from __future__ import annotations

import json

import pytest

from reasoning_service.models import ToolCall
from reasoning_service.models.task import CriterionTask
from reasoning_service.tools.executor import (
    TOOL_DESCRIPTIONS,
    ToolExecutor,
    facts_get,
    parse_arguments,
    tool_specs,
)
from reasoning_service.tools.finish import FINISH, FINISH_PARAMETERS
from reasoning_service.tools.tree_search import LexicalTreeSearch
from retrieval import walk


def call(name: str, arguments: object, call_id: str = "c1") -> ToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id=call_id, name=name, arguments_json=raw)


@pytest.fixture
def executor(cpap_case, cpap_policy, retrieval) -> ToolExecutor:
    criterion = cpap_policy.criteria.criterion("NCD-240.4/C5")
    task = CriterionTask(case=cpap_case, policy=cpap_policy, criterion=criterion)
    return ToolExecutor(task, retrieval=retrieval, tree_search=LexicalTreeSearch(retrieval))


def test_specs_are_the_four_tools_with_finish_from_its_own_module():
    specs = {spec.name: spec for spec in tool_specs()}
    assert list(specs) == ["pi_search", "facts_get", "spans_tighten", FINISH]
    assert specs[FINISH].parameters == FINISH_PARAMETERS
    assert specs[FINISH].description == TOOL_DESCRIPTIONS[FINISH]


def test_prompt_descriptions_override_the_defaults():
    specs = {s.name: s for s in tool_specs({"facts_get": "Look it up."})}
    assert specs["facts_get"].description == "Look it up."
    assert specs["pi_search"].description == TOOL_DESCRIPTIONS["pi_search"]


@pytest.mark.parametrize(
    ("bad", "hint"),
    [
        (call("lookup", {}), "Unknown tool 'lookup'. Available tools: pi_search"),
        (call("pi_search", "{not json"), "not valid JSON"),
        (call("pi_search", "[1, 2]"), "must be a JSON object"),
        (call("pi_search", {"query": "x"}), "Invalid arguments for pi_search: query"),
        (call("pi_search", {"query": "ahi", "extra": 1}), "Additional properties"),
        (call("facts_get", {}), "facts_get needs `field`"),
    ],
)
def test_a_bad_call_gets_a_message_that_says_how_to_fix_it(bad, hint):
    message = parse_arguments(bad)
    assert isinstance(message, str) and hint in message


def test_long_string_arguments_are_cut():
    arguments = parse_arguments(call("pi_search", {"query": "a" * 5000}))
    assert isinstance(arguments, dict) and len(arguments["query"]) == 2000


def test_facts_get_by_field_prefix_and_by_words(cpap_case):
    by_field = facts_get(cpap_case, "sleep_study", None)
    assert {f["field"] for f in by_field["facts"]} >= {"sleep_study.ahi", "sleep_study.type"}
    ahi = next(f for f in by_field["facts"] if f["field"] == "sleep_study.ahi")
    assert ahi["doc_id"] == "psg-1" and ahi["quote"] == "AHI: 18 events/hour"
    by_words = facts_get(cpap_case, None, "supine ahi")
    assert {"doc_id": "psg-1", "page": 2, "line": "Supine AHI: 27 events/hour"} in by_words[
        "document_lines"
    ]


async def test_pi_search_returns_nodes_of_the_policy_tree(executor, cpap_policy):
    [outcome] = await executor.execute([call("pi_search", {"query": "AHI 15 events per hour"})])
    assert not outcome.is_error
    found = json.loads(outcome.content)
    known = {node.node_id for node in walk(cpap_policy.tree)}
    assert found["method"] == "lexical" and found["nodes"]
    assert {node["node_id"] for node in found["nodes"]} <= known


async def test_spans_tighten_rejects_a_node_the_policy_does_not_have(executor):
    [outcome] = await executor.execute([call("spans_tighten", {"node_id": "9999", "query": "ahi"})])
    assert outcome.is_error and "not in this policy" in outcome.content


async def test_calls_run_in_order_and_a_repeat_is_a_cache_hit(executor):
    first, second, bad = await executor.execute(
        [
            call("facts_get", {"field": "sleep_study.ahi"}, "a"),
            call("facts_get", {"field": "sleep_study.ahi"}, "b"),
            call("facts_get", {"field": 7}, "c"),
        ]
    )
    assert [o.tool_call_id for o in (first, second, bad)] == ["a", "b", "c"]
    [again] = await executor.execute([call("facts_get", {"field": "sleep_study.ahi"}, "d")])
    assert again.cache_hit and again.content == first.content
    assert bad.is_error and "field" in bad.content


async def test_finish_is_never_run_as_a_tool(executor):
    [outcome] = await executor.execute([call(FINISH, {"status": "met"})])
    assert outcome.is_error
