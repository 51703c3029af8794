"""RetrievalService: FTS5 search over sections and exact sentence spans of indexed policies."""

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from retrieval import (
    NodeHit,
    RetrievalService,
    Span,
    TreeNode,
    build_tree_from_markdown,
    find_node,
    walk,
)
from testdata import EXAMPLES

POLICIES = EXAMPLES / "policies"
CPAP = "NCD-240.4"
NASTY_QUERIES = [
    "",
    "   ",
    "the of and",
    '"',
    "AND OR NOT",
    "NEAR(cpap psg, 2)",
    "title:cpap",
    "{title}: x",
    "cpap*",
    "^start",
    "'; DROP TABLE policies; --",
    "p1",
    "policy_key : p1",
    "😴 sleep-apnea/OSA (AHI≥15)",
]


def _tree(policy_id: str) -> list[TreeNode]:
    return build_tree_from_markdown((POLICIES / f"{policy_id}.md").read_text())


def _tiny_tree(words: str) -> list[TreeNode]:
    return build_tree_from_markdown(f"# Policy\n\nIntro.\n\n## Section\n\n{words}\n")


@pytest.fixture
async def service() -> AsyncIterator[RetrievalService]:
    service = RetrievalService()
    for path in sorted(POLICIES.glob("*.md")):
        await service.index_policy(path.stem, _tree(path.stem))
    yield service
    await service.aclose()


async def test_search_nodes_ranks_the_section_that_holds_the_answer_first(
    service: RetrievalService,
):
    hits = await service.search_nodes(CPAP, "unattended home sleep test Type IV device channels")

    assert hits and all(isinstance(hit, NodeHit) for hit in hits)
    assert hits[0].title == "B. Nationally Covered Indications"
    assert hits[0].policy_id == CPAP and hits[0].node_id == "0002"
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


async def test_search_nodes_stems_words_and_respects_the_limit(service: RetrievalService):
    hits = await service.search_nodes(CPAP, "covering indications", limit=2)

    assert len(hits) == 2
    assert {hit.title for hit in hits} <= {
        "B. Nationally Covered Indications",
        "C. Nationally Non-covered Indications",
    }


async def test_search_nodes_only_returns_nodes_of_the_requested_policy(service: RetrievalService):
    hits = await service.search_nodes("NCD-100.1", "CPAP obstructive sleep apnea bariatric")

    assert hits and all(hit.policy_id == "NCD-100.1" for hit in hits)
    titles = {node.node_id: node.title for node in walk(_tree("NCD-100.1"))}
    assert all(titles[hit.node_id] == hit.title for hit in hits)


async def test_spans_tighten_returns_exact_spans_with_offsets_into_the_node_text(
    service: RetrievalService,
):
    node = find_node(_tree(CPAP), "0002")
    assert node is not None

    spans = await service.spans_tighten(CPAP, "0002", "Type IV device 3 channels", limit=2)

    assert len(spans) == 2 and all(isinstance(span, Span) for span in spans)
    assert spans[0].text == (
        "unattended HST with a Type IV home sleep monitoring device that measures at least 3 "
        "channels."
    )
    for span in spans:
        assert node.text[span.char_start : span.char_end] == span.text
        assert (span.policy_id, span.node_id) == (CPAP, "0002")
    assert spans[0].score >= spans[1].score


async def test_spans_tighten_stays_inside_the_requested_node(service: RetrievalService):
    spans = await service.spans_tighten(CPAP, "0001", "apnea hypopnea airflow")
    node = find_node(_tree(CPAP), "0001")
    assert node is not None

    assert spans and all(span.text in node.text for span in spans)


async def test_unknown_node_or_policy_gives_no_results(service: RetrievalService):
    assert await service.spans_tighten(CPAP, "9999", "CPAP") == []
    assert await service.spans_tighten("NO-SUCH", "0000", "CPAP") == []
    assert await service.search_nodes("NO-SUCH", "CPAP") == []


@pytest.mark.parametrize("query", NASTY_QUERIES)
async def test_any_free_text_query_is_safe(service: RetrievalService, query: str):
    hits = await service.search_nodes(CPAP, query)
    spans = await service.spans_tighten(CPAP, "0002", query)

    assert isinstance(hits, list) and isinstance(spans, list)


async def test_empty_and_stopword_only_queries_return_nothing(service: RetrievalService):
    assert await service.search_nodes(CPAP, "") == []
    assert await service.search_nodes(CPAP, "what is the") == []
    assert await service.spans_tighten(CPAP, "0002", "  ") == []


async def test_reindexing_a_policy_replaces_its_previous_index():
    service = RetrievalService()
    await service.index_policy("P", _tiny_tree("Zebras are covered."))
    await service.index_policy("P", _tiny_tree("Giraffes are covered."))

    assert await service.search_nodes("P", "zebras") == []
    assert [hit.title for hit in await service.search_nodes("P", "giraffes")] == ["Section"]
    assert len(await service.spans_tighten("P", "0001", "covered")) == 1
    await service.aclose()


async def test_removed_policy_is_no_longer_searchable_and_others_are_untouched():
    service = RetrievalService()
    await service.index_policy("P", _tiny_tree("Zebras are covered."))
    await service.index_policy("Q", _tiny_tree("Zebras are excluded."))

    await service.remove_policy("P")
    await service.remove_policy("never-indexed")

    assert await service.search_nodes("P", "zebras") == []
    assert len(await service.search_nodes("Q", "zebras")) == 1
    await service.aclose()


async def test_index_persists_in_a_database_file(tmp_path: Path):
    path = tmp_path / "retrieval.db"
    first = RetrievalService(path)
    await first.index_policy(CPAP, _tree(CPAP))
    await first.aclose()

    second = RetrievalService(path)
    hits = await second.search_nodes(CPAP, "caregiver education")
    await second.aclose()

    assert hits[0].node_id == "0002"


async def test_many_concurrent_callers_share_one_service(service: RetrievalService):
    async def index_then_search(number: int) -> list[NodeHit]:
        await service.index_policy(f"T-{number}", _tiny_tree(f"Token{number} is covered."))
        return await service.search_nodes(f"T-{number}", f"token{number}")

    searches = [service.search_nodes(CPAP, "caregiver family member") for _ in range(50)]
    results = await asyncio.gather(*searches, *(index_then_search(n) for n in range(50)))

    assert {hits[0].node_id for hits in results[:50]} == {"0002"}
    assert all(len(hits) == 1 for hits in results[50:])


async def test_a_thousand_policies_index_and_search_quickly():
    service = RetrievalService()
    started = time.perf_counter()
    for number in range(1000):
        await service.index_policy(f"P-{number}", _tiny_tree(f"Device{number} is covered."))
    hits = await service.search_nodes("P-777", "device777 covered")
    spans = await service.spans_tighten("P-777", "0001", "device777")
    elapsed_s = time.perf_counter() - started
    await service.aclose()

    assert [hit.policy_id for hit in hits] == ["P-777"]
    assert [span.text for span in spans] == ["Device777 is covered."]
    assert elapsed_s < 30


async def test_closed_service_refuses_calls():
    service = RetrievalService()
    await service.aclose()
    await service.aclose()

    with pytest.raises(RuntimeError, match="closed"):
        await service.search_nodes(CPAP, "CPAP")
