"""SQLite store (sqlite-utils, WAL): the default, one file, no server. Each `run` is one
transaction.

sqlite3 is blocking, so every call runs in the store's own worker thread, behind one lock: the
event loop never waits on the disk, the single connection never sees two writers at once, and a
store call never queues behind CPU-bound work in the default thread pool (the conditions
controller's), which under load made every write, key lookup and /readyz wait seconds.
"""

from __future__ import annotations

import asyncio
import contextvars
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from sqlite_utils import Database

from reasoning_service.errors import StoreError
from reasoning_service.logging_setup import SecretMask
from reasoning_service.store.base import TableStore
from reasoning_service.store.schema import ensure_schema
from reasoning_service.store.tables import SqlTables, Tables

__all__ = ["SqliteStore"]

T = TypeVar("T")


class SqliteStore(TableStore):
    """The store in one SQLite file (or `:memory:` for tests)."""

    kind = "sqlite"

    def __init__(self, path: str | Path, *, mask: SecretMask | None = None) -> None:
        super().__init__(mask=mask)
        path = str(path)
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
        self._db = Database(conn)
        if path != ":memory:":
            self._db.enable_wal()
            self._db.execute("PRAGMA synchronous=NORMAL")
        ensure_schema(self._db)
        self._tables = SqlTables(_SqliteConnection(conn))
        self._lock = threading.Lock()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")

    @property
    def db(self) -> Database:
        """The sqlite-utils handle (schema upkeep, SQLite-only checks)."""
        return self._db

    async def run(self, operation: Callable[[Tables], T]) -> T:
        """Run `operation(tables)` in the store's thread, in a transaction; failures become
        StoreError."""

        def locked() -> T:
            with self._lock:
                try:
                    with self._db.atomic():
                        return operation(self._tables)
                except sqlite3.Error as exc:
                    raise StoreError(f"store operation failed: {exc.__class__.__name__}") from exc

        return await self._in_thread(locked)

    async def _in_thread(self, call: Callable[[], T]) -> T:
        """`asyncio.to_thread`, on the store's own thread (context variables go along)."""
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, context.run, call)

    async def aclose(self) -> None:
        def close() -> None:
            with self._lock:
                self._db.close()

        await self._in_thread(close)
        self._thread.shutdown(wait=False)


class _SqliteConnection:
    """`tables.Connection` over sqlite3 (inside the transaction `run` opened)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def fetch(self, sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
        cursor = self._conn.execute(sql, list(args))
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def execute(self, sql: str, args: Sequence[Any]) -> int:
        return self._conn.execute(sql, list(args)).rowcount

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)

    def execute_unless_duplicate(self, sql: str, args: Sequence[Any]) -> bool:
        # A failed statement is undone on its own in SQLite; the transaction goes on.
        try:
            self._conn.execute(sql, list(args))
        except sqlite3.IntegrityError as exc:
            if "UNIQUE" not in str(exc):
                raise
            return False
        return True
