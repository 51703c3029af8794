"""What the service returns: per-criterion results and the evaluation that combines them."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reasoning_service.errors import LLMError, PermanentLLMError
from reasoning_service.models.case import CaseBundle
from reasoning_service.models.policy import PolicyRef


class _Contract(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)


class CriterionStatus(StrEnum):
    """FORMATS.md, "Statuses"."""

    MET = "met"
    NOT_MET = "not_met"
    MISSING_INFO = "missing_info"
    UNCERTAIN = "uncertain"
    NOT_APPLICABLE = "not_applicable"


class ReasonCode(StrEnum):
    """Why a result is not a plain confident decision."""

    LOW_CONFIDENCE = "low_confidence"
    MAX_ITERATIONS = "max_iterations"
    TOKEN_BUDGET = "token_budget"
    LLM_PERMANENT_ERROR = "llm_permanent_error"
    LLM_TRANSIENT_ERROR = "llm_transient_error"
    LLM_FALLBACK = "llm_fallback"
    INVALID_CITATION = "invalid_citation"
    CONFLICTING_EVIDENCE = "conflicting_evidence"
    NO_FINISH = "no_finish"
    DEADLINE = "deadline"
    """The evaluation's deadline passed before the criterion was decided."""
    NO_CONDITIONS = "no_conditions"
    """The criterion has no checkable conditions, so code could not decide it."""


class PolicyCitation(_Contract):
    """An exact quote of the policy text that governs the decision."""

    policy_id: str
    node_id: str
    section_title: str = ""
    pages: list[int] = Field(default_factory=list)
    """Pages of the cited node (PDF policies); empty for Markdown ones."""
    line_num: int | None = None
    """Line of the cited node's heading (Markdown policies)."""
    quote: str
    char_start: int | None = None
    """Offset of the quote in the node's text; set when the quote was verified."""
    char_end: int | None = None


class CaseEvidence(_Contract):
    """An exact quote of the case that bears on the decision: a document page or a fact."""

    doc_id: str | None = None
    page: int | None = None
    """1-based page of `doc_id`."""
    field: str | None = None
    """The fact's dotted name when the evidence is an extracted fact."""
    quote: str
    char_start: int | None = None
    """Offset of the quote in the page text; set when the quote was verified."""
    char_end: int | None = None


class AtomState(StrEnum):
    """What the case shows about one atom of a criterion's conditions."""

    HOLDS = "holds"
    FAILS = "fails"
    NO_EVIDENCE = "no_evidence"
    CONFLICTING = "conflicting"


class AtomResult(_Contract):
    """The verdict on one atom, and the case evidence that decided it."""

    atom_id: str
    label: str
    kind: str
    """`quantity`, `finding`, `time_window` or `category`."""
    state: AtomState
    note: str = ""
    """What was found, in a few words ("HbA1c 7.2 percent ≥ 6.5")."""
    evidence: list[CaseEvidence] = Field(default_factory=list)
    decided_by: str = "code"
    """`code`, or `model` when the LLM answered the atom's question."""
    applicability: bool = False
    """True for atoms of the criterion's `applies_if` precondition."""
    by_silence: bool = False
    """Decided because the case is silent: it never mentions the concept (`when_silent`) or
    never dates an ordered pair of events (`when_undated`), by the atom's reviewed choice."""


class StepKind(StrEnum):
    THOUGHT = "thought"
    TOOL_CALL = "tool_call"
    OBSERVATION = "observation"
    DECISION = "decision"
    ERROR = "error"


class ReasoningStep(_Contract):
    """One step of the reasoning that led to a result, in order."""

    index: int
    kind: StepKind
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    content: str = ""
    """The thought, the (truncated) observation or the decision."""
    tool_call_id: str | None = None
    is_error: bool = False
    cache_hit: bool = False
    duration_ms: float | None = None


class Usage(_Contract):
    """Cost of producing a result; adds up with `+`."""

    input_tokens: int = 0
    """Prompt tokens, cached ones included."""
    output_tokens: int = 0
    cached_input_tokens: int = 0
    """Prompt tokens served from the provider's cache."""
    llm_calls: int = 0
    tool_calls: int = 0
    cache_hits: int = 0
    """Tool calls answered from the per-evaluation cache."""
    latency_ms: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            **{name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields}
        )


