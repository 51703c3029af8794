"""Persistence: policies, evaluations, criterion results, traces and LLM interactions.

One `Store` protocol, two backends chosen by a URL (`open_store`): `sqlite:///<path>` (the
default, one file) and `postgresql://…` (many processes, and the queue of asynchronous
evaluations).
"""

from reasoning_service.store.base import (
    Idempotency,
    IdempotentEvaluation,
    Store,
    StoredEvaluation,
)
from reasoning_service.store.opening import open_store, sqlite_path_of
from reasoning_service.store.sqlite import SqliteStore

__all__ = [
    "Idempotency",
    "IdempotentEvaluation",
    "SqliteStore",
    "Store",
    "StoredEvaluation",
    "open_store",
    "sqlite_path_of",
]
