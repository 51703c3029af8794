"""Score the heuristic controller on labeled examples: accuracy, confusion, unsafe-met, latency.

Usage: python eval/heuristic_confusion.py [--data /work/shared/data] [--set dev] [--show-errors]

Every citation of every result is verified again here; the failure count must be 0.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
from collections import Counter
from pathlib import Path

from reasoning_service.conditions.heuristic import HeuristicController
from reasoning_service.models import (
    CaseBundle,
    CriteriaSet,
    CriterionResult,
    CriterionStatus,
    Policy,
    SourceFormat,
)
from reasoning_service.models.task import CriterionTask
from reasoning_service.tools.citations import verify_case_evidence, verify_policy_citation
from retrieval.markdown import build_tree_from_markdown

_STATUSES = [s.value for s in CriterionStatus]
_UNSAFE_GOLD = {CriterionStatus.NOT_MET.value, CriterionStatus.MISSING_INFO.value}


def load_policies(data: Path) -> dict[str, Policy]:
    """Every policy of the manifest, with its tree and criteria."""
    manifest = json.loads((data / "policies" / "manifest.json").read_text())
    policies: dict[str, Policy] = {}
    for entry in manifest["policies"]:
        text = (data / "policies" / entry["file"]).read_text()
        criteria_path = data / "criteria" / f"{entry['policy_id']}.json"
        criteria = CriteriaSet.model_validate_json(criteria_path.read_text())
        policies[entry["policy_id"]] = Policy(
            policy_id=entry["policy_id"],
            version=entry["version"],
            sha256=entry["sha256"],
            title=entry["title"],
            source_format=SourceFormat.MARKDOWN,
            created_at=dt.datetime.now(dt.UTC),
            tree=build_tree_from_markdown(text),
            criteria=criteria,
        )
    return policies


def citation_failures(result: CriterionResult, policy: Policy, case: CaseBundle) -> int:
    """How many of the result's citations cannot be found again in what they cite."""
    failures = sum(verify_policy_citation(policy, c) is None for c in result.policy_citations)
    return failures + sum(verify_case_evidence(case, e) is None for e in result.case_evidence)


async def run(data: Path, set_name: str, show_errors: bool) -> None:
    policies = load_policies(data)
    examples_path = data / "eval" / f"{set_name}.jsonl"
    examples = [json.loads(line) for line in examples_path.read_text().splitlines() if line.strip()]
    controller = HeuristicController()
    confusion: Counter[tuple[str, str]] = Counter()
    latencies: list[float] = []
    failures = unsafe = correct = 0
    cases: dict[str, CaseBundle] = {}
    for example in examples:
        case_path = (examples_path.parent / example["case"]).resolve()
        case = cases.setdefault(
            str(case_path), CaseBundle.model_validate_json(case_path.read_text())
        )
        policy = policies[example["policy_id"]]
        assert policy.criteria is not None
        criterion = policy.criteria.criterion(example["criterion_id"])
        assert criterion is not None
        result = await controller.evaluate(
            CriterionTask(case=case, policy=policy, criterion=criterion)
        )
        gold, predicted = example["gold_status"], result.status.value
        confusion[(gold, predicted)] += 1
        correct += gold == predicted
        unsafe += predicted == "met" and gold in _UNSAFE_GOLD
        failures += citation_failures(result, policy, case)
        latencies.append(result.usage.latency_ms)
        if show_errors and gold != predicted:
            print(
                f"{example['example_id']}: gold={gold} got={predicted} | {result.rationale[:220]}"
            )
    _print_report(confusion, len(examples), correct, unsafe, failures, latencies)


def _print_report(
    confusion: Counter[tuple[str, str]],
    total: int,
    correct: int,
    unsafe: int,
    failures: int,
    latencies: list[float],
) -> None:
    width = max(len(s) for s in _STATUSES) + 2
    print("gold \\ predicted".ljust(width) + "".join(s[:12].rjust(14) for s in _STATUSES))
    for gold in _STATUSES:
        row = "".join(str(confusion[(gold, p)]).rjust(14) for p in _STATUSES)
        print(gold.ljust(width) + row)
    print(f"accuracy: {correct}/{total} = {correct / max(total, 1):.3f}")
    print(f"unsafe met: {unsafe}")
    print(f"latency ms: mean {statistics.mean(latencies):.2f}, max {max(latencies):.2f}")
    print(f"citation failures: {failures}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--set", default="dev")
    parser.add_argument("--show-errors", action="store_true")
    args = parser.parse_args()
    asyncio.run(run(args.data, args.set, args.show_errors))


if __name__ == "__main__":
    main()
