"""GEPA over the production ReAct controller (DESIGN.md, "Offline prompt optimisation").

GEPA (`gepa.optimize`, the engine dspy ships for `dspy.GEPA`) evolves text components; ours are
the system prompt and each tool's description. `ReActGEPAAdapter` runs the *real*
`ReActController` — same tools, citation checks and limits as in production — on a minibatch,
scores each example with the evaluation metric (`example_score`) and hands GEPA the metric's
textual feedback (wrong status, citations that miss the gold quote, tools never called). The
reflection model is any OpenAI-compatible endpoint. The best candidate becomes a new prompt
version under `prompts/`, with its scores and lineage, selectable by id.

GEPA's engine is synchronous; it runs in a worker thread while the controller's coroutines run
on the caller's event loop (`run_coroutine_threadsafe`), so LLM clients stay on one loop.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gepa import EvaluationBatch, optimize

from reasoning_service.harness.datasets import LabeledExample
from reasoning_service.harness.metrics import example_score, feedback_for
from reasoning_service.llm.base import LLMClient
from reasoning_service.models import CriterionResult, LLMRequest, Message, Policy, StepKind
from reasoning_service.models.task import Controller, CriterionTask
from reasoning_service.prompts import Prompt, write_prompt
from reasoning_service.tools.executor import TOOL_DESCRIPTIONS

logger = logging.getLogger(__name__)

SYSTEM = "system_prompt"
_TOOL_PREFIX = "tool:"
T = TypeVar("T")

ControllerFactory = Callable[[Prompt], Controller]
"""Builds the production controller for a candidate prompt (no heuristic fallback: a failing
candidate must score as failing)."""


def candidate_from_prompt(prompt: Prompt) -> dict[str, str]:
    """The GEPA candidate: the system prompt plus one component per tool description."""
    descriptions = {**TOOL_DESCRIPTIONS, **prompt.tool_descriptions}
    return {SYSTEM: prompt.system, **{_TOOL_PREFIX + k: v for k, v in descriptions.items()}}


def prompt_from_candidate(candidate: Mapping[str, str], prompt_id: str) -> Prompt:
    tools = {k.removeprefix(_TOOL_PREFIX): v for k, v in candidate.items() if k != SYSTEM}
    return Prompt(prompt_id, candidate[SYSTEM], tools)


@dataclass(frozen=True)
class Rollout:
    """What GEPA keeps of one example run: the result and the metric's verdict on it."""

    example: LabeledExample
    result: CriterionResult
    score: float
    feedback: str


class ReActGEPAAdapter:
    """`gepa.GEPAAdapter` running the production controller on labeled examples."""

    propose_new_texts = None
    """GEPA's own reflective proposal (with `reflection_lm`) writes the new texts."""

    def __init__(
        self,
        *,
        controller_for: ControllerFactory,
        policies: Mapping[str, Policy],
        loop: asyncio.AbstractEventLoop,
        concurrency: int = 4,
        on_candidate: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._controller_for = controller_for
        self._policies = policies
        self._loop = loop
        self._concurrency = concurrency
        self._on_candidate = on_candidate
        self._evaluations = 0

    def evaluate(
        self,
        batch: list[LabeledExample],
        candidate: dict[str, str],
        capture_traces: bool = False,
    ) -> EvaluationBatch[Rollout, CriterionResult]:
        self._evaluations += 1
        controller = self._controller_for(prompt_from_candidate(candidate, "gepa-candidate"))
        results = run_on(self._loop, self._run_batch(controller, batch))
        rollouts = [
            Rollout(e, r, example_score(e, r), feedback_for(e, r))
            for e, r in zip(batch, results, strict=True)
        ]
        if self._on_candidate is not None:
            self._on_candidate(
                {
                    "evaluation": self._evaluations,
                    "examples": [e.example_id for e in batch],
                    "mean_score": sum(r.score for r in rollouts) / max(len(rollouts), 1),
                    "candidate_sha": _digest(candidate),
                }
            )
        return EvaluationBatch(
            outputs=results,
            scores=[r.score for r in rollouts],
            trajectories=rollouts if capture_traces else None,
        )

    def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch[Rollout, CriterionResult],
        components_to_update: list[str],
    ) -> dict[str, list[dict[str, Any]]]:
        rollouts = eval_batch.trajectories or []
        records = [_reflection_record(r) for r in rollouts]
        dataset: dict[str, list[dict[str, Any]]] = {}
        for component in components_to_update:
            if component == SYSTEM:
                dataset[component] = records
            else:
                tool = component.removeprefix(_TOOL_PREFIX)
                dataset[component] = [_tool_record(r, tool) for r in rollouts]
        return dataset

    async def _run_batch(
        self, controller: Controller, batch: Sequence[LabeledExample]
    ) -> list[CriterionResult]:
        limit = asyncio.Semaphore(self._concurrency)

        async def one(example: LabeledExample) -> CriterionResult:
            policy = self._policies[example.policy_id]
            criterion = policy.criteria.criterion(example.criterion_id) if policy.criteria else None
            if criterion is None:
                raise KeyError(f"{example.example_id}: criterion {example.criterion_id} unknown")
            async with limit:
                return await controller.evaluate(
                    CriterionTask(case=example.case, policy=policy, criterion=criterion)
                )

        return list(await asyncio.gather(*(one(e) for e in batch)))


