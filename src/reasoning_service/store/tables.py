"""`Tables`: the few statements the store's modules run, the same on SQLite and PostgreSQL.

`Store.run(operation)` hands `operation` a `Tables` bound to one open transaction. Modules with
tables of their own (`keys.py`, `audit.py`, `comparisons.py`, `jobs.py`) write against it and
never see a driver. `where` fragments use `?` placeholders; the PostgreSQL connection turns them
into psycopg's `%s`. Table and column names come from our code, never from a request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = ["Connection", "SqlTables", "Tables"]

Row = dict[str, Any]


class Tables(Protocol):
    """One transaction's view of the tables."""

    def insert(self, table: str, row: Mapping[str, Any]) -> None: ...
    def insert_all(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None: ...
    def insert_new(self, table: str, row: Mapping[str, Any]) -> bool:
        """Insert unless a primary or unique key is taken: False, and nothing written, when
        it is. The transaction goes on either way."""
        ...

    def select(
        self,
        table: str,
        where: str | None = None,
        args: Sequence[Any] = (),
        *,
        columns: str = "*",
        order_by: str | None = None,
        limit: int | None = None,
    ) -> list[Row]: ...
    def update(self, table: str, values: Mapping[str, Any], where: str, args: Sequence[Any]) -> int:
        """Set `values` on the rows matching `where`; returns how many rows changed."""
        ...

    def count(self, table: str, where: str | None = None, args: Sequence[Any] = ()) -> int: ...


class Connection(Protocol):
    """What `SqlTables` needs from a driver's connection inside a transaction."""

    def fetch(self, sql: str, args: Sequence[Any]) -> list[Row]: ...
    def execute(self, sql: str, args: Sequence[Any]) -> int: ...
    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...
    def execute_unless_duplicate(self, sql: str, args: Sequence[Any]) -> bool:
        """Run one insert; False (the statement undone, the transaction intact) on a
        unique-key violation."""
        ...


class SqlTables:
    """`Tables` as plain SQL over a `Connection` (SQLite and PostgreSQL share the dialect
    these statements need)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def insert(self, table: str, row: Mapping[str, Any]) -> None:
        self._connection.execute(_insert_sql(table, list(row)), list(row.values()))

    def insert_all(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        columns = list(rows[0])
        self._connection.execute_many(
            _insert_sql(table, columns), [[row[c] for c in columns] for row in rows]
        )

    def insert_new(self, table: str, row: Mapping[str, Any]) -> bool:
        return self._connection.execute_unless_duplicate(
            _insert_sql(table, list(row)), list(row.values())
        )

    def select(
        self,
        table: str,
        where: str | None = None,
        args: Sequence[Any] = (),
        *,
        columns: str = "*",
        order_by: str | None = None,
        limit: int | None = None,
    ) -> list[Row]:
        sql = f"select {columns} from {table}"
        if where:
            sql += f" where {where}"
        if order_by:
            sql += f" order by {order_by}"
        if limit is not None:
            sql += f" limit {int(limit)}"
        return self._connection.fetch(sql, args)

    def update(self, table: str, values: Mapping[str, Any], where: str, args: Sequence[Any]) -> int:
        assignments = ", ".join(f"{column} = ?" for column in values)
        sql = f"update {table} set {assignments} where {where}"
        return self._connection.execute(sql, [*values.values(), *args])

    def count(self, table: str, where: str | None = None, args: Sequence[Any] = ()) -> int:
        rows = self.select(table, where, args, columns="count(*) as n")
        return int(rows[0]["n"])


def _insert_sql(table: str, columns: list[str]) -> str:
    marks = ", ".join("?" for _ in columns)
    return f"insert into {table} ({', '.join(columns)}) values ({marks})"
