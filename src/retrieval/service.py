"""Lexical search over indexed policies: SQLite FTS5 over nodes and sentence-level spans.

Two FTS5 tables (porter stemming, bm25 ranking) hold every indexed policy:

- `nodes_fts(policy_key, node_id, title, summary, text)`: finds sections (`search_nodes`, the
  lexical fallback of tree search); title hits weigh most, then summary, then text.
- `spans_fts(policy_key, node_id, char_start, char_end, text)`: finds the exact sentences of one
  node that answer a query (`spans_tighten`), with offsets into that node's `text`.

`policy_key` is an indexed token ("p<row id>") unique to each policy, so a search matches only
that policy's rows inside FTS5 instead of filtering every policy's hits afterwards; queries are
column-filtered so user words never match it. One connection is shared by all callers behind a
lock, and each call runs in a worker thread, so the event loop never waits on SQLite.
"""

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from retrieval.query import to_match_expression
from retrieval.spans import split_spans
from retrieval.tree import TreeNode, walk

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS policies (id INTEGER PRIMARY KEY, policy_id TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE IF NOT EXISTS nodes_fts USING fts5(
    policy_key, node_id UNINDEXED, title, summary, text, tokenize='porter unicode61'
);
CREATE VIRTUAL TABLE IF NOT EXISTS spans_fts USING fts5(
    policy_key, node_id UNINDEXED, char_start UNINDEXED, char_end UNINDEXED, text,
    tokenize='porter unicode61'
);
"""
_NODE_WEIGHTS = "0.0, 0.0, 5.0, 2.0, 1.0"
_SPAN_WEIGHTS = "0.0, 0.0, 0.0, 0.0, 1.0"


class NodeHit(BaseModel):
    """A policy section that matches a query."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    policy_id: str
    """Policy the section belongs to."""
    node_id: str
    """4-digit id of the section within its policy tree."""
    title: str
    """Section heading."""
    summary: str
    """Short description of the section."""
    score: float
    """Relevance (negated bm25): higher is better; comparable only within one search."""


class Span(BaseModel):
    """An exact sentence-level excerpt of one node's text; `node.text[char_start:char_end]`."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    policy_id: str
    """Policy the span belongs to."""
    node_id: str
    """Node whose `text` the offsets index into."""
    text: str
    """The span verbatim."""
    char_start: int
    """Offset of the span's first character in the node's text."""
    char_end: int
    """Offset just past the span's last character in the node's text."""
    score: float
    """Relevance (negated bm25): higher is better; comparable only within one search."""


class RetrievalService:
    """FTS5 index of policy trees, safe to share between many concurrent async callers.

    ```python
    service = RetrievalService("retrieval.db")
    await service.index_policy("NCD-240.4", build_tree_from_markdown(text))
    hits = await service.search_nodes("NCD-240.4", "home sleep test type")
    spans = await service.spans_tighten("NCD-240.4", hits[0].node_id, "Type IV channels")
    await service.aclose()
    ```
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self._connection: sqlite3.Connection | None = sqlite3.connect(
            str(path), check_same_thread=False, isolation_level=None
        )
        self._lock = threading.Lock()
        if str(path) != ":memory:":
            self._connection.execute("PRAGMA journal_mode=WAL")
        self._connection.executescript(_SCHEMA)

    async def index_policy(self, policy_id: str, tree: list[TreeNode]) -> None:
        """Index `tree` as `policy_id`, replacing any earlier index of it, in one transaction."""
        nodes = list(walk(tree))
        await self._run(lambda connection: _replace_policy(connection, policy_id, nodes))

    async def remove_policy(self, policy_id: str) -> None:
        """Drop everything indexed for `policy_id`; unknown ids are a no-op."""
        await self._run(lambda connection: _replace_policy(connection, policy_id, None))

    async def search_nodes(self, policy_id: str, query: str, *, limit: int = 5) -> list[NodeHit]:
        """Best-matching sections of one policy, best first; [] for an empty query."""
        expression = to_match_expression(query)
        if expression is None or limit < 1:
            return []
        rows = await self._run(
            lambda connection: _search_nodes(connection, policy_id, expression, limit)
        )
        return [
            NodeHit(policy_id=policy_id, node_id=node_id, title=title, summary=summary, score=score)
            for node_id, title, summary, score in rows
        ]

    async def spans_tighten(
        self, policy_id: str, node_id: str, query: str, *, limit: int = 3
    ) -> list[Span]:
        """The spans of one node that best match `query`, best first; [] for an unknown node."""
        expression = to_match_expression(query)
        if expression is None or limit < 1:
            return []
        rows = await self._run(
            lambda connection: _search_spans(connection, policy_id, node_id, expression, limit)
        )
        return [
            Span(
                policy_id=policy_id,
                node_id=node_id,
                text=text,
                char_start=start,
                char_end=end,
                score=score,
            )
            for text, start, end, score in rows
        ]

    async def aclose(self) -> None:
        """Close the database; later calls raise RuntimeError."""
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        return await asyncio.to_thread(self._locked, work)

    def _locked(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._lock:
            if self._connection is None:
                raise RuntimeError("RetrievalService is closed")
            return work(self._connection)


def _replace_policy(
    connection: sqlite3.Connection, policy_id: str, nodes: list[TreeNode] | None
) -> None:
    """Delete the policy's rows and, unless `nodes` is None, insert the new ones atomically."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        row = connection.execute(
            "SELECT id FROM policies WHERE policy_id = ?", (policy_id,)
        ).fetchone()
        if row is not None:
            key = _policy_key(row[0])
            for table in ("nodes_fts", "spans_fts"):
                connection.execute(
                    f"DELETE FROM {table} WHERE rowid IN"
                    f" (SELECT rowid FROM {table} WHERE {table} MATCH ?)",
                    (f'policy_key : "{key}"',),
                )
            if nodes is None:
                connection.execute("DELETE FROM policies WHERE id = ?", (row[0],))
        if nodes is not None:
            _insert_policy(connection, policy_id, nodes, row[0] if row else None)
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _insert_policy(
    connection: sqlite3.Connection, policy_id: str, nodes: list[TreeNode], row_id: int | None
) -> None:
    if row_id is None:
        cursor = connection.execute("INSERT INTO policies (policy_id) VALUES (?)", (policy_id,))
        row_id = cursor.lastrowid
    assert row_id is not None
    key = _policy_key(row_id)
    connection.executemany(
        "INSERT INTO nodes_fts (policy_key, node_id, title, summary, text) VALUES (?,?,?,?,?)",
        [(key, node.node_id, node.title, node.summary, node.text) for node in nodes],
    )
    connection.executemany(
        "INSERT INTO spans_fts (policy_key, node_id, char_start, char_end, text)"
        " VALUES (?,?,?,?,?)",
        _span_rows(key, nodes),
    )


def _span_rows(key: str, nodes: list[TreeNode]) -> Iterator[tuple[Any, ...]]:
    for node in nodes:
        for span in split_spans(node.text):
            yield key, node.node_id, span.start, span.end, node.text[span.start : span.end]


def _search_nodes(
    connection: sqlite3.Connection, policy_id: str, expression: str, limit: int
) -> list[tuple[str, str, str, float]]:
    key = _lookup_key(connection, policy_id)
    if key is None:
        return []
    return connection.execute(
        f"SELECT node_id, title, summary, -bm25(nodes_fts, {_NODE_WEIGHTS}) AS score"
        " FROM nodes_fts WHERE nodes_fts MATCH ? ORDER BY score DESC, node_id LIMIT ?",
        (f'policy_key : "{key}" AND {{title summary text}} : ({expression})', limit),
    ).fetchall()


def _search_spans(
    connection: sqlite3.Connection, policy_id: str, node_id: str, expression: str, limit: int
) -> list[tuple[str, int, int, float]]:
    key = _lookup_key(connection, policy_id)
    if key is None:
        return []
    return connection.execute(
        f"SELECT text, char_start, char_end, -bm25(spans_fts, {_SPAN_WEIGHTS}) AS score"
        " FROM spans_fts WHERE spans_fts MATCH ? AND node_id = ?"
        " ORDER BY score DESC, char_start LIMIT ?",
        (f'policy_key : "{key}" AND text : ({expression})', node_id, limit),
    ).fetchall()


def _lookup_key(connection: sqlite3.Connection, policy_id: str) -> str | None:
    row = connection.execute("SELECT id FROM policies WHERE policy_id = ?", (policy_id,)).fetchone()
    return None if row is None else _policy_key(row[0])


def _policy_key(row_id: int) -> str:
    return f"p{row_id}"
