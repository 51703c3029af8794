"""Table definitions. Every table is created if missing, so a new file is ready to use."""

from __future__ import annotations

from sqlite_utils import Database

_TABLES: dict[str, tuple[dict[str, type], str | tuple[str, ...]]] = {
    "policies": (
        {
            "policy_id": str,
            "version": str,
            "sha256": str,
            "title": str,
            "source_format": str,
            "source_url": str,
            "license": str,
            "created_at": str,
            "tree_json": str,
            "criteria_json": str,
        },
        ("policy_id", "version"),
    ),
    "evaluations": (
        {
            "evaluation_id": str,
            "case_id": str,
            "policy_id": str,
            "policy_version": str,
            "recommendation": str,
            "controller": str,
            "arm": str,
            "owner": str,
            "created_at": str,
            "case_json": str,
            "result_json": str,
        },
        "evaluation_id",
    ),
    "criterion_results": (
        {
            "evaluation_id": str,
            "criterion_id": str,
            "status": str,
            "confidence": float,
            "reason_code": str,
            "controller": str,
            "result_json": str,
        },
        ("evaluation_id", "criterion_id"),
    ),
    "conversations": (
        {"evaluation_id": str, "criterion_id": str, "messages_json": str},
        ("evaluation_id", "criterion_id"),
    ),
    "llm_interactions": (
        {
            "evaluation_id": str,
            "criterion_id": str,
            "seq": int,
            "provider": str,
            "model": str,
            "success": int,
            "error_kind": str,
            "duration_ms": float,
            "input_tokens": int,
            "output_tokens": int,
            "cached_input_tokens": int,
            "interaction_json": str,
        },
        ("evaluation_id", "criterion_id", "seq"),
    ),
    # One row per criterion of a shadow run (store/comparisons.py). No case id: ids and numbers.
    "shadow_comparisons": (
        {
            "comparison_id": str,
            "evaluation_id": str,
            "criterion_id": str,
            "created_at": str,
            "control_controller": str,
            "candidate_controller": str,
            "control_prompt_id": str,
            "candidate_prompt_id": str,
            "control_status": str,
            "candidate_status": str,
            "agree": int,
            "confidence_delta": float,
            "control_latency_ms": float,
            "candidate_latency_ms": float,
            "control_tokens": int,
            "candidate_tokens": int,
            "control_error": str,
            "candidate_error": str,
        },
        "comparison_id",
    ),
    # API keys (store/keys.py): only the sha256 of a key is kept.
    "api_keys": (
        {
            "key_id": str,
            "key_sha256": str,
            "admin": int,
            "label": str,
            "created_at": str,
            "revoked_at": str,
        },
        "key_id",
    ),
}

_INDEXES = [
    ("evaluations", ["created_at"]),
    ("evaluations", ["owner"]),
    ("criterion_results", ["criterion_id"]),
    ("shadow_comparisons", ["created_at"]),
    ("api_keys", ["key_sha256"]),
]


def ensure_schema(db: Database) -> None:
    """Create the tables and indexes that do not exist yet."""
    for name, (columns, pk) in _TABLES.items():
        db[name].create(columns, pk=pk, if_not_exists=True)
    for table, columns in _INDEXES:
        db[table].create_index(columns, if_not_exists=True)
