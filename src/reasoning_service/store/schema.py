"""Table definitions, one list for both backends, and their migrations.

Migrations are additive: every table is created if missing and every missing column and index
is added, so a new database is ready to use and an older one is brought up to date, on SQLite
(`ensure_schema`, through sqlite-utils) and on PostgreSQL (`postgres_ddl`, statements the
PostgreSQL store runs under an advisory lock, so processes starting together take turns).
"""

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
            # The asynchronous job that stored it (store/jobs.py), unique: one result per job.
            "job_id": str,
        },
        "evaluation_id",
    ),
    # Asynchronous evaluations (store/jobs.py): the request waits here; the queue carries only
    # the job id. `queue_job_id` is the queue's own id of the job, for its status.
    "jobs": (
        {
            "job_id": str,
            "owner": str,
            "created_at": str,
            "request_json": str,
            "idempotency_key": str,
            "request_sha256": str,
            "queue_job_id": int,
        },
        "job_id",
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
    ("evaluations", ["job_id"], True),
    ("jobs", ["idempotency_key"], True),
    ("jobs", ["queue_job_id", "created_at"], False),  # the sweep for jobs never queued
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


_POSTGRES_TYPES = {str: "text", int: "bigint", float: "double precision"}


def postgres_ddl() -> list[str]:
    """The PostgreSQL statements that create what is missing (idempotent, in order).

    A single integer primary key is an identity column (SQLite's rowid does the same)."""
    statements = []
    for name, (columns, pk) in _TABLES.items():
        keys = (pk,) if isinstance(pk, str) else pk
        definitions = []
        for column, kind in columns.items():
            if keys == (column,) and kind is int:
                definitions.append(f"{column} bigint generated by default as identity")
            else:
                definitions.append(f"{column} {_POSTGRES_TYPES[kind]}")
        definitions.append(f"primary key ({', '.join(keys)})")
        statements.append(f"create table if not exists {name} ({', '.join(definitions)})")
        statements.extend(
            f"alter table {name} add column if not exists {column} {_POSTGRES_TYPES[kind]}"
            for column, kind in columns.items()
            if column not in keys
        )
    for name, columns, unique in _INDEXES:
        index = f"idx_{name}_{'_'.join(columns)}"
        statements.append(
            f"create {'unique ' if unique else ''}index if not exists {index} "
            f"on {name} ({', '.join(columns)})"
        )
    return statements
