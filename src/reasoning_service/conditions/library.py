"""Reviewed conditions that travel with a criterion's exact wording.

Conditions are reviewed once per criterion (docs/conditions.md). A criteria set — uploaded by
a client, read from a data folder such as `shared/data`, or stored by an earlier release — gets
the reviewed conditions of the same policy id, version and criterion id, but only when the
criterion's text is identical: a reworded criterion is a new criterion and needs its own review.
The library is the reviewed source of truth: a revised review of the same criterion replaces
what an older copy carried (a policy version's text never changes; its review may improve).
Criteria the library does not know keep their own conditions.
"""

from __future__ import annotations

import json
from pathlib import Path

from reasoning_service.models import CriteriaSet
from reasoning_service.models.conditions import Conditions

__all__ = ["ConditionsLibrary"]

_Key = tuple[str, str, str, str]


class ConditionsLibrary:
    """Conditions by (policy id, version, criterion id, criterion text)."""

    def __init__(self, entries: dict[_Key, Conditions] | None = None) -> None:
        self._entries = dict(entries or {})

    @classmethod
    def from_folder(cls, folder: Path) -> ConditionsLibrary:
        """Every `criteria/*.json` under `folder` that carries conditions (an empty library
        when the folder does not exist)."""
        entries: dict[_Key, Conditions] = {}
        for path in sorted((folder / "criteria").glob("*.json")):
            criteria = CriteriaSet.model_validate(json.loads(path.read_text()))
            for criterion in criteria.criteria:
                if criterion.conditions is not None:
                    key = (
                        criteria.policy_id,
                        criteria.version,
                        criterion.criterion_id,
                        criterion.text,
                    )
                    entries[key] = criterion.conditions
        return cls(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def attach(self, criteria: CriteriaSet) -> CriteriaSet:
        """`criteria` with the reviewed conditions of every criterion the library knows."""
        updated = []
        for criterion in criteria.criteria:
            key = (criteria.policy_id, criteria.version, criterion.criterion_id, criterion.text)
            reviewed = self._entries.get(key)
            if reviewed is not None and reviewed != criterion.conditions:
                criterion = criterion.model_copy(update={"conditions": reviewed})
            updated.append(criterion)
        return criteria.model_copy(update={"criteria": updated})
