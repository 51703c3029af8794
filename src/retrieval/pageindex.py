"""Import and export trees in PageIndex's JSON format (github.com/VectifyAI/PageIndex).

PageIndex writes `{"doc_name": ..., "structure": [node, ...]}` (sometimes with
`doc_description`), where a node is `{"title", "node_id", "start_index", "end_index",
"summary", "text", "nodes"}`; Markdown mode writes `line_num` instead of pages and
`prefix_summary` on nodes with children. Every field but `title` may be missing. We also accept
a bare list of nodes. If any node lacks an id, all ids are reassigned depth-first, so ids stay
unique and in PageIndex's order.
"""

from collections.abc import Iterator
from typing import Any

from retrieval.errors import TreeBuildError
from retrieval.tree import MAX_DEPTH, TreeNode, check_node_count

_INT_FIELDS = ("start_index", "end_index", "line_num")


def tree_from_pageindex(obj: Any) -> list[TreeNode]:
    """Return the tree held in PageIndex JSON (already parsed), or raise `TreeBuildError`."""
    structure = _structure_of(obj)
    _check_size(structure)
    reassign = _any_missing_id(structure)
    counter = iter(range(10_000))
    nodes = [
        _to_node(raw, f"structure[{index}]", counter, reassign)
        for index, raw in enumerate(structure)
    ]
    _check_unique_ids(nodes)
    return nodes


def tree_to_pageindex(nodes: list[TreeNode], *, doc_name: str) -> dict[str, Any]:
    """Return PageIndex JSON for `nodes`, leaving out unset pages, line numbers and empty fields."""
    return {"doc_name": doc_name, "structure": [_from_node(node) for node in nodes]}


def _structure_of(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        if "structure" not in obj:
            raise TreeBuildError("PageIndex JSON object has no 'structure' list")
        obj = obj["structure"]
    if not isinstance(obj, list):
        raise TreeBuildError(
            f"PageIndex 'structure' must be a list of nodes, got {type(obj).__name__}"
        )
    return obj


def _check_size(structure: list[Any]) -> None:
    """Count nodes and depth without recursion, before the recursive build runs."""
    count = 0
    stack = [(raw, 1) for raw in structure]
    while stack:
        raw, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise TreeBuildError(f"the tree is nested more than {MAX_DEPTH} levels deep")
        children = raw.get("nodes") if isinstance(raw, dict) else None
        if isinstance(children, list):
            stack.extend((child, depth + 1) for child in children)
    check_node_count(count)


def _any_missing_id(raw_nodes: list[Any]) -> bool:
    for raw in raw_nodes:
        if not isinstance(raw, dict):
            continue  # reported with its path by _to_node
        if raw.get("node_id") in (None, ""):
            return True
        children = raw.get("nodes")
        if isinstance(children, list) and _any_missing_id(children):
            return True
    return False


def _to_node(raw: Any, path: str, counter: Iterator[int], reassign: bool) -> TreeNode:
    if not isinstance(raw, dict):
        raise TreeBuildError(f"{path}: a node must be an object, got {type(raw).__name__}")
    title = raw.get("title")
    if not isinstance(title, str):
        raise TreeBuildError(f"{path}: 'title' must be a string")
    assigned = f"{next(counter):04d}"  # drawn for every node to keep depth-first order
    node_id = assigned if reassign else _node_id(raw["node_id"], path)
    pages = {name: _int_field(raw, name, path) for name in _INT_FIELDS}
    if pages["start_index"] is None and isinstance(raw.get("physical_index"), int):
        pages["start_index"] = _int_field(raw, "physical_index", path)
    _check_page_range(pages["start_index"], pages["end_index"], path)
    children = raw.get("nodes") or []
    if not isinstance(children, list):
        raise TreeBuildError(f"{path}.nodes: must be a list")
    return TreeNode(
        title=title,
        node_id=node_id,
        **pages,
        summary=_str_field(raw, "summary", path) or _str_field(raw, "prefix_summary", path),
        text=_str_field(raw, "text", path),
        nodes=[
            _to_node(child, f"{path}.nodes[{index}]", counter, reassign)
            for index, child in enumerate(children)
        ],
    )


def _node_id(value: Any, path: str) -> str:
    """PageIndex ids are 4-digit strings; accept ints and shorter digit strings, zero-padded."""
    text = str(value)
    if isinstance(value, bool) or not text.isdigit() or len(text) > 4:
        raise TreeBuildError(f"{path}: 'node_id' must be a 4-digit id, got {value!r}")
    return text.zfill(4)


def _int_field(raw: dict[str, Any], name: str, path: str) -> int | None:
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TreeBuildError(f"{path}: '{name}' must be a positive integer, got {value!r}")
    return value


def _str_field(raw: dict[str, Any], name: str, path: str) -> str:
    value = raw.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TreeBuildError(f"{path}: '{name}' must be a string, got {type(value).__name__}")
    return value


def _check_page_range(start: int | None, end: int | None, path: str) -> None:
    if start is not None and end is not None and end < start:
        raise TreeBuildError(f"{path}: 'end_index' {end} is before 'start_index' {start}")


def _check_unique_ids(nodes: list[TreeNode]) -> None:
    seen: set[str] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node.node_id in seen:
            raise TreeBuildError(f"PageIndex JSON repeats node_id {node.node_id!r}")
        seen.add(node.node_id)
        stack.extend(node.nodes)


def _from_node(node: TreeNode) -> dict[str, Any]:
    raw: dict[str, Any] = {"title": node.title, "node_id": node.node_id}
    for name in _INT_FIELDS:
        if (value := getattr(node, name)) is not None:
            raw[name] = value
    if node.summary:
        raw["summary"] = node.summary
    if node.text:
        raw["text"] = node.text
    if node.nodes:
        raw["nodes"] = [_from_node(child) for child in node.nodes]
    return raw
