"""`reasoning-service eval atoms`: a model over hand-labeled atom questions.

Each question (`eval/atom_questions.jsonl`) names a case, a criterion and one of its atoms, the
gold answer (`yes`, `no` — documented absent, denied, not done — or `unknown`), and the snippets
it was labeled on. The snippets are rebuilt from the case exactly as the service builds them
(`snippets_for`); a question whose rebuilt snippets differ is reported as `stale`, since its
label was made on other text. The model is asked through the production `AtomQuestionController`
(same prompt, answer format, id verification), always with the consistency check, so one run
gives every stage:

- `raw`: the model's own answer word;
- `verified`: what code makes of it (`model_state`): a "yes" counts only when its cited ids were
  shown, verify, and show the patient's side with no negation, relative or hypothetical;
- `checked`: the same after the negated question (a second "yes" turns the first into unknown);
- `code`: code's own verdict on the atom, without the model (the baseline);
- `merged`: the atom state the service goes on with: `merge_states(code, checked)` where the
  service would ask this atom, code's verdict where it would not (`ask_decided` off: findings
  code decided are not asked).

Conflicting counts as `unknown` (both are the safe side). Per stage: accuracy and wrong "yes"
(a "yes" where gold is `no` or `unknown`) over the questions whose gold is not "yes".
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from reasoning_service.conditions.atom_questions import (
    AtomAsked,
    AtomQuestionController,
    merge_states,
    snippets_for,
)
from reasoning_service.conditions.controller import evaluate_conditions
from reasoning_service.llm.local_server import PromptCacheLog
from reasoning_service.models import AtomState, CaseBundle
from reasoning_service.models.task import CriterionTask
from reasoning_service.service.container import Services

__all__ = [
    "AtomQuestion",
    "QuestionOutcome",
    "load_atom_questions",
    "run_atom_questions",
    "summarise",
]

Gold = Literal["yes", "no", "unknown"]
STAGES = ("raw", "verified", "checked", "code", "merged")


class AtomQuestion(BaseModel):
    """One labeled question: a case, an atom of one of its policy's criteria, the gold answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    case: str
    """Path of the case bundle, relative to the repository root."""
    policy_id: str
    criterion_id: str
    atom_id: str
    gold: Gold
    note: str = ""
    snippets: list[dict[str, str]]
    """`{id, text}` as shown when the question was labeled."""


@dataclass(frozen=True, slots=True)
class QuestionOutcome:
    """One question's answers at every stage, and what it cost."""

    id: str
    gold: Gold
    raw: str
    verified: str
    checked: str
    code: str
    merged: str
    parsed: bool
    ids_valid: bool
    stale: bool
    seconds: float
    calls: int
    prompt_tokens: int
    cached_tokens: int | None
    """Prompt tokens served from the server's cache; None when the server does not say."""
    output_tokens: int


def load_atom_questions(path: Path) -> list[AtomQuestion]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [AtomQuestion.model_validate_json(line) for line in lines if line.strip()]


def _as_word(state: AtomState | None) -> Gold:
    return {AtomState.HOLDS: "yes", AtomState.FAILS: "no"}.get(state, "unknown")  # type: ignore[arg-type]


async def run_atom_questions(
    questions: list[AtomQuestion],
    services: Services,
    controller: AtomQuestionController,
    *,
    root: Path,
    cache_log: PromptCacheLog | None = None,
    deadline_s: float | None = None,
    log: Callable[[str], None] = print,
) -> list[QuestionOutcome]:
    """Ask every question in order, one at a time (a CPU model serves one request at a time),
    until `deadline_s` of wall time has passed."""
    started = time.perf_counter()
    cases: dict[str, CaseBundle] = {}
    outcomes: list[QuestionOutcome] = []
    for number, question in enumerate(questions, start=1):
        if deadline_s is not None and time.perf_counter() - started > deadline_s:
            log(f"deadline of {deadline_s:.0f} s reached after {len(outcomes)} questions")
            break
        if question.case not in cases:
            cases[question.case] = CaseBundle.model_validate_json(
                (root / question.case).read_text(encoding="utf-8")
            )
        outcome = await _ask(question, cases[question.case], services, controller, cache_log)
        outcomes.append(outcome)
        log(
            f"[{number}/{len(questions)}] {question.id}: gold {outcome.gold}, model {outcome.raw}"
            f" -> {outcome.verified} -> {outcome.checked} ({outcome.seconds:.1f} s)"
        )
    return outcomes


