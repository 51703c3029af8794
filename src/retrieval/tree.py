"""The PageIndex-compatible policy tree.

A tree is a list of root `TreeNode`s. Node ids are 4-digit strings assigned depth-first
("0000", "0001", …), as PageIndex does. Markdown trees carry `line_num` (1-based line of the
heading); PDF trees carry `start_index`/`end_index` (1-based pages, inclusive).
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, Field

from retrieval.errors import TreeBuildError

MAX_NODES = 10_000
"""Node ids have four digits, so a tree holds at most this many nodes."""
MAX_DEPTH = 200
"""Deepest nesting the recursive builders accept (far below Python's recursion limit)."""


class TreeNode(BaseModel):
    """One section of a policy document."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    title: str
    """Section heading as written in the document."""
    node_id: str = Field(pattern=r"^\d{4}$")
    """4-digit depth-first id, unique within one policy."""
    start_index: int | None = Field(default=None, ge=1)
    """First page of the section (PDF sources)."""
    end_index: int | None = Field(default=None, ge=1)
    """Last page of the section, inclusive (PDF sources)."""
    line_num: int | None = Field(default=None, ge=1)
    """1-based line of the heading (Markdown sources)."""
    summary: str = ""
    """Short description shown to tree search in place of the text."""
    text: str = ""
    """The section's own text, without its children's; citations quote from it."""
    nodes: list[TreeNode] = Field(default_factory=list)
    """Subsections, in document order."""


def walk(nodes: list[TreeNode]) -> Iterator[TreeNode]:
    """Yield every node depth-first, in node-id order."""
    for node in nodes:
        yield node
        yield from walk(node.nodes)


def find_node(nodes: list[TreeNode], node_id: str) -> TreeNode | None:
    """Return the node with `node_id`, or None."""
    return next((node for node in walk(nodes) if node.node_id == node_id), None)


def check_node_count(count: int) -> None:
    """Raise TreeBuildError when a document would need more than `MAX_NODES` nodes."""
    if count > MAX_NODES:
        raise TreeBuildError(f"the document has more than {MAX_NODES} sections")


def measure(nodes: list[TreeNode]) -> tuple[int, int]:
    """(node count, depth) of a tree, without recursion."""
    count, depth = 0, 0
    stack = [(node, 1) for node in nodes]
    while stack:
        node, level = stack.pop()
        count, depth = count + 1, max(depth, level)
        stack.extend((child, level + 1) for child in node.nodes)
    return count, depth
