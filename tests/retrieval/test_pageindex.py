"""PageIndex tree JSON is imported as-is and exported in the same shape."""

import json
from typing import Any

import pytest

from retrieval import (
    TreeBuildError,
    build_tree_from_markdown,
    tree_from_pageindex,
    tree_to_pageindex,
    walk,
)
from testdata import EXAMPLES

POLICY = EXAMPLES / "policies" / "NCD-240.4.md"

PDF_OUTPUT = {
    "doc_name": "annual-report.pdf",
    "doc_description": "A report.",
    "structure": [
        {
            "title": "Financial Stability",
            "node_id": "0006",
            "start_index": 21,
            "end_index": 22,
            "summary": "The Federal Reserve ...",
            "nodes": [
                {
                    "title": "Monitoring Financial Vulnerabilities",
                    "node_id": "0007",
                    "start_index": 22,
                    "end_index": 28,
                    "summary": "The Federal Reserve's monitoring ...",
                    "text": "Full text.",
                }
            ],
        }
    ],
}


def test_pdf_mode_output_keeps_ids_pages_summaries_and_text():
    (root,) = tree_from_pageindex(PDF_OUTPUT)

    assert (root.node_id, root.start_index, root.end_index) == ("0006", 21, 22)
    assert root.text == ""
    child = root.nodes[0]
    assert (child.node_id, child.title, child.end_index, child.text) == (
        "0007",
        "Monitoring Financial Vulnerabilities",
        28,
        "Full text.",
    )


def test_markdown_mode_output_with_line_numbers_and_prefix_summary_is_accepted():
    markdown_output = [
        {
            "title": "Policy",
            "node_id": "0000",
            "line_num": 1,
            "prefix_summary": "About the policy.",
            "nodes": [{"title": "A", "node_id": "0001", "line_num": 5, "summary": "A."}],
        }
    ]

    (root,) = tree_from_pageindex(markdown_output)

    assert (root.line_num, root.summary, root.start_index) == (1, "About the policy.", None)
    assert root.nodes[0].line_num == 5


def test_missing_node_ids_are_assigned_depth_first():
    bare = [{"title": "A", "nodes": [{"title": "A.1"}, {"title": "A.2"}]}, {"title": "B"}]

    tree = tree_from_pageindex(bare)

    assert [(node.node_id, node.title) for node in walk(tree)] == [
        ("0000", "A"),
        ("0001", "A.1"),
        ("0002", "A.2"),
        ("0003", "B"),
    ]


def test_numeric_node_ids_are_zero_padded():
    (node,) = tree_from_pageindex([{"title": "A", "node_id": 7}])

    assert node.node_id == "0007"


def test_markdown_tree_round_trips_through_pageindex_json():
    tree = build_tree_from_markdown(POLICY.read_text())

    exported = json.loads(json.dumps(tree_to_pageindex(tree, doc_name="NCD-240.4")))

    assert exported["doc_name"] == "NCD-240.4"
    assert "start_index" not in exported["structure"][0]
    assert tree_from_pageindex(exported) == tree


def test_pdf_mode_output_round_trips():
    tree = tree_from_pageindex(PDF_OUTPUT)

    assert tree_from_pageindex(tree_to_pageindex(tree, doc_name="x")) == tree


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"doc_name": "x"}, "no 'structure'"),
        ({"structure": "nope"}, "must be a list"),
        ([42], r"structure\[0\]: a node must be an object"),
        ([{"node_id": "0000"}], r"structure\[0\]: 'title'"),
        ([{"title": "A", "node_id": "abc"}], "4-digit"),
        (
            [{"title": "A", "nodes": [{"title": "B", "start_index": 0}]}],
            r"nodes\[0\]: 'start_index'",
        ),
        ([{"title": "A", "start_index": 3, "end_index": 2}], "before 'start_index'"),
        ([{"title": "A", "text": 5}], "'text' must be a string"),
        ([{"title": "A", "node_id": "0001"}, {"title": "B", "node_id": "0001"}], "repeats"),
    ],
)
def test_malformed_input_raises_tree_build_error_naming_the_problem(obj: Any, message: str):
    with pytest.raises(TreeBuildError, match=message):
        tree_from_pageindex(obj)
