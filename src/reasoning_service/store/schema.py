"""Table definitions. Every table is created if missing and every missing column is added, so a
new file is ready to use and an older one is brought up to date."""

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
            # `<owner>:<Idempotency-Key>`, unique: a retried request never evaluates twice.
            "idempotency_key": str,
            "request_sha256": str,
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
            "expires_at": str,
            "rotated_at": str,
        },
        "key_id",
    ),
    # Who did what (store/audit.py): key ids, actions, resource ids, outcomes. No case content.
    "audit_log": (
        {
            "audit_id": int,
            "at": str,
            "key_id": str,
            "action": str,
            "resource": str,
            "outcome": str,
            "status_code": int,
            "request_id": str,
        },
        "audit_id",
    ),
}

_INDEXES: list[tuple[str, list[str], bool]] = [
    ("evaluations", ["created_at"], False),
    ("evaluations", ["owner"], False),
    ("evaluations", ["idempotency_key"], True),
    ("criterion_results", ["criterion_id"], False),
    ("shadow_comparisons", ["created_at"], False),
    ("api_keys", ["key_sha256"], False),
    ("audit_log", ["at"], False),
]
"""(table, columns, unique)."""


def ensure_schema(db: Database) -> None:
    """Create the tables, columns and indexes that do not exist yet."""
    for name, (columns, pk) in _TABLES.items():
        table = db.table(name)
        if table.exists():
            for column, kind in columns.items():
                if column not in table.columns_dict:
                    table.add_column(column, kind)
        else:
            table.create(columns, pk=pk)
    for name, columns, unique in _INDEXES:
        db.table(name).create_index(columns, unique=unique, if_not_exists=True)
