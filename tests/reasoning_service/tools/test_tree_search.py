"""Tree search: LLM over the table of contents, lexical behind it; its LLM calls go through the
criterion's trace path and its tokens are reported with the result."""

from __future__ import annotations

from reasoning_service.errors import ProviderUnavailable
from reasoning_service.llm.recording import RecordingLLMClient, record_to_current_task
from reasoning_service.models import LLMReply, Usage
from reasoning_service.testing.scripted_llm import ScriptedLLM, tool_call
from reasoning_service.tools.tree_search import LexicalTreeSearch, LLMTreeSearch, table_of_contents
from retrieval import walk


def ahi_node(policy) -> str:
    return next(n.node_id for n in walk(policy.tree) if "AHI or RDI" in n.text)


def reply_with_usage(reply: LLMReply, tokens: int) -> LLMReply:
    return reply.model_copy(update={"usage": Usage(input_tokens=tokens, output_tokens=5)})


async def test_the_llm_choice_is_recorded_in_the_trace_and_its_tokens_reported(
    cpap_policy, retrieval
):
    node = ahi_node(cpap_policy)
    choice = tool_call("select_nodes", {"thinking": "AHI threshold", "node_list": [node, "9999"]})
    scripted = ScriptedLLM([reply_with_usage(choice, 300)])
    search = LLMTreeSearch(
        RecordingLLMClient(scripted, record_to_current_task), LexicalTreeSearch(retrieval)
    )
    interactions: list = []
    found = await search.search(cpap_policy, "AHI threshold", interactions=interactions)
    assert found.method == "llm" and found.node_ids == [node]
    assert found.usage == Usage(input_tokens=300, output_tokens=5)
    assert len(interactions) == 1 and interactions[0].success
    scripted.assert_complete()


async def test_an_llm_failure_falls_back_to_lexical_and_is_still_recorded(cpap_policy, retrieval):
    scripted = ScriptedLLM([ProviderUnavailable("down", provider="scripted", model="m")])
    search = LLMTreeSearch(
        RecordingLLMClient(scripted, record_to_current_task), LexicalTreeSearch(retrieval)
    )
    interactions: list = []
    found = await search.search(cpap_policy, "AHI events per hour", interactions=interactions)
    assert found.method == "lexical" and found.node_ids
    assert [i.success for i in interactions] == [False]


def test_the_table_of_contents_has_no_text(cpap_policy):
    def keys(nodes):
        for node in nodes:
            yield set(node)
            yield from keys(node.get("nodes", []))

    assert all("text" not in k for k in keys(table_of_contents(cpap_policy.tree)))
