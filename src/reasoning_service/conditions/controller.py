"""The deterministic controller: a criterion's conditions checked against the case, by code.

For one criterion:
1. cite the policy: the tree node holding the criterion's verbatim `quote`;
2. read the case once per evaluation (`CaseReading`: sentences with ConText stance, facts);
3. evaluate every atom (`atoms.evaluate_atom`) to holds / fails / no evidence / conflicting,
   each with the facts or sentences that decided it;
4. combine in three-valued logic (`combine.criterion_status`); `met` also needs every holding
   atom's evidence to verify against the case, else `uncertain` (`invalid_citation`).

A criterion without conditions is never guessed at: it comes back `uncertain`
(`no_conditions`). The work is CPU-bound, so it runs in a worker thread, off the event loop: the
given executor's (the service gives it a small one of its own, so the work neither crowds the
event loop out of the GIL nor queues ahead of other threaded calls), else asyncio's default.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections import OrderedDict
from concurrent.futures import Executor
from dataclasses import dataclass

from reasoning_service.conditions.atoms import AtomVerdict, evaluate_atom
from reasoning_service.conditions.case_reading import CaseReading, ContextReader
from reasoning_service.conditions.combine import criterion_status
from reasoning_service.conditions.vocabulary import Vocabulary
from reasoning_service.models import (
    AtomResult,
    AtomState,
    CaseBundle,
    CaseEvidence,
    CriterionResult,
    CriterionStatus,
    Policy,
    PolicyCitation,
    ReasonCode,
    ReasoningStep,
    StepKind,
    Usage,
)
from reasoning_service.models.conditions import Atom, Conditions, affirming_atoms_of, atoms_of
from reasoning_service.models.task import CriterionTask
from reasoning_service.tools.citations import (
    find_quote,
    verify_case_evidence,
    verify_policy_citation,
)
from retrieval.tree import walk

__all__ = ["Conclusion", "ConditionsController", "cite_policy", "conclude", "evaluate_conditions"]

_CONFIDENCE = {
    CriterionStatus.MET: 0.9,
    CriterionStatus.NOT_MET: 0.85,
    CriterionStatus.MISSING_INFO: 0.8,
    CriterionStatus.UNCERTAIN: 0.5,
    CriterionStatus.NOT_APPLICABLE: 0.9,
}
_READINGS_KEPT = 64


class ConditionsController:
    """Decides criteria by their conditions; no LLM, no network."""

    name = "heuristic"

    def __init__(
        self,
        vocabulary: Vocabulary,
        *,
        min_fact_confidence: float = 0.7,
        executor: Executor | None = None,
    ) -> None:
        self.vocabulary = vocabulary
        self._executor = executor
        self.min_fact_confidence = min_fact_confidence
        self.context = ContextReader(vocabulary)
        self._readings: OrderedDict[int, tuple[CaseBundle, CaseReading]] = OrderedDict()
        self._lock = threading.Lock()

    async def evaluate(self, task: CriterionTask) -> CriterionResult:
        """Decide one criterion (module docstring), in a worker thread."""
        if self._executor is None:
            return await asyncio.to_thread(self.decide, task)
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, context.run, self.decide, task)

    def decide(self, task: CriterionTask) -> CriterionResult:
        started = time.perf_counter()
        steps: list[ReasoningStep] = []
        citations = cite_policy(task.policy, task.criterion.quote)
        _step(steps, StepKind.OBSERVATION, _citation_note(citations))
        conditions = task.criterion.conditions
        if conditions is None:
            rationale = "The criterion has no checkable conditions: a reviewer must judge it."
            atoms: list[AtomResult] = []
            verdict = Conclusion(
                CriterionStatus.UNCERTAIN,
                ReasonCode.NO_CONDITIONS,
                rationale,
                [],
                _CONFIDENCE[CriterionStatus.UNCERTAIN],
            )
        else:
            reading = self.reading(task.case)
            atoms = evaluate_conditions(conditions, reading, self.min_fact_confidence)
            for atom in atoms:
                _step(steps, StepKind.OBSERVATION, _atom_line(atom), tool="check_atom")
            verdict = conclude(task.case, conditions, atoms)
        _step(steps, StepKind.DECISION, f"{verdict.status.value}: {verdict.rationale}")
        return CriterionResult(
            criterion_id=task.criterion.criterion_id,
            status=verdict.status,
            confidence=verdict.confidence,
            rationale=verdict.rationale,
            policy_citations=citations,
            case_evidence=verdict.evidence,
            reason_code=verdict.reason,
            atoms=atoms,
            reasoning_trace=steps,
            controller=self.name,
            usage=Usage(
                tool_calls=len(atoms),
                latency_ms=round((time.perf_counter() - started) * 1000, 3),
            ),
        )

    def reading(self, case: CaseBundle) -> CaseReading:
        """The case read once per evaluation: every criterion of it shares one reading."""
        with self._lock:
            kept = self._readings.get(id(case))
            if kept is not None and kept[0] is case:
                self._readings.move_to_end(id(case))
                return kept[1]
        reading = CaseReading.read(case, self.vocabulary, self.context)
        with self._lock:
            self._readings[id(case)] = (case, reading)
            while len(self._readings) > _READINGS_KEPT:
                self._readings.popitem(last=False)
        return reading


def evaluate_conditions(
    conditions: Conditions, reading: CaseReading, min_fact_confidence: float
) -> list[AtomResult]:
    """Every atom of the conditions, evaluated against the case."""
    head = atoms_of(conditions.applies_if) if conditions.applies_if is not None else []
    results = [
        _atom_result(atom, evaluate_atom(atom, reading, min_fact_confidence), applicability=True)
        for atom in head
    ]
    affirming = {atom.id for atom in affirming_atoms_of(conditions.require)}
    results += [
        _atom_result(
            atom,
            evaluate_atom(atom, reading, min_fact_confidence, affirming=atom.id in affirming),
        )
        for atom in atoms_of(conditions.require)
    ]
    return results


@dataclass(frozen=True, slots=True)
class Conclusion:
    """A criterion's status decided from its atoms, with the verified evidence behind it."""

    status: CriterionStatus
    reason: ReasonCode | None
    rationale: str
    evidence: list[CaseEvidence]
    confidence: float