class CriterionResult(_Contract):
    """The verdict on one criterion, with everything needed to audit it."""

    criterion_id: str
    status: CriterionStatus
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str
    policy_citations: list[PolicyCitation] = Field(default_factory=list)
    case_evidence: list[CaseEvidence] = Field(default_factory=list)
    reason_code: ReasonCode | None = None
    atoms: list[AtomResult] = Field(default_factory=list)
    """Per-atom verdicts when the criterion has conditions (docs/conditions.md)."""
    reasoning_trace: list[ReasoningStep] = Field(default_factory=list)
    controller: str
    """`heuristic` or `react`."""
    prompt_id: str | None = None
    provider: str | None = None
    model: str | None = None
    arm: str | None = None
    """Rollout arm that produced the result (`control`, `candidate`), when routing splits."""
    usage: Usage = Field(default_factory=Usage)


def llm_failure_reason(error: LLMError) -> ReasonCode:
    """The reason code of a result the LLM could not produce (no fallback configured)."""
    if isinstance(error, PermanentLLMError):
        return ReasonCode.LLM_PERMANENT_ERROR
    return ReasonCode.LLM_TRANSIENT_ERROR


def as_llm_fallback(
    fallback: CriterionResult,
    *,
    steps: list[ReasoningStep],
    usage: Usage,
    prompt_id: str,
    provider: str,
    model: str,
) -> CriterionResult:
    """The deterministic controller's result standing in for a failed LLM run: the run's steps
    come first in the trace, its cost is added, and it says which prompt and model failed."""
    trace = [
        step.model_copy(update={"index": i})
        for i, step in enumerate([*steps, *fallback.reasoning_trace])
    ]
    return fallback.model_copy(
        update={
            "reason_code": ReasonCode.LLM_FALLBACK,
            "reasoning_trace": trace,
            "usage": usage + fallback.usage,
            "prompt_id": prompt_id,
            "provider": provider,
            "model": model,
        }
    )


class Recommendation(StrEnum):
    """Never a denial: a denial is a human reviewer's decision."""

    APPROVE = "approve"
    PEND_FOR_REVIEW = "pend_for_review"


class OpenCriterion(_Contract):
    """A criterion that keeps the case from approval, and what would settle it."""

    criterion_id: str
    status: CriterionStatus
    text: str
    documentation_to_request: str | None = None


class EvaluationRequest(_Contract):
    """Body of `POST /v1/evaluations`."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    case: CaseBundle
    policy_id: str = Field(min_length=1)
    policy_version: str | None = None
    """Defaults to the latest stored version."""
    criterion_ids: list[str] | None = Field(default=None, min_length=1)
    """Evaluate only these criteria; all of the policy's when absent."""
    mode: Literal["sync", "async"] = "sync"
    """`sync`: the answer is the stored evaluation. `async`: the answer is 202 with a job to
    poll (`GET /v1/jobs/{job_id}`), run by a worker; needs the PostgreSQL store. The header
    `Prefer: respond-async` asks for `async` too."""


class FhirEvaluationRequest(_Contract):
    """Body of `POST /v1/evaluations` with a FHIR R4 Bundle in place of a case bundle.

    The bundle (Da Vinci PAS style: Claim, Patient, Condition, Observation, DocumentReference …)
    is validated and mapped to a case bundle (docs/fhir.md); the rest is as `EvaluationRequest`.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    fhir_bundle: dict[str, Any]
    """A FHIR R4 `Bundle` resource."""
    policy_id: str = Field(min_length=1)
    policy_version: str | None = None
    criterion_ids: list[str] | None = Field(default=None, min_length=1)


class EvaluationResult(_Contract):
    """The combined verdict on a case against one policy."""

    evaluation_id: str
    case_id: str
    policy: PolicyRef
    recommendation: Recommendation
    summary: str
    open_criteria: list[OpenCriterion] = Field(default_factory=list)
    """Criteria that are not met, missing or uncertain, with the documentation to request."""
    results: list[CriterionResult]
    controller: str
    prompt_id: str | None = None
    provider: str | None = None
    model: str | None = None
    arm: str | None = None
    service_version: str
    created_at: dt.datetime
    usage: Usage = Field(default_factory=Usage)
