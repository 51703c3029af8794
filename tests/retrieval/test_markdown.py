"""Markdown policies become heading trees whose node texts hold every criterion quote verbatim."""

import json

import pytest

from retrieval import TreeNode, build_tree_from_markdown, walk
from retrieval.markdown import PREAMBLE_TITLE
from testdata import EXAMPLES

POLICY_IDS = sorted(path.stem for path in (EXAMPLES / "policies").glob("*.md"))

DOC = """\
# Policy

Intro sentence. More intro.

## A. General

General text.

### Detail

- a. first item; or
- b. second item.

## B. Covered

```
# not a heading
```
"""


def _titles(nodes: list[TreeNode]) -> list[tuple[str, str, int | None]]:
    return [(node.node_id, node.title, node.line_num) for node in walk(nodes)]


def test_headings_nest_by_level_with_depth_first_ids_and_line_numbers():
    tree = build_tree_from_markdown(DOC)

    assert _titles(tree) == [
        ("0000", "Policy", 1),
        ("0001", "A. General", 5),
        ("0002", "Detail", 9),
        ("0003", "B. Covered", 14),
    ]
    assert [child.title for child in tree[0].nodes] == ["A. General", "B. Covered"]


def test_text_is_the_sections_own_body_verbatim_without_surrounding_blank_lines():
    tree = build_tree_from_markdown(DOC)
    detail = tree[0].nodes[0].nodes[0]

    assert tree[0].text == "Intro sentence. More intro."
    assert tree[0].nodes[0].text == "General text."
    assert detail.text == "- a. first item; or\n- b. second item."


def test_hashes_inside_fenced_code_are_body_text_not_headings():
    covered = build_tree_from_markdown(DOC)[0].nodes[1]

    assert covered.nodes == []
    assert covered.text == "```\n# not a heading\n```"


def test_summary_is_the_first_sentence_or_the_child_titles_when_the_body_is_empty():
    tree = build_tree_from_markdown("# Root\n\n## One\n\nFirst. Second.\n\n## Two\n")

    assert tree[0].summary == "One; Two"
    assert tree[0].nodes[0].summary == "First."
    assert tree[0].nodes[1].summary == ""


def test_long_first_sentence_is_capped_in_the_summary():
    body = "word " * 100
    (node,) = build_tree_from_markdown(f"# T\n\n{body}\n")

    assert len(node.summary) <= 200
    assert node.summary.endswith("…")


def test_text_before_the_first_heading_goes_into_a_preamble_node():
    tree = build_tree_from_markdown("Issued 2024.\n\n# Title\n\nBody.\n")

    assert _titles(tree) == [("0000", PREAMBLE_TITLE, 1), ("0001", "Title", 3)]
    assert tree[0].text == "Issued 2024."


def test_document_without_headings_is_one_preamble_node_and_empty_document_is_empty():
    assert build_tree_from_markdown("Just text.\n")[0].text == "Just text."
    assert build_tree_from_markdown("") == []
    assert build_tree_from_markdown("\n\n") == []


def test_closing_hashes_crlf_and_non_headings_are_handled():
    tree = build_tree_from_markdown("# Title ##\r\n#hashtag\r\n    # indented code\r\n")

    assert [node.title for node in tree] == ["Title"]
    assert tree[0].text == "#hashtag\n    # indented code"


def test_skipped_heading_levels_still_nest_under_the_nearest_shallower_heading():
    tree = build_tree_from_markdown("## A\n#### deep\n### mid\n# top\n")

    assert [(n.title, [c.title for c in n.nodes]) for n in tree] == [
        ("A", ["deep", "mid"]),
        ("top", []),
    ]


@pytest.mark.parametrize("policy_id", POLICY_IDS)
def test_every_criterion_quote_is_verbatim_in_some_node_text(policy_id: str):
    tree = build_tree_from_markdown((EXAMPLES / "policies" / f"{policy_id}.md").read_text())
    criteria = json.loads((EXAMPLES / "criteria" / f"{policy_id}.json").read_text())["criteria"]

    texts = [node.text for node in walk(tree)]
    missing = [c["criterion_id"] for c in criteria if not any(c["quote"] in t for t in texts)]
    assert criteria and not missing


@pytest.mark.parametrize("policy_id", POLICY_IDS)
def test_no_line_of_a_real_policy_is_lost(policy_id: str):
    source = (EXAMPLES / "policies" / f"{policy_id}.md").read_text()
    tree = build_tree_from_markdown(source)

    kept = "\n".join(f"{node.title}\n{node.text}" for node in walk(tree))
    for line in source.splitlines():
        assert line.lstrip("# ").strip() in kept
