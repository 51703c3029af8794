"""PostgreSQL store (psycopg 3 and its connection pool): for more than one process or machine.

Same tables and behaviour as `SqliteStore` (store/base.py writes the rows for both). psycopg is
used synchronously, each `run` in one of the store's threads with a pooled connection of its own,
in one transaction: many API processes and workers share one database, and a write never holds
the event loop. Opening the store brings the schema up to date under an advisory lock, so
replicas that start together migrate one at a time.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from reasoning_service.errors import StoreError
from reasoning_service.logging_setup import SecretMask
from reasoning_service.store.base import TableStore
from reasoning_service.store.schema import postgres_ddl
from reasoning_service.store.tables import SqlTables, Tables

__all__ = ["SCHEMA_LOCK", "PostgresStore"]

T = TypeVar("T")

SCHEMA_LOCK = 7_341_114
"""`pg_advisory_xact_lock` key held while a process migrates (this store's and the queue's)."""


class PostgresStore(TableStore):
    """The store in a PostgreSQL database named by a `postgresql://` URL."""

    kind = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        mask: SecretMask | None = None,
        pool_size: int = 4,
        connect_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(mask=mask)
        self.url = url
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "row_factory": dict_row},
            open=False,
            name="reasoning-store",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
            with self._pool.connection() as conn, conn.transaction():
                conn.execute("select pg_advisory_xact_lock(%s)", [SCHEMA_LOCK])
                for statement in postgres_ddl():
                    conn.execute(statement)  # type: ignore[call-overload]  # our own DDL
        except psycopg.Error as exc:
            self._pool.close()
            raise StoreError(f"PostgreSQL store: cannot open ({exc.__class__.__name__})") from exc
        self._threads = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="pg-store")

    async def run(self, operation: Callable[[Tables], T]) -> T:
        """Run `operation(tables)` in one of the store's threads, in a transaction; failures
        become StoreError (and roll the transaction back)."""

        def in_transaction() -> T:
            try:
                with self._pool.connection() as conn, conn.transaction():
                    return operation(SqlTables(_PostgresConnection(conn)))
            except psycopg.Error as exc:
                raise StoreError(f"store operation failed: {exc.__class__.__name__}") from exc

        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, context.run, in_transaction)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._pool.close)
        self._threads.shutdown(wait=False)


def _to_psycopg(sql: str) -> Any:
    """`?` placeholders (the `Tables` dialect) as psycopg's `%s`."""
    return sql.replace("?", "%s")


class _PostgresConnection:
    """`tables.Connection` over a psycopg connection, inside the transaction `run` opened."""

    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        self._conn = conn

    def fetch(self, sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
        return self._conn.execute(_to_psycopg(sql), list(args)).fetchall()

    def execute(self, sql: str, args: Sequence[Any]) -> int:
        return self._conn.execute(_to_psycopg(sql), list(args)).rowcount

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(_to_psycopg(sql), rows)

    def execute_unless_duplicate(self, sql: str, args: Sequence[Any]) -> bool:
        # A failed statement aborts a PostgreSQL transaction: run it in a savepoint.
        try:
            with self._conn.transaction():
                self._conn.execute(_to_psycopg(sql), list(args))
        except psycopg.errors.UniqueViolation:
            return False
        return True
