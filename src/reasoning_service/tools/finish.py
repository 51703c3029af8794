"""`finish`: the tool whose arguments are the criterion result — its schema, parsing and checks.

The agent offers `finish` with the other tools (`executor.tool_specs`) but never runs it: it calls
`check_finish`, which parses the arguments against `FINISH_PARAMETERS`, verifies every citation
(`citations.py`) and applies the evidence rule below. What to do with the problems (send them
back once, then drop them and lower the confidence) is the agent's policy.

Evidence rule: `met` and `not_met` claim the case shows something, so they stand only on at least
one verified case quote. A case quote verifies when it is found in a document page or an
extracted fact (never in the request body's own fields) *and* passes `check_case_quote`: long
enough, not an instruction planted in the case, not the policy's text, not dated after `as_of`,
about the criterion's concept. Any citation that fails is a problem; the agent then never keeps a
decisive status (react_controller.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reasoning_service.models import CaseEvidence, CriterionStatus, PolicyCitation, ToolCall
from reasoning_service.models.task import CriterionTask
from reasoning_service.tools.arguments import check_arguments, validators_for
from reasoning_service.tools.citations import (
    CitationRules,
    check_case_quote,
    verify_case_evidence,
    verify_policy_citation,
)

__all__ = [
    "DECISIVE",
    "FINISH",
    "FINISH_DESCRIPTION",
    "FINISH_PARAMETERS",
    "CheckedFinish",
    "CitationRules",
    "check_finish",
    "citations_retry_message",
    "parse_finish",
    "verify_citations",
]

FINISH = "finish"
FINISH_DESCRIPTION = (
    "Give the final result for the criterion, once. Quotes must be copied exactly "
    "from tool results."
)
FINISH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": [s.value for s in CriterionStatus]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "rationale": {"type": "string", "minLength": 1},
        "policy_citations": {
            "type": "array",
            "maxItems": 5,
            "items": {
                "type": "object",
                "properties": {
                    "node_id": {"type": "string"},
                    "quote": {"type": "string", "minLength": 1},
                },
                "required": ["node_id", "quote"],
            },
        },
        "case_evidence": {
            "type": "array",
            "maxItems": 8,
            "items": {
                "type": "object",
                "properties": {
                    "doc_id": {"type": "string"},
                    "page": {"type": "integer", "minimum": 1},
                    "field": {"type": "string"},
                    "quote": {"type": "string", "minLength": 1},
                },
                "required": ["quote"],
            },
        },
    },
    "required": ["status", "confidence", "rationale", "policy_citations", "case_evidence"],
    "additionalProperties": False,
}

DECISIVE = frozenset({CriterionStatus.MET, CriterionStatus.NOT_MET})
"""Statuses that claim the case shows something: they stand only on verified case evidence."""

_VALIDATORS = validators_for({FINISH: FINISH_PARAMETERS})
_DEFAULT_RULES = CitationRules()


@dataclass(frozen=True)
class CheckedFinish:
    """`finish` arguments after parsing and verification: what stands, and what did not verify."""

    status: CriterionStatus
    confidence: float
    rationale: str
    policy_citations: list[PolicyCitation]
    """Only the citations that verified, with their offsets."""
    case_evidence: list[CaseEvidence]
    """Only the case quotes that verified."""
    problems: list[str]
    """One line per citation that did not verify, or the evidence rule's complaint."""

    @property
    def decisive(self) -> bool:
        return self.status in DECISIVE


def parse_finish(call: ToolCall) -> dict[str, Any] | str:
    """The `finish` arguments checked against the schema, or a message the model can act on."""
    return check_arguments(call, {FINISH: FINISH_PARAMETERS}, _VALIDATORS)


def check_finish(
    task: CriterionTask, call: ToolCall, rules: CitationRules = _DEFAULT_RULES
) -> CheckedFinish | str:
    """Parse a `finish` call and verify it against the task's policy and case.

    Returns:
        The checked result, or (for malformed arguments) the message for the model.
    """
    arguments = parse_finish(call)
    if isinstance(arguments, str):
        return arguments
    policy_citations, case_evidence, problems = verify_citations(task, arguments, rules)
    status = CriterionStatus(arguments["status"])
    if status in DECISIVE and not case_evidence and not problems:
        problems.append(
            f"status {status.value} needs at least one case_evidence quote that shows it"
        )
    return CheckedFinish(
        status=status,
        confidence=float(arguments["confidence"]),
        rationale=str(arguments["rationale"]),
        policy_citations=policy_citations,
        case_evidence=case_evidence,
        problems=problems,
    )


def citations_retry_message(problems: list[str]) -> str:
    """What the model is told, once, when some citations did not verify."""
    return (
        "Some citations could not be verified: "
        + "; ".join(problems)
        + ". Copy quotes exactly from tool results (policy quotes from the cited "
        "node's text, case quotes from a document line or fact) and call finish again."
    )


def verify_citations(
    task: CriterionTask, arguments: dict[str, Any], rules: CitationRules = _DEFAULT_RULES
) -> tuple[list[PolicyCitation], list[CaseEvidence], list[str]]:
    """Keep the citations that verify; describe the ones that do not."""
    policy_citations, case_evidence, problems = [], [], []
    for item in arguments["policy_citations"]:
        citation = PolicyCitation(
            policy_id=task.policy.policy_id, node_id=item["node_id"], quote=item["quote"]
        )
        verified = verify_policy_citation(task.policy, citation)
        if verified is None:
            problems.append(
                f"policy quote {_short(item['quote'])} is not in node {item['node_id']}"
            )
        else:
            policy_citations.append(verified)
    for item in arguments["case_evidence"]:
        evidence = CaseEvidence(
            doc_id=item.get("doc_id"),
            page=item.get("page"),
            field=item.get("field"),
            quote=item["quote"],
        )
        verified_evidence = verify_case_evidence(task.case, evidence, request_fields=False)
        if verified_evidence is None:
            where = item.get("doc_id") or item.get("field") or "the case"
            problems.append(f"case quote {_short(item['quote'])} is not in {where}")
            continue
        unfit = check_case_quote(task.case, task.policy, task.criterion, verified_evidence, rules)
        if unfit is not None:
            problems.append(f"case quote {_short(item['quote'])} {unfit}")
        else:
            case_evidence.append(verified_evidence)
    return policy_citations, case_evidence, problems


def _short(text: str, limit: int = 80) -> str:
    return json.dumps(text if len(text) <= limit else text[:limit] + "…")
