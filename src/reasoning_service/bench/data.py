"""What the benchmarks run on: the policies, and the labeled dev examples when there are any.

`--data DIR` is a folder laid out like `shared/data` (FORMATS.md). Without a labeled set
(`eval/dev.jsonl`), the bundled example case(s) are paired with every criterion of their policy,
unlabeled: parts that need gold labels say they were skipped.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from reasoning_service.conditions import ConditionsLibrary
from reasoning_service.harness.datasets import (
    LabeledExample,
    load_data_dir,
    load_labeled_examples,
    to_policy,
)
from reasoning_service.models import CaseBundle, Policy
from reasoning_service.models.task import CriterionTask
from reasoning_service.service.examples import load_example_cases
from reasoning_service.settings import Settings

__all__ = ["BenchData", "BenchExample", "default_data_dir", "load_bench_data"]

_REPO_ROOT = Path(__file__).resolve().parents[3]
_SHARED_DATA = _REPO_ROOT.parent / "shared" / "data"


def default_data_dir() -> Path:
    """`../shared/data` next to the repository when present, else the bundled `examples/`."""
    return _SHARED_DATA if (_SHARED_DATA / "policies").is_dir() else _REPO_ROOT / "examples"


@dataclass(frozen=True)
class BenchExample:
    """One (case, criterion) to evaluate; `gold` is None without labels."""

    example_id: str
    case: CaseBundle
    policy_id: str
    criterion_id: str
    gold: str | None

    def task(self, policies: dict[str, Policy]) -> CriterionTask:
        policy = policies[self.policy_id]
        assert policy.criteria is not None
        criterion = policy.criteria.criterion(self.criterion_id)
        assert criterion is not None
        return CriterionTask(case=self.case, policy=policy, criterion=criterion)


@dataclass(frozen=True)
class BenchData:
    data_dir: Path
    policies: dict[str, Policy]
    markdown: dict[str, str]
    examples: list[BenchExample]
    labeled: bool

    def describe(self) -> dict[str, object]:
        return {
            "data_dir": str(self.data_dir),
            "policies": len(self.policies),
            "examples": len(self.examples),
            "labeled": self.labeled,
        }


def load_bench_data(data_dir: Path | None = None) -> BenchData:
    """Policies of `data_dir`, and its dev examples (labeled) or its example cases (unlabeled)."""
    root = data_dir or default_data_dir()
    sources = load_data_dir(root)
    created = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    library = ConditionsLibrary.from_folder(Settings().examples_dir)
    policies = {
        s.entry.policy_id: _with_conditions(to_policy(s, created_at=created), library)
        for s in sources
    }
    markdown = {s.entry.policy_id: s.markdown for s in sources}
    dev = root / "eval" / "dev.jsonl"
    if dev.exists():
        labeled = [e for e in load_labeled_examples(dev) if e.policy_id in policies]
        examples = [_from_labeled(e) for e in labeled]
        return BenchData(root, policies, markdown, examples, labeled=True)
    examples = []
    for example in load_example_cases(root):
        case = CaseBundle.model_validate_json((root / "cases" / example.file).read_bytes())
        for policy in policies.values():
            if policy.criteria is None or policy.policy_id != example.policy_id:
                continue
            examples += [
                BenchExample(
                    f"{case.case_id}/{c.criterion_id}", case, policy.policy_id, c.criterion_id, None
                )
                for c in policy.criteria.criteria
            ]
    return BenchData(root, policies, markdown, examples, labeled=False)


def _with_conditions(policy: Policy, library: ConditionsLibrary) -> Policy:
    if policy.criteria is None:
        return policy
    return policy.model_copy(update={"criteria": library.attach(policy.criteria)})


def _from_labeled(example: LabeledExample) -> BenchExample:
    return BenchExample(
        example.example_id,
        example.case,
        example.policy_id,
        example.criterion_id,
        example.gold_status.value,
    )
