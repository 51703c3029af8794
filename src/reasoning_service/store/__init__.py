"""Persistence: policies, evaluations, criterion results, traces and LLM interactions."""

from reasoning_service.store.sqlite import SqliteStore, Store, StoredEvaluation

__all__ = ["SqliteStore", "Store", "StoredEvaluation"]
