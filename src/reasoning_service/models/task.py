"""What every controller is: something that turns one criterion task into a criterion result."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from reasoning_service.models import (
    CaseBundle,
    Criterion,
    CriterionResult,
    LLMInteraction,
    Message,
    Policy,
)


@dataclass
class CriterionTrace:
    """What an LLM controller said and sent while deciding one criterion; stored for audit."""

    messages: list[Message] = field(default_factory=list)
    interactions: list[LLMInteraction] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CriterionTask:
    """One criterion of one policy, to be judged against one case.

    `trace` is filled by controllers that talk to an LLM; the heuristic leaves it empty.
    """

    case: CaseBundle
    policy: Policy
    criterion: Criterion
    trace: CriterionTrace = field(default_factory=CriterionTrace)
    created_at: float = field(default_factory=time.monotonic)
    """`time.monotonic()` when the task was made: an evaluation makes all its tasks at once, so
    a deadline measured from here is a deadline for the whole evaluation, queueing included."""


class Controller(Protocol):
    """A way of deciding criteria: `heuristic` (no LLM) or `react` (LLM with tools)."""

    name: str

    async def evaluate(self, task: CriterionTask) -> CriterionResult:
        """Decide one criterion. Never raises for a model or data problem: those become statuses."""
        ...
