"""SQLite store (sqlite-utils, WAL). Each evaluation is written in one transaction.

A stored policy version never changes (`save_policy` inserts or reports what is there), and an
evaluation may carry an idempotency key, unique per API key, in the same row. Text the service
wrote (results, traces, LLM interactions) passes the `SecretMask` before it is stored, so a
provider that echoes its API key cannot put it on disk.

sqlite3 is blocking, so every call runs in the store's own worker thread, behind one lock: the
event loop never waits on the disk, the single connection never sees two writers at once, and a
store call never queues behind CPU-bound work in the default thread pool (the conditions
controller's), which under load made every write, key lookup and /readyz wait seconds.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sqlite_utils import Database

from reasoning_service.errors import ConflictError, StoreError
from reasoning_service.logging_setup import SecretMask
from reasoning_service.models import (
    CaseBundle,
    CriteriaSet,
    EvaluationResult,
    LLMInteraction,
    Message,
    Policy,
    PolicySummary,
)
from reasoning_service.models.task import CriterionTrace
from reasoning_service.store.schema import ensure_schema
from retrieval.tree import TreeNode

T = TypeVar("T")


@dataclass(frozen=True)
class StoredEvaluation:
    """An evaluation as stored, with who created it (for access control)."""

    result: EvaluationResult
    owner: str | None


@dataclass(frozen=True)
class Idempotency:
    """An `Idempotency-Key` as stored: scoped to the API key that sent it, with the request's
    sha256 so a different body under the same key is told apart from a retry."""

    scope: str
    """`<owner>:<Idempotency-Key>`."""
    request_sha256: str

    @classmethod
    def of(cls, owner: str | None, key: str, request_sha256: str) -> Idempotency:
        return cls(scope=f"{owner or '*'}:{key}", request_sha256=request_sha256)


@dataclass(frozen=True)
class IdempotentEvaluation:
    """The evaluation stored under an idempotency key, and the sha256 of its request."""

    evaluation: StoredEvaluation
    request_sha256: str


class Store(Protocol):
    """What the services need from persistence: the whole surface callers use, so nobody casts
    to `SqliteStore`. Modules with tables of their own (`keys.py`, `comparisons.py`) go
    through `run`."""

    async def run(self, operation: Callable[[Database], T]) -> T:
        """Run `operation(db)` off the event loop, in one transaction.

        Raises:
            StoreError: the database failed.
        """
        ...

    async def save_policy(self, policy: Policy) -> bool:
        """Store a new policy version; False (and nothing written) when it is already stored."""
        ...

    async def get_policy(self, policy_id: str, version: str | None = None) -> Policy | None: ...
    async def list_policies(self) -> list[PolicySummary]: ...
    async def save_evaluation(
        self,
        result: EvaluationResult,
        *,
        case: CaseBundle,
        traces: dict[str, CriterionTrace],
        owner: str | None = None,
        idempotency: Idempotency | None = None,
    ) -> None:
        """Store an evaluation in one transaction.

        Raises:
            ConflictError: another evaluation holds `idempotency` already.
        """
        ...

    async def get_evaluation(self, evaluation_id: str) -> StoredEvaluation | None: ...

    async def get_case(self, evaluation_id: str) -> CaseBundle | None:
        """The case bundle an evaluation was run on (as stored: masked), or None."""
        ...

    async def find_idempotent(self, scope: str) -> IdempotentEvaluation | None: ...
    async def get_traces(self, evaluation_id: str) -> dict[str, CriterionTrace]: ...
    async def aclose(self) -> None: ...


class SqliteStore:
    """The store in one SQLite file (or `:memory:` for tests)."""

    def __init__(self, path: str | Path, *, mask: SecretMask | None = None) -> None:
        path = str(path)
        self._mask = mask or SecretMask()
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
        self._db = Database(conn)
        if path != ":memory:":
            self._db.enable_wal()
            self._db.execute("PRAGMA synchronous=NORMAL")
        ensure_schema(self._db)
        self._lock = threading.Lock()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")

    @property
    def db(self) -> Database:
        """The sqlite-utils handle, for modules that own tables of their own."""
        return self._db

    async def run(self, operation: Callable[[Database], T]) -> T:
        """Run `operation(db)` in the store's thread, in a transaction; failures become
        StoreError."""

        def locked() -> T:
            with self._lock:
                try:
                    with self._db.atomic():
                        return operation(self._db)
                except sqlite3.Error as exc:
                    raise StoreError(f"store operation failed: {exc.__class__.__name__}") from exc

        return await self._in_thread(locked)

    async def _in_thread(self, call: Callable[[], T]) -> T:
        """`asyncio.to_thread`, on the store's own thread (context variables go along)."""
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, context.run, call)

    # --- policies ---------------------------------------------------------------------------

    async def save_policy(self, policy: Policy) -> bool:
        row = {
            **policy.summary().model_dump(mode="json", exclude={"criteria_count"}),
            "tree_json": json.dumps([n.model_dump(mode="json") for n in policy.tree]),
            "criteria_json": policy.criteria.model_dump_json() if policy.criteria else None,
        }
        key = [policy.policy_id, policy.version]

        def insert_new(db: Database) -> bool:
            if db.execute(_POLICY_EXISTS, key).fetchone():
                return False
            db["policies"].insert(row)
            return True

        return await self.run(insert_new)

    async def get_policy(self, policy_id: str, version: str | None = None) -> Policy | None:
        where, args = "policy_id = ?", [policy_id]
        if version is not None:
            where, args = where + " and version = ?", [*args, version]
        rows = await self.run(
            lambda db: list(
                db["policies"].rows_where(where, args, order_by="created_at desc", limit=1)
            )
        )
        return _policy_from_row(rows[0]) if rows else None

    async def list_policies(self) -> list[PolicySummary]:
        rows = await self.run(
            lambda db: list(db["policies"].rows_where(order_by="policy_id, created_at"))
        )
        return [_policy_from_row(row).summary() for row in rows]

    # --- evaluations ------------------------------------------------------------------------

    async def save_evaluation(
        self,
        result: EvaluationResult,
        *,
        case: CaseBundle,
        traces: dict[str, CriterionTrace],
        owner: str | None = None,
        idempotency: Idempotency | None = None,
    ) -> None:
        mask = self._mask.text
        evaluation = {
            "evaluation_id": result.evaluation_id,
            "case_id": result.case_id,
            "policy_id": result.policy.policy_id,
            "policy_version": result.policy.version,
            "recommendation": result.recommendation.value,
            "controller": result.controller,
            "arm": result.arm,
            "owner": owner,
            "created_at": result.created_at.isoformat(),
            "case_json": mask(case.model_dump_json()),
            "result_json": mask(result.model_dump_json()),
            "idempotency_key": idempotency.scope if idempotency else None,
            "request_sha256": idempotency.request_sha256 if idempotency else None,
        }
        criterion_rows = [_criterion_row(result.evaluation_id, r, mask) for r in result.results]
        conversation_rows, interaction_rows = _trace_rows(result.evaluation_id, traces, mask)

        def write(db: Database) -> None:
            try:
                db["evaluations"].insert(evaluation)
            except sqlite3.IntegrityError as exc:
                taken = idempotency and db.execute(_IDEMPOTENCY_TAKEN, [idempotency.scope])
                if taken and taken.fetchone():
                    raise ConflictError(
                        "Idempotency-Key: another request with this key was stored first; "
                        "send the request again to get its result"
                    ) from exc
                raise
            db["criterion_results"].insert_all(criterion_rows)
            db["conversations"].insert_all(conversation_rows)
            db["llm_interactions"].insert_all(interaction_rows)

        await self.run(write)

    async def get_evaluation(self, evaluation_id: str) -> StoredEvaluation | None:
        rows = await self.run(
            lambda db: list(
                db["evaluations"].rows_where(
                    "evaluation_id = ?", [evaluation_id], select="result_json, owner"
                )
            )
        )
        if not rows:
            return None
        result = EvaluationResult.model_validate_json(rows[0]["result_json"])
        return StoredEvaluation(result=result, owner=rows[0]["owner"])

    async def get_case(self, evaluation_id: str) -> CaseBundle | None:
        rows = await self.run(
            lambda db: list(
                db["evaluations"].rows_where(
                    "evaluation_id = ?", [evaluation_id], select="case_json"
                )
            )
        )
        if not rows or not rows[0]["case_json"]:
            return None
        return CaseBundle.model_validate_json(rows[0]["case_json"])

    async def find_idempotent(self, scope: str) -> IdempotentEvaluation | None:
        """The evaluation stored under an idempotency scope (`Idempotency.scope`), or None."""
        rows = await self.run(
            lambda db: list(
                db["evaluations"].rows_where(
                    "idempotency_key = ?", [scope], select="result_json, owner, request_sha256"
                )
            )
        )
        if not rows:
            return None
        result = EvaluationResult.model_validate_json(rows[0]["result_json"])
        return IdempotentEvaluation(
            evaluation=StoredEvaluation(result=result, owner=rows[0]["owner"]),
            request_sha256=rows[0]["request_sha256"],
        )

    async def get_traces(self, evaluation_id: str) -> dict[str, CriterionTrace]:
        def read(db: Database) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            where = "evaluation_id = ?"
            conversations = list(db["conversations"].rows_where(where, [evaluation_id]))
            interactions = list(
                db["llm_interactions"].rows_where(
                    where, [evaluation_id], order_by="criterion_id, seq"
                )
            )
            return conversations, interactions

        conversations, interactions = await self.run(read)
        traces: dict[str, CriterionTrace] = {}
        for row in conversations:
            messages = [Message.model_validate(m) for m in json.loads(row["messages_json"])]
            traces.setdefault(row["criterion_id"], CriterionTrace()).messages = messages
        for row in interactions:
            record = LLMInteraction.model_validate_json(row["interaction_json"])
            traces.setdefault(row["criterion_id"], CriterionTrace()).interactions.append(record)
        return traces

    async def aclose(self) -> None:
        def close() -> None:
            with self._lock:
                self._db.close()

        await self._in_thread(close)
        self._thread.shutdown(wait=False)