async def _ask(
    question: AtomQuestion,
    case: CaseBundle,
    services: Services,
    controller: AtomQuestionController,
    cache_log: PromptCacheLog | None,
) -> QuestionOutcome:
    policy = await services.policies.get(question.policy_id)
    criterion = policy.criteria.criterion(question.criterion_id) if policy.criteria else None
    if criterion is None or criterion.conditions is None:
        raise ValueError(f"{question.id}: {question.criterion_id} has no conditions")
    conditions = criterion.conditions
    reading = await asyncio.to_thread(services.conditions.reading, case)
    results = evaluate_conditions(conditions, reading, services.conditions.min_fact_confidence)
    by_id = dict(
        zip(
            (a.id for a in conditions.atoms()),
            zip(conditions.atoms(), results, strict=True),
            strict=True,
        )
    )
    atom, code = by_id[question.atom_id]
    snippets = snippets_for(atom, reading, services.conditions.min_fact_confidence)
    stale = [(s.id, s.text) for s in snippets] != [(s["id"], s["text"]) for s in question.snippets]
    task = CriterionTask(case=case, policy=policy, criterion=criterion)
    if cache_log is not None:
        cache_log.reused()  # skip anything logged before this question
    started = time.perf_counter()
    asked = await controller.ask_atom(task, atom, code, snippets)
    seconds = time.perf_counter() - started
    asked_in_service = controller.asks_about(atom, code.state)
    outcome = _outcome(question, asked, code.state, seconds, stale, _cached(asked, cache_log))
    return outcome if asked_in_service else replace(outcome, merged=outcome.code)


def _cached(asked: AtomAsked, cache_log: PromptCacheLog | None) -> int | None:
    reported = sum(reply.usage.cached_input_tokens for reply in asked.replies)
    if cache_log is None:
        return reported
    reused = cache_log.reused()
    if len(reused) != len(asked.replies):
        return None  # the log and the calls do not line up: say nothing rather than guess
    return sum(
        reply.usage.input_tokens if count < 0 else count
        for reply, count in zip(asked.replies, reused, strict=True)
    )


def _outcome(
    question: AtomQuestion,
    asked: AtomAsked,
    code: AtomState,
    seconds: float,
    stale: bool,
    cached: int | None,
) -> QuestionOutcome:
    return QuestionOutcome(
        id=question.id,
        gold=question.gold,
        raw=asked.answer.answer if asked.answer else "unknown",
        verified=_as_word(asked.said),
        checked=_as_word(asked.final),
        code=_as_word(code),
        merged=_as_word(merge_states(code, asked.final)),
        parsed=asked.answer is not None,
        ids_valid=asked.answer is not None and asked.ids_valid,
        stale=stale,
        seconds=round(seconds, 2),
        calls=len(asked.replies),
        prompt_tokens=sum(reply.usage.input_tokens for reply in asked.replies),
        cached_tokens=cached,
        output_tokens=sum(reply.usage.output_tokens for reply in asked.replies),
    )


def summarise(outcomes: list[QuestionOutcome]) -> dict[str, Any]:
    """Accuracy and wrong "yes" per stage, parse and id validity, seconds and tokens."""
    n = len(outcomes)
    if n == 0:
        return {"questions": 0}
    not_yes = [o for o in outcomes if o.gold != "yes"]
    stages = {}
    for stage in STAGES:
        said = [getattr(o, stage) for o in outcomes]
        wrong_yes = sum(1 for o in not_yes if getattr(o, stage) == "yes")
        stages[stage] = {
            "accuracy": round(sum(s == o.gold for s, o in zip(said, outcomes, strict=True)) / n, 3),
            "wrong_yes": wrong_yes,
            "wrong_yes_rate": round(wrong_yes / len(not_yes), 3) if not_yes else None,
            "yes_recall": _recall(outcomes, stage, "yes"),
            "no_recall": _recall(outcomes, stage, "no"),
        }
    seconds = sorted(o.seconds for o in outcomes)
    calls = sum(o.calls for o in outcomes)
    prompt = sum(o.prompt_tokens for o in outcomes)
    known_cache = [o for o in outcomes if o.cached_tokens is not None]
    cached_prompt = sum(o.prompt_tokens for o in known_cache)
    return {
        "questions": n,
        "gold": {g: sum(o.gold == g for o in outcomes) for g in ("yes", "no", "unknown")},
        "stages": stages,
        "parsed": round(sum(o.parsed for o in outcomes) / n, 3),
        "ids_valid": round(sum(o.ids_valid for o in outcomes) / n, 3),
        "stale": sum(o.stale for o in outcomes),
        "calls": calls,
        "seconds_per_question": {"p50": _pct(seconds, 50), "p95": _pct(seconds, 95)},
        "prompt_tokens_per_call": round(prompt / calls, 1) if calls else None,
        "output_tokens_per_call": round(sum(o.output_tokens for o in outcomes) / calls, 1)
        if calls
        else None,
        "cache_share": round(sum(o.cached_tokens or 0 for o in known_cache) / cached_prompt, 3)
        if cached_prompt
        else None,
    }


def _recall(outcomes: list[QuestionOutcome], stage: str, gold: str) -> float | None:
    wanted = [o for o in outcomes if o.gold == gold]
    if not wanted:
        return None
    return round(sum(getattr(o, stage) == gold for o in wanted) / len(wanted), 3)


def _pct(sorted_values: list[float], percent: int) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    return round(statistics.quantiles(sorted_values, n=100, method="inclusive")[percent - 1], 2)


def outcomes_json(outcomes: list[QuestionOutcome], summary: dict[str, Any]) -> str:
    return json.dumps({"summary": summary, "questions": [asdict(o) for o in outcomes]}, indent=2)
