"""What every controller is: something that turns one criterion task into a criterion result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from reasoning_service.models import CaseBundle, Criterion, CriterionResult, Policy


@dataclass(frozen=True, slots=True)
class CriterionTask:
    """One criterion of one policy, to be judged against one case."""

    case: CaseBundle
    policy: Policy
    criterion: Criterion


class Controller(Protocol):
    """A way of deciding criteria: `heuristic` (no LLM) or `react` (LLM with tools)."""

    name: str

    async def evaluate(self, task: CriterionTask) -> CriterionResult:
        """Decide one criterion. Never raises for a model or data problem: those become statuses."""
        ...