_POLICY_EXISTS = "select 1 from policies where policy_id = ? and version = ?"
_IDEMPOTENCY_TAKEN = "select 1 from evaluations where idempotency_key = ?"


def _policy_from_row(row: dict[str, Any]) -> Policy:
    criteria = (
        CriteriaSet.model_validate_json(row["criteria_json"]) if row["criteria_json"] else None
    )
    return Policy(
        policy_id=row["policy_id"],
        version=row["version"],
        sha256=row["sha256"],
        title=row["title"],
        source_format=row["source_format"],
        source_url=row["source_url"],
        license=row["license"],
        created_at=row["created_at"],
        tree=[TreeNode.model_validate(n) for n in json.loads(row["tree_json"])],
        criteria=criteria,
        criteria_count=len(criteria.criteria) if criteria else 0,
    )


def _criterion_row(evaluation_id: str, result: Any, mask: Callable[[str], str]) -> dict[str, Any]:
    return {
        "evaluation_id": evaluation_id,
        "criterion_id": result.criterion_id,
        "status": result.status.value,
        "confidence": result.confidence,
        "reason_code": result.reason_code.value if result.reason_code else None,
        "controller": result.controller,
        "result_json": mask(result.model_dump_json()),
    }


def _trace_rows(
    evaluation_id: str, traces: dict[str, CriterionTrace], mask: Callable[[str], str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    conversations, interactions = [], []
    for criterion_id, trace in traces.items():
        if trace.messages:
            conversations.append(
                {
                    "evaluation_id": evaluation_id,
                    "criterion_id": criterion_id,
                    "messages_json": mask(
                        json.dumps([m.model_dump(mode="json") for m in trace.messages])
                    ),
                }
            )
        for seq, record in enumerate(trace.interactions):
            usage = record.reply.usage if record.reply else None
            interactions.append(
                {
                    "evaluation_id": evaluation_id,
                    "criterion_id": criterion_id,
                    "seq": seq,
                    "provider": record.provider,
                    "model": record.model,
                    "success": int(record.success),
                    "error_kind": record.error_kind,
                    "duration_ms": record.duration_ms,
                    "input_tokens": usage.input_tokens if usage else 0,
                    "output_tokens": usage.output_tokens if usage else 0,
                    "cached_input_tokens": usage.cached_input_tokens if usage else 0,
                    "interaction_json": mask(record.model_dump_json()),
                }
            )
    return conversations, interactions
