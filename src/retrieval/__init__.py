"""Policy documents turned into a searchable structure: a tree index and FTS5 spans."""

from retrieval.errors import TreeBuildError
from retrieval.markdown import build_tree_from_markdown
from retrieval.pageindex import tree_from_pageindex, tree_to_pageindex
from retrieval.pdf import build_tree_from_pdf
from retrieval.service import NodeHit, RetrievalService, Span
from retrieval.tree import TreeNode, find_node, walk

__all__ = [
    "NodeHit",
    "RetrievalService",
    "Span",
    "TreeBuildError",
    "TreeNode",
    "build_tree_from_markdown",
    "build_tree_from_pdf",
    "find_node",
    "tree_from_pageindex",
    "tree_to_pageindex",
    "walk",
]
