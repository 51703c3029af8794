"""The one place tests read their data from: policies and criteria in `examples/`, case bundles
in `tests/fixtures/`. Importable from every test (`pythonpath = ["tests"]` in pyproject.toml)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from reasoning_service.models import CaseBundle, CriteriaSet, Policy, SourceFormat
from retrieval.markdown import build_tree_from_markdown

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
"""Bundled example policies (`policies/<id>.md`), criteria (`criteria/<id>.json`) and a case."""
FIXTURES = Path(__file__).resolve().parent / "fixtures"
"""Small copies of dev case bundles (`<case_id>.json`)."""
SHARED_DATA = REPO.parent / "shared" / "data"
"""The workspace's labeled data, when it is beside the repository (some tests skip without it)."""


def load_policy(policy_id: str) -> Policy:
    """An example policy with its criteria, its tree built from the Markdown."""
    text = (EXAMPLES / "policies" / f"{policy_id}.md").read_text()
    criteria = CriteriaSet.model_validate(
        json.loads((EXAMPLES / "criteria" / f"{policy_id}.json").read_text())
    )
    return Policy(
        policy_id=policy_id,
        version=criteria.version,
        sha256="0" * 64,
        title=policy_id,
        source_format=SourceFormat.MARKDOWN,
        created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        tree=build_tree_from_markdown(text),
        criteria=criteria,
    )


def load_case_json(case_id: str) -> dict[str, Any]:
    """A fixture case bundle as JSON."""
    return json.loads((FIXTURES / f"{case_id}.json").read_text())


def load_case(case_id: str) -> CaseBundle:
    """A fixture case bundle."""
    return CaseBundle.model_validate(load_case_json(case_id))
