"""What one ReAct run is given (`ReActLimits`) and what it changes (`LoopState`), and the budget
rule checked before each LLM call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reasoning_service.models import Message, ReasoningStep, StepKind, Usage

__all__ = ["LoopState", "ReActLimits", "budget_exhausted"]


@dataclass(frozen=True)
class ReActLimits:
    """Limits of one criterion's run (DESIGN.md, "The ReAct loop")."""

    max_iterations: int = 10
    token_budget: int = 6000
    abstain_below: float = 0.65
    max_output_tokens: int = 800
    evaluation_deadline_s: float | None = None
    """Seconds from the task's creation after which an open criterion is `uncertain`
    (`deadline`); None: no deadline."""


@dataclass
class LoopState:
    """What one run changes: the conversation, the trace and the usage."""

    messages: list[Message]
    steps: list[ReasoningStep] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    last_input_tokens: int = 0
    """Prompt size of the latest call: the least the next call will cost."""
    nudged: bool = False
    citations_retried: bool = False

    def step(self, kind: StepKind, content: str = "", **extra: Any) -> None:
        self.steps.append(ReasoningStep(index=len(self.steps), kind=kind, content=content, **extra))


def budget_exhausted(state: LoopState, limits: ReActLimits) -> bool:
    """True when the next call would cross the budget: it resends at least the last prompt."""
    return state.usage.total_tokens + state.last_input_tokens > limits.token_budget
