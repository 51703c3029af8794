"""Loading labeled examples, TrialGPT annotations and a data folder."""

import hashlib
import json
from pathlib import Path

import pytest

from reasoning_service.harness.datasets import (
    DatasetError,
    load_data_dir,
    load_labeled_examples,
    load_trialgpt,
    note_sentences,
    to_policy,
)
from reasoning_service.models import CriterionStatus, Not
from reasoning_service.tools.citations import find_quote
from retrieval.tree import walk

NOTE = "0. A 60-year-old man with type 2 diabetes.\n1. HbA1c is 8.1%.\n2. He smokes."

LABELS = [
    ("inclusion", "included", CriterionStatus.MET),
    ("inclusion", "not included", CriterionStatus.NOT_MET),
    ("exclusion", "excluded", CriterionStatus.MET),
    ("exclusion", "not excluded", CriterionStatus.NOT_MET),
    ("inclusion", "not enough information", CriterionStatus.MISSING_INFO),
    ("exclusion", "not enough information", CriterionStatus.MISSING_INFO),
    ("inclusion", "not applicable", CriterionStatus.NOT_APPLICABLE),
    ("exclusion", "not applicable", CriterionStatus.NOT_APPLICABLE),
]


def _annotation(annotation_id: int, kind: str, label: str, sentences: str = "[1, 2]") -> dict:
    return {
        "annotation_id": annotation_id,
        "patient_id": "sigir-1",
        "note": NOTE,
        "trial_id": "NCT0001",
        "trial_title": "Metformin in Smokers",
        "criterion_type": kind,
        "criterion_text": "HbA1c between 7% and 10%.",
        "expert_eligibility": label,
        "expert_sentences": sentences,
    }


def _write_trialgpt(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "train.json"
    path.write_text(json.dumps(records))
    return path


def test_trialgpt_maps_every_label_combination(tmp_path: Path) -> None:
    records = [_annotation(i, kind, label) for i, (kind, label, _) in enumerate(LABELS)]
    examples, policies = load_trialgpt(_write_trialgpt(tmp_path, records))
    assert [e.gold_status for e in examples] == [status for *_, status in LABELS]
    assert [e.example_id for e in examples] == [f"trialgpt/{i}" for i in range(len(LABELS))]
    assert len(policies) == len(LABELS)


def test_trialgpt_policy_case_and_gold_evidence(tmp_path: Path) -> None:
    records = [_annotation(7, "exclusion", "excluded")]
    (example,), policies = load_trialgpt(_write_trialgpt(tmp_path, records))
    source = policies[example.policy_id]
    assert example.policy_id == "trialgpt/NCT0001/7"
    assert example.criterion_id == "trialgpt/NCT0001/7/C1"
    assert source.markdown.startswith("# Metformin in Smokers\n")
    assert "## Exclusion criterion" in source.markdown
    assert source.criteria.logic == Not(not_=example.criterion_id)
    policy = to_policy(source)
    assert any(find_quote(n.text, example.gold_policy_quote) for n in walk(policy.tree))
    (document,) = example.case.documents
    assert document.pages == [NOTE]
    assert example.gold_sentence_ids == [1, 2]
    assert example.gold_case_quotes == ["HbA1c is 8.1%.", "He smokes."]


def test_trialgpt_rejects_unknown_label_and_bad_sentences(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"\[0\].*unknown label"):
        load_trialgpt(_write_trialgpt(tmp_path, [_annotation(0, "inclusion", "excluded")]))
    with pytest.raises(DatasetError, match="not sentences of the note"):
        load_trialgpt(_write_trialgpt(tmp_path, [_annotation(0, "inclusion", "included", "[9]")]))


def test_trialgpt_skips_annotation_without_criterion(tmp_path: Path) -> None:
    record = {**_annotation(0, "inclusion", "included"), "criterion_text": None}
    examples, policies = load_trialgpt(_write_trialgpt(tmp_path, [record]))
    assert examples == [] and policies == {}


def test_note_sentences_strip_numbers() -> None:
    assert note_sentences(NOTE)[1] == "HbA1c is 8.1%."


CASE = {
    "case_id": "c1",
    "facts": [{"field": "sleep_study.ahi", "value": 18}],
    "documents": [{"doc_id": "psg", "pages": ["AHI: 18 events/hour"]}],
}


def _example_line(example_id: str, case: str = "../cases/c1.json") -> str:
    return json.dumps(
        {
            "example_id": example_id,
            "case": case,
            "policy_id": "P",
            "criterion_id": "P/C1",
            "gold_status": "met",
            "gold_policy_quote": "AHI ≥ 15",
            "gold_case_quotes": ["AHI: 18 events/hour"],
        }
    )


def test_labeled_examples_resolve_case_paths_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "c1.json").write_text(json.dumps(CASE))
    (tmp_path / "eval").mkdir()
    path = tmp_path / "eval" / "dev.jsonl"
    path.write_text(_example_line("a") + "\n\n" + _example_line("b") + "\n")
    examples = load_labeled_examples(path)
    assert [e.example_id for e in examples] == ["a", "b"]
    assert examples[0].case.case_id == "c1"
    assert examples[0].gold_sentence_ids is None


@pytest.mark.parametrize(
    ("second_line", "message"),
    [
        ("{not json", r"dev.jsonl:2: not valid JSON"),
        (_example_line("b", case="../cases/missing.json"), r"dev.jsonl:2: cannot read case"),
        (_example_line("a"), r"dev.jsonl:2: example_id 'a' appears twice"),
        (json.dumps({"example_id": "c", "case": "../cases/c1.json"}), r"dev.jsonl:2: invalid"),
    ],
)
def test_labeled_example_errors_name_the_line(
    tmp_path: Path, second_line: str, message: str
) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "c1.json").write_text(json.dumps(CASE))
    (tmp_path / "eval").mkdir()
    path = tmp_path / "eval" / "dev.jsonl"
    path.write_text(_example_line("a") + "\n" + second_line + "\n")
    with pytest.raises(DatasetError, match=message):
        load_labeled_examples(path)


def _data_dir(tmp_path: Path, sha256: str | None = None) -> Path:
    markdown = "# Policy\n\n## Coverage\n\nAHI ≥ 15 events per hour.\n"
    (tmp_path / "policies").mkdir()
    (tmp_path / "criteria").mkdir()
    (tmp_path / "policies" / "P.md").write_text(markdown, encoding="utf-8")
    digest = sha256 or hashlib.sha256(markdown.encode()).hexdigest()
    manifest = {
        "policies": [
            {"policy_id": "P", "version": "2", "title": "Policy", "file": "P.md", "sha256": digest}
        ]
    }
    (tmp_path / "policies" / "manifest.json").write_text(json.dumps(manifest))
    criteria = {
        "policy_id": "P",
        "version": "2",
        "logic": "P/C1",
        "criteria": [{"criterion_id": "P/C1", "text": "AHI at least 15."}],
    }
    (tmp_path / "criteria" / "P.json").write_text(json.dumps(criteria))
    return tmp_path


def test_load_data_dir_and_to_policy(tmp_path: Path) -> None:
    ((entry, markdown, criteria),) = load_data_dir(_data_dir(tmp_path))
    assert entry.policy_id == "P" and criteria.criteria[0].criterion_id == "P/C1"
    policy = to_policy(load_data_dir(tmp_path)[0])
    assert policy.version == "2" and policy.criteria == criteria
    assert policy.tree[0].title == "Policy"
    assert "AHI" in markdown


def test_load_data_dir_rejects_sha256_mismatch(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not match the manifest"):
        load_data_dir(_data_dir(tmp_path, sha256="0" * 64))
