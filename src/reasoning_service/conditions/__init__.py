"""The deterministic controller: criteria decided by their checkable conditions, without an LLM.

A criterion's `conditions` (models/conditions.py, docs/conditions.md) are atoms over the case:
`case_reading` reads the case once (sentences with ConText stance, facts by their words),
`atoms` decides each atom with the evidence behind it, `combine` applies three-valued logic and
`controller` turns that into a criterion result. Vocabulary is data (`vocabulary`), never code.
`atom_questions` is the LLM's part: one narrow, verified question per atom code cannot settle
(the ReAct controller is handed it by the service). Imports tools, llm, retrieval, models;
never agent, rollout or service.
"""

from reasoning_service.conditions.controller import ConditionsController
from reasoning_service.conditions.library import ConditionsLibrary
from reasoning_service.conditions.vocabulary import Vocabulary, load_vocabulary

__all__ = ["ConditionsController", "ConditionsLibrary", "Vocabulary", "load_vocabulary"]