def _reflection_record(rollout: Rollout) -> dict[str, Any]:
    result = rollout.result
    return {
        "Inputs": {
            "criterion": rollout.example.criterion_id,
            "tools_called": [
                s.tool for s in result.reasoning_trace if s.kind is StepKind.TOOL_CALL
            ],
        },
        "Generated Outputs": {
            "status": result.status.value,
            "confidence": result.confidence,
            "rationale": result.rationale,
            "reason_code": result.reason_code.value if result.reason_code else None,
        },
        "Feedback": rollout.feedback,
    }


def _tool_record(rollout: Rollout, tool: str) -> dict[str, Any]:
    calls = [s for s in rollout.result.reasoning_trace if s.tool == tool]
    errors = [s.content for s in calls if s.is_error]
    return {
        "Inputs": {"tool": tool, "calls": [s.arguments for s in calls if s.arguments]},
        "Generated Outputs": {"errors": errors[:3], "times_called": len(calls)},
        "Feedback": rollout.feedback,
    }


def _digest(candidate: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(candidate, sort_keys=True).encode()).hexdigest()[:12]


def run_on(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


class ReflectionLM:
    """GEPA's `LanguageModel` (prompt -> text) backed by one of our LLM clients."""

    def __init__(
        self, llm: LLMClient, loop: asyncio.AbstractEventLoop, *, max_output_tokens: int = 2000
    ) -> None:
        self._llm = llm
        self._loop = loop
        self._max_output_tokens = max_output_tokens

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        messages = (
            (Message(role="user", content=prompt),)
            if isinstance(prompt, str)
            else tuple(Message(role=m["role"], content=str(m["content"])) for m in prompt)
        )
        request = LLMRequest(
            messages=messages, max_output_tokens=self._max_output_tokens, temperature=0.7
        )
        return run_on(self._loop, self._llm.complete(request)).content


class GEPALog:
    """GEPA's progress lines go to our logger at debug level, not to stdout."""

    def log(self, message: str) -> None:
        logger.debug("gepa: %s", message)


@dataclass
class OptimizationReport:
    """What `eval optimize` reports and writes next to the new prompt."""

    prompt_id: str
    base_prompt_id: str
    val_scores: list[float]
    best_index: int
    parents: list[list[int | None]]
    metric_calls: int | None
    candidate_log: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None

    @property
    def improved(self) -> bool:
        return self.best_index != 0 and self.val_scores[self.best_index] > self.val_scores[0]


async def optimize_prompt(
    *,
    base: Prompt,
    controller_for: ControllerFactory,
    reflection_llm: LLMClient,
    policies: Mapping[str, Policy],
    trainset: list[LabeledExample],
    valset: list[LabeledExample],
    budget: int,
    prompts_dir: Path,
    new_prompt_id: str | None = None,
    minibatch_size: int = 3,
    run_dir: Path | None = None,
    seed: int = 0,
) -> OptimizationReport:
    """Evolve `base` with GEPA within `budget` metric calls; write the best as a new version.

    The new version is written only when it beats the base on the validation set.
    """
    loop = asyncio.get_running_loop()
    log: list[dict[str, Any]] = []
    adapter = ReActGEPAAdapter(
        controller_for=controller_for, policies=policies, loop=loop, on_candidate=log.append
    )
    result = await asyncio.to_thread(
        optimize,
        seed_candidate=candidate_from_prompt(base),
        trainset=trainset,
        valset=valset,
        adapter=adapter,
        reflection_lm=ReflectionLM(reflection_llm, loop),
        max_metric_calls=budget,
        reflection_minibatch_size=minibatch_size,
        module_selector="round_robin",
        run_dir=str(run_dir) if run_dir else None,
        seed=seed,
        raise_on_exception=True,
        logger=GEPALog(),
    )
    report = OptimizationReport(
        prompt_id=new_prompt_id or f"{base.prompt_id}-gepa-{dt.datetime.now(dt.UTC):%Y%m%d%H%M%S}",
        base_prompt_id=base.prompt_id,
        val_scores=list(result.val_aggregate_scores),
        best_index=result.best_idx,
        parents=[list(p) for p in result.parents],
        metric_calls=result.total_metric_calls,
        candidate_log=log,
    )
    if report.improved:
        prompt = prompt_from_candidate(result.best_candidate, report.prompt_id)
        report.path = write_prompt(
            prompts_dir,
            prompt,
            metadata={
                "prompt_id": report.prompt_id,
                "parent_prompt_id": base.prompt_id,
                "optimizer": "gepa",
                "created_at": dt.datetime.now(dt.UTC).isoformat(),
                "val_score": report.val_scores[report.best_index],
                "base_val_score": report.val_scores[0],
                "lineage": report.parents,
                "metric_calls": report.metric_calls,
                "trainset": [e.example_id for e in trainset],
                "valset": [e.example_id for e in valset],
            },
        )
    return report
