"""Persistence: policies, evaluations, criterion results, traces and LLM interactions."""

from reasoning_service.store.sqlite import (
    Idempotency,
    IdempotentEvaluation,
    SqliteStore,
    Store,
    StoredEvaluation,
)

__all__ = ["Idempotency", "IdempotentEvaluation", "SqliteStore", "Store", "StoredEvaluation"]
