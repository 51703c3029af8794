"""GEPA over the atom-question prompt: the prompt a model answers single atoms under (issue 16).

With conditions, the model never runs the ReAct loop; it answers one narrow question per atom
(`conditions/atom_questions.py`). So for the local model the prompt worth evolving is that one.
The candidate is a single component, the system prompt of `AtomQuestionController`. A metric
call asks one hand-labeled question (`eval/atom_questions.jsonl`) through the production
controller — same answer format, id verification and negated check — and scores the answer that
survives the checks (`checked`) against gold: 1 when right, else 0; the feedback GEPA reflects on
names the gold answer, the labeler's note and what the model said, a wrong "yes" first.

The questions are split by a fixed rule (`split_questions`) into GEPA's train and validation
sets and a held-out part GEPA never sees. The held-out part is asked under the base prompt and
under GEPA's best candidate; the new prompt is written as a new version only when it is better
there: more right answers and no more wrong "yes".
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gepa import EvaluationBatch, optimize

from reasoning_service.conditions.atom_questions import AtomQuestionController
from reasoning_service.harness.atom_questions import (
    AtomQuestion,
    QuestionOutcome,
    run_atom_questions,
    summarise,
)
from reasoning_service.harness.optimize import (
    SYSTEM,
    GEPALog,
    ReflectionLM,
    prompt_from_candidate,
    run_on,
)
from reasoning_service.llm.base import LLMClient
from reasoning_service.prompts import Prompt, write_prompt
from reasoning_service.service.container import Services

__all__ = ["AtomOptimizationReport", "optimize_atom_prompt", "split_questions"]

REFLECTION_MAX_TOKENS = 700
"""A new atom prompt is ~250 tokens; a local server's context (4,096) holds the reflection's
input and this much output."""

AtomControllerFactory = Callable[[Prompt], AtomQuestionController]


def split_questions(
    questions: Sequence[AtomQuestion], *, holdout_every: int = 3
) -> tuple[list[AtomQuestion], list[AtomQuestion], list[AtomQuestion]]:
    """(train, validation, held-out): every `holdout_every`-th question is held out, and every
    third of the rest validates. Fixed by position, so a rerun sees the same split."""
    held_out = list(questions[::holdout_every])
    rest = [q for i, q in enumerate(questions) if i % holdout_every]
    return [q for i, q in enumerate(rest) if i % 3 != 2], rest[2::3], held_out


def score(outcome: QuestionOutcome) -> float:
    return 1.0 if outcome.checked == outcome.gold else 0.0


def feedback(question: AtomQuestion, outcome: QuestionOutcome) -> str:
    said = f'The model answered "{outcome.raw}"'
    if outcome.checked != outcome.raw:
        said += f', which the checks turned into "{outcome.checked}"'
    if outcome.checked == "yes" and question.gold != "yes":
        verdict = 'A wrong "yes": the costliest error, since it can approve coverage.'
    elif outcome.checked == question.gold:
        verdict = "Right."
    else:
        verdict = "Wrong."
    note = f" Why: {question.note}" if question.note else ""
    return f'{verdict} The correct answer is "{question.gold}".{note} {said}.'


class AtomGEPAAdapter:
    """`gepa.GEPAAdapter` asking labeled atom questions through the production controller."""

    propose_new_texts = None
    """GEPA's own reflective proposal (with `reflection_lm`) writes the new texts."""

    def __init__(
        self,
        *,
        controller_for: AtomControllerFactory,
        services: Services,
        root: Path,
        loop: asyncio.AbstractEventLoop,
        on_evaluation: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._controller_for = controller_for
        self._services = services
        self._root = root
        self._loop = loop
        self._on_evaluation = on_evaluation

    def evaluate(
        self, batch: list[AtomQuestion], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch[tuple[AtomQuestion, QuestionOutcome], QuestionOutcome]:
        controller = self._controller_for(prompt_from_candidate(candidate, "gepa-candidate"))
        outcomes = run_on(
            self._loop,
            run_atom_questions(
                batch, self._services, controller, root=self._root, log=lambda _: None
            ),
        )
        scores = [score(o) for o in outcomes]
        if self._on_evaluation is not None:
            self._on_evaluation({"questions": len(batch), "mean_score": sum(scores) / len(batch)})
        return EvaluationBatch(
            outputs=outcomes,
            scores=scores,
            trajectories=list(zip(batch, outcomes, strict=True)) if capture_traces else None,
        )

    def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch[tuple[AtomQuestion, QuestionOutcome], QuestionOutcome],
        components_to_update: list[str],
    ) -> dict[str, list[dict[str, Any]]]:
        records = [
            {
                "Inputs": {"atom": q.atom_id, "snippets": [s["text"] for s in q.snippets]},
                "Generated Outputs": {"answer": o.raw, "after the service's checks": o.checked},
                "Feedback": feedback(q, o),
            }
            for q, o in eval_batch.trajectories or []
        ]
        return {component: records for component in components_to_update}


@dataclass
class AtomOptimizationReport:
    """What `eval optimize-atoms` reports, and writes next to an adopted prompt."""

    prompt_id: str
    base_prompt_id: str
    budget: int
    metric_calls: int | None
    val_scores: list[float]
    best_index: int
    """The proposal tried on the held-out questions (0: none, only the base)."""
    held_out_before: dict[str, Any]
    held_out_after: dict[str, Any] | None
    """Under GEPA's best proposal; None when the budget left no proposal that reached
    validation."""
    seconds: float
    proposal: str | None = None
    """The text of the proposal tried on the held-out questions."""
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None

    @property
    def adopted(self) -> bool:
        return self.path is not None


def better_on_held_out(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """More right answers after the checks, and no more wrong "yes"."""
    old, new = before["stages"]["checked"], after["stages"]["checked"]
    return new["accuracy"] > old["accuracy"] and new["wrong_yes"] <= old["wrong_yes"]


async def optimize_atom_prompt(
    *,
    base: Prompt,
    controller_for: AtomControllerFactory,
    services: Services,
    reflection_llm: LLMClient,
    questions: Sequence[AtomQuestion],
    root: Path,
    budget: int,
    prompts_dir: Path,
    new_prompt_id: str | None = None,
    holdout_every: int = 3,
    minibatch_size: int = 3,
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> AtomOptimizationReport:
    """Evolve `base` with GEPA within `budget` metric calls (questions asked); write the best
    as a new version only when it is better on the held-out questions."""
    started = asyncio.get_running_loop().time()
    train, val, held_out = split_questions(questions, holdout_every=holdout_every)
    log(f"questions: {len(train)} train, {len(val)} validation, {len(held_out)} held out")
    loop = asyncio.get_running_loop()
    evaluations: list[dict[str, Any]] = []

    def evaluated(entry: dict[str, Any]) -> None:
        evaluations.append(entry)
        log(f"  GEPA asked {entry['questions']} questions: mean score {entry['mean_score']:.2f}")

    adapter = AtomGEPAAdapter(
        controller_for=controller_for,
        services=services,
        root=root,
        loop=loop,
        on_evaluation=evaluated,
    )
    result = await asyncio.to_thread(
        optimize,
        seed_candidate={SYSTEM: base.system},
        trainset=train,
        valset=val,
        adapter=adapter,
        reflection_lm=ReflectionLM(reflection_llm, loop, max_output_tokens=REFLECTION_MAX_TOKENS),
        max_metric_calls=budget,
        reflection_minibatch_size=minibatch_size,
        seed=seed,
        raise_on_exception=True,
        logger=GEPALog(),
    )
    prompt_id = new_prompt_id or f"{base.prompt_id}-gepa-{dt.datetime.now(dt.UTC):%Y%m%d%H%M%S}"
    scores = list(result.val_aggregate_scores)
    # The best proposal on validation, even one that only ties the base: the held-out questions
    # decide, so a tie there is not thrown away unseen.
    challenger = max(range(1, len(scores)), key=lambda i: scores[i], default=None)
    log("held-out questions under the base prompt")
    before = await _held_out(held_out, services, controller_for(base), root, log)
    after, best = None, None
    if challenger is not None:
        best = prompt_from_candidate(result.candidates[challenger], prompt_id)
        log("held-out questions under GEPA's best proposal")
        after = await _held_out(held_out, services, controller_for(best), root, log)
    report = AtomOptimizationReport(
        prompt_id=prompt_id,
        base_prompt_id=base.prompt_id,
        budget=budget,
        metric_calls=result.total_metric_calls,
        val_scores=scores,
        best_index=challenger or 0,
        held_out_before=before,
        held_out_after=after,
        seconds=round(loop.time() - started, 1),
        proposal=best.system if best else None,
        evaluations=evaluations,
    )
    if best is not None and after is not None and better_on_held_out(before, after):
        report.path = write_prompt(
            prompts_dir,
            best,
            metadata={
                "prompt_id": prompt_id,
                "parent_prompt_id": base.prompt_id,
                "optimizer": "gepa (atom questions)",
                "created_at": dt.datetime.now(dt.UTC).isoformat(),
                "budget": budget,
                "metric_calls": report.metric_calls,
                "val_scores": report.val_scores,
                "held_out_before": before["stages"]["checked"],
                "held_out_after": after["stages"]["checked"],
                "train": [q.id for q in train],
                "validation": [q.id for q in val],
                "held_out": [q.id for q in held_out],
            },
        )
    return report


async def _held_out(
    questions: list[AtomQuestion],
    services: Services,
    controller: AtomQuestionController,
    root: Path,
    log: Callable[[str], None],
) -> dict[str, Any]:
    outcomes = await run_atom_questions(questions, services, controller, root=root, log=log)
    return summarise(outcomes)
