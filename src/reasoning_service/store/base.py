"""The store's contract (`Store`) and its one implementation over `Tables` (`TableStore`).

Both backends, `SqliteStore` (one file, `sqlite.py`) and `PostgresStore` (a server,
`postgres.py`), are a `TableStore` that supplies `run` (one transaction, off the event loop) and
`aclose`; everything else (what a policy or an evaluation is as rows) is written once, here.

A stored policy version never changes (`save_policy` inserts or reports what is there), and an
evaluation may carry an idempotency key, unique per API key, and a job id, unique, in the same
row. Text the service wrote (results, traces, LLM interactions) passes the `SecretMask` before it
is stored, so a provider that echoes its API key cannot put it on disk.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import TypeAdapter

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
from reasoning_service.store.tables import Tables
from retrieval.tree import TreeNode

__all__ = [
    "Idempotency",
    "IdempotentEvaluation",
    "Store",
    "StoredEvaluation",
    "TableStore",
]

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
    to a backend. Modules with tables of their own (`keys.py`, `comparisons.py`, `jobs.py`) go
    through `run`."""

    kind: str
    """`sqlite` or `postgresql`: what the store can offer beyond the protocol (a durable
    queue needs PostgreSQL)."""

    async def run(self, operation: Callable[[Tables], T]) -> T:
        """Run `operation(tables)` off the event loop, in one transaction: all of it is
        written, or none of it.

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
        job_id: str | None = None,
    ) -> None:
        """Store an evaluation in one transaction.

        `job_id` (an asynchronous evaluation's job) is unique like `idempotency`: a job that
        runs twice (its worker died after storing) cannot store a second result.

        Raises:
            ConflictError: another evaluation holds `idempotency` or `job_id` already.
        """
        ...

    async def get_evaluation(self, evaluation_id: str) -> StoredEvaluation | None: ...

    async def get_case(self, evaluation_id: str) -> CaseBundle | None:
        """The case bundle an evaluation was run on (as stored: masked), or None."""
        ...

    async def find_idempotent(self, scope: str) -> IdempotentEvaluation | None: ...
    async def find_job_evaluation(self, job_id: str) -> StoredEvaluation | None:
        """The evaluation an asynchronous job stored, or None while it has stored none."""
        ...

    async def get_traces(self, evaluation_id: str) -> dict[str, CriterionTrace]: ...
    async def aclose(self) -> None: ...


class TableStore:
    """Policies, evaluations and traces as rows, over any backend's `run`."""

    kind: str = "abstract"

    def __init__(self, *, mask: SecretMask | None = None) -> None:
        self._mask = mask or SecretMask()
        self._policies: dict[tuple[str, str, str], Policy] = {}
        """Parsed policies by (id, version, sha256): a stored version is never replaced, and
        parsing its tree and criteria again cost 6% of the CPU of every evaluation."""

    async def run(self, operation: Callable[[Tables], T]) -> T:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    # --- policies ---------------------------------------------------------------------------

    async def save_policy(self, policy: Policy) -> bool:
        row = {
            **policy.summary().model_dump(mode="json", exclude={"criteria_count"}),
            "tree_json": json.dumps([n.model_dump(mode="json") for n in policy.tree]),
            "criteria_json": policy.criteria.model_dump_json() if policy.criteria else None,
        }
        key = [policy.policy_id, policy.version]

        def insert_new(tables: Tables) -> bool:
            if tables.count("policies", "policy_id = ? and version = ?", key):
                return False
            # Two processes seeding the same policy at once: the second finds it taken.
            return tables.insert_new("policies", row)

        return await self.run(insert_new)

    async def get_policy(self, policy_id: str, version: str | None = None) -> Policy | None:
        where, args = "policy_id = ?", [policy_id]
        if version is not None:
            where, args = where + " and version = ?", [*args, version]

        def read(tables: Tables) -> Policy | None:
            # The key first: the tree and criteria are read (and parsed) once per version.
            keys = tables.select(
                "policies", where, args, columns=_POLICY_KEY, order_by="created_at desc", limit=1
            )
            if not keys:
                return None
            key = (keys[0]["policy_id"], keys[0]["version"], keys[0]["sha256"])
            if (policy := self._policies.get(key)) is None:
                row = tables.select("policies", "policy_id = ? and version = ?", key[:2])[0]
                policy = self._keep_parsed(key, _policy_from_row(row))
            return policy

        return await self.run(read)

    def _keep_parsed(self, key: tuple[str, str, str], policy: Policy) -> Policy:
        if len(self._policies) >= _PARSED_POLICIES_KEPT:
            self._policies.pop(next(iter(self._policies)))
        self._policies[key] = policy
        return policy

    async def list_policies(self) -> list[PolicySummary]:
        rows = await self.run(
            lambda tables: tables.select("policies", order_by="policy_id, created_at")
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
        job_id: str | None = None,
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
            "job_id": job_id,
        }
        criterion_rows = [_criterion_row(result.evaluation_id, r, mask) for r in result.results]
        conversation_rows, interaction_rows = _trace_rows(result.evaluation_id, traces, mask)

        def write(tables: Tables) -> None:
            if not tables.insert_new("evaluations", evaluation):
                raise _taken(tables, result.evaluation_id, idempotency, job_id)
            tables.insert_all("criterion_results", criterion_rows)
            tables.insert_all("conversations", conversation_rows)
            tables.insert_all("llm_interactions", interaction_rows)

        await self.run(write)

    async def get_evaluation(self, evaluation_id: str) -> StoredEvaluation | None:
        return await self._find_evaluation("evaluation_id = ?", evaluation_id)

    async def find_job_evaluation(self, job_id: str) -> StoredEvaluation | None:
        return await self._find_evaluation("job_id = ?", job_id)

    async def get_case(self, evaluation_id: str) -> CaseBundle | None:
        rows = await self.run(
            lambda tables: tables.select(
                "evaluations", "evaluation_id = ?", [evaluation_id], columns="case_json"
            )
        )
        if not rows or not rows[0]["case_json"]:
            return None
        return CaseBundle.model_validate_json(rows[0]["case_json"])

    async def _find_evaluation(self, where: str, value: str) -> StoredEvaluation | None:
        rows = await self.run(
            lambda tables: tables.select(
                "evaluations", where, [value], columns="result_json, owner"
            )
        )
        if not rows:
            return None
        result = EvaluationResult.model_validate_json(rows[0]["result_json"])
        return StoredEvaluation(result=result, owner=rows[0]["owner"])

    async def find_idempotent(self, scope: str) -> IdempotentEvaluation | None:
        """The evaluation stored under an idempotency scope (`Idempotency.scope`), or None."""
        rows = await self.run(
            lambda tables: tables.select(
                "evaluations",
                "idempotency_key = ?",
                [scope],
                columns="result_json, owner, request_sha256",
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
        def read(tables: Tables) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            where = "evaluation_id = ?"
            conversations = tables.select("conversations", where, [evaluation_id])
            interactions = tables.select(
                "llm_interactions", where, [evaluation_id], order_by="criterion_id, seq"
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


_PARSED_POLICIES_KEPT = 64
_POLICY_KEY = "policy_id, version, sha256"
_MESSAGES = TypeAdapter(list[Message])


def _taken(
    tables: Tables, evaluation_id: str, idempotency: Idempotency | None, job_id: str | None
) -> Exception:
    """Why an evaluation row could not be inserted: the error to raise."""
    if idempotency and tables.count("evaluations", "idempotency_key = ?", [idempotency.scope]):
        return ConflictError(
            "Idempotency-Key: another request with this key was stored first; "
            "send the request again to get its result"
        )
    if job_id and tables.count("evaluations", "job_id = ?", [job_id]):
        return ConflictError("job_id: this job has stored its evaluation already")
    return StoreError(f"evaluation_id: {evaluation_id} is stored already")


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
                    "messages_json": mask(_MESSAGES.dump_json(trace.messages).decode()),
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