def conclude(case: CaseBundle, conditions: Conditions, atoms: list[AtomResult]) -> Conclusion:
    """Combine the atoms' states (whoever decided them) into the criterion's status; `met`
    also needs the holding atoms' evidence to verify against the case, else `uncertain`, or
    `missing_info` when it holds only by the case's silence and so cites nothing."""
    status, reason, rationale = _decide(conditions, atoms)
    evidence = _evidence(case, atoms, status)
    if status is CriterionStatus.MET and not evidence and _held_by_silence(atoms):
        status, reason = CriterionStatus.MISSING_INFO, None
        rationale += " Nothing in the case speaks to it, so not met."
    elif status is CriterionStatus.MET and not evidence:
        status, reason = CriterionStatus.UNCERTAIN, ReasonCode.INVALID_CITATION
        rationale += " No case evidence could be verified, so not met."
    return Conclusion(status, reason, rationale, evidence, _CONFIDENCE[status])


def _held_by_silence(atoms: list[AtomResult]) -> bool:
    """Whether every requirement that holds, holds only because the case is silent on it: no
    evidence was cited, so none failed to verify."""
    holding = [a for a in atoms if a.state is AtomState.HOLDS and not a.applicability]
    return bool(holding) and not any(_needs_evidence(a) for a in holding)


def _needs_evidence(atom: AtomResult) -> bool:
    """Whether a `met` resting on the atom needs its evidence: an applicability atom only says
    the criterion applies, and an atom held by silence has nothing to cite."""
    return not (atom.applicability or atom.by_silence)


