"""Policy documents turned into a searchable structure: a tree index and FTS5 spans."""

from retrieval.tree import TreeNode, find_node, walk

__all__ = ["TreeNode", "find_node", "walk"]
