"""Offline prompt optimisation of the production ReAct controller with GEPA."""

from reasoning_service.optimization.prompt_optimizer import (
    OptimizationReport,
    ReActGEPAAdapter,
    candidate_from_prompt,
    optimize_prompt,
    prompt_from_candidate,
)

__all__ = [
    "OptimizationReport",
    "ReActGEPAAdapter",
    "candidate_from_prompt",
    "optimize_prompt",
    "prompt_from_candidate",
]