def _atom_result(atom: Atom, verdict: AtomVerdict, *, applicability: bool = False) -> AtomResult:
    return AtomResult(
        atom_id=atom.id,
        label=atom.label,
        kind=atom.kind,
        state=verdict.state,
        note=verdict.note[:300],
        evidence=verdict.evidence,
        applicability=applicability,
        by_silence=verdict.by_silence,
    )


def _decide(
    conditions: Conditions, atoms: list[AtomResult]
) -> tuple[CriterionStatus, ReasonCode | None, str]:
    states = {atom.atom_id: atom.state for atom in atoms}
    silent = {atom.atom_id for atom in atoms if atom.by_silence}
    status = criterion_status(conditions, states, silent)
    reason = ReasonCode.CONFLICTING_EVIDENCE if status is CriterionStatus.UNCERTAIN else None
    return status, reason, _rationale(status, atoms)


def _rationale(status: CriterionStatus, atoms: list[AtomResult]) -> str:
    if status is CriterionStatus.NOT_APPLICABLE:
        shown = [a for a in atoms if a.applicability]
        head = "Not applicable: the case is not in the situation the criterion covers."
    else:
        shown = [a for a in atoms if not a.applicability]
        head = {
            CriterionStatus.MET: "Met: every required condition holds on the case's evidence.",
            CriterionStatus.NOT_MET: "Not met: the case's evidence shows a condition fails.",
            CriterionStatus.MISSING_INFO: "Missing information: no evidence for a condition.",
            CriterionStatus.UNCERTAIN: "Uncertain: the evidence conflicts or is vague.",
        }[status]
    parts = [f"{a.label}: {a.state.value}" + (f" ({a.note})" if a.note else "") for a in shown]
    return " ".join([head, *(f"[{part}]" for part in parts)])[:2000]


def _evidence(
    case: CaseBundle, atoms: list[AtomResult], status: CriterionStatus
) -> list[CaseEvidence]:
    """The verified evidence of the atoms that decided the status (holding atoms for `met`)."""
    wanted = {
        CriterionStatus.MET: {AtomState.HOLDS},
        CriterionStatus.NOT_MET: {AtomState.FAILS},
        CriterionStatus.UNCERTAIN: {AtomState.CONFLICTING},
    }.get(status, {AtomState.HOLDS, AtomState.FAILS, AtomState.CONFLICTING})
    kept: dict[tuple[object, ...], CaseEvidence] = {}
    for atom in atoms:
        if atom.state not in wanted:
            continue
        verified = [v for v in (verify_case_evidence(case, e) for e in atom.evidence) if v]
        if status is CriterionStatus.MET and _needs_evidence(atom) and not verified:
            return []
        for item in verified:
            kept.setdefault((item.field, item.doc_id, item.page, item.char_start), item)
    return list(kept.values())[:12]


def cite_policy(policy: Policy, quote: str) -> list[PolicyCitation]:
    """The tree node that holds the criterion's verbatim quote, as a verified citation."""
    if not quote:
        return []
    for node in walk(policy.tree):
        if find_quote(node.text, quote) is not None:
            citation = PolicyCitation(policy_id=policy.policy_id, node_id=node.node_id, quote=quote)
            verified = verify_policy_citation(policy, citation)
            if verified is not None:
                return [verified]
    return []


def _citation_note(citations: list[PolicyCitation]) -> str:
    if not citations:
        return "criterion quote not found in the policy tree"
    return f"criterion quote found in node {citations[0].node_id}"


def _atom_line(atom: AtomResult) -> str:
    prefix = "applies if " if atom.applicability else ""
    return f"{prefix}{atom.atom_id} ({atom.kind}) {atom.label}: {atom.state.value} — {atom.note}"


def _step(
    steps: list[ReasoningStep], kind: StepKind, content: str, *, tool: str | None = None
) -> None:
    steps.append(ReasoningStep(index=len(steps), kind=kind, tool=tool, content=content[:500]))
