"""Labeled data for the evaluation harness, read from the on-disk formats of FORMATS.md.

- `load_labeled_examples(path)`: `eval/<set>.jsonl`, with `case` paths relative to the file.
- `load_trialgpt(path)`: TrialGPT criterion annotations, mapped to one-criterion policies and
  one-document cases by the table in FORMATS.md ("TrialGPT criterion annotations").
- `load_data_dir(path)`: a folder laid out like `shared/data` (policy manifest, Markdown, criteria).
- `to_policy(source)`: a loaded policy source as the `Policy` the controllers take.

Every problem with a file is a `DatasetError` naming the file (and line or record) to fix.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reasoning_service.errors import ReasoningError
from reasoning_service.models import (
    CaseBundle,
    CriteriaSet,
    Criterion,
    CriterionStatus,
    Document,
    Not,
    Policy,
    ServiceRequest,
    SourceFormat,
)
from retrieval.markdown import build_tree_from_markdown

__all__ = [
    "TRIALGPT_STATUS",
    "DatasetError",
    "InvalidExample",
    "LabeledExample",
    "ManifestEntry",
    "PolicySource",
    "load_data_dir",
    "load_labeled_examples",
    "load_trialgpt",
    "note_sentences",
    "read_labeled_examples",
    "to_policy",
]

_log = logging.getLogger("reasoning_service.harness")

TRIALGPT_STATUS: dict[tuple[str, str], CriterionStatus] = {
    ("inclusion", "included"): CriterionStatus.MET,
    ("inclusion", "not included"): CriterionStatus.NOT_MET,
    ("exclusion", "excluded"): CriterionStatus.MET,
    ("exclusion", "not excluded"): CriterionStatus.NOT_MET,
    ("inclusion", "not enough information"): CriterionStatus.MISSING_INFO,
    ("exclusion", "not enough information"): CriterionStatus.MISSING_INFO,
    ("inclusion", "not applicable"): CriterionStatus.NOT_APPLICABLE,
    ("exclusion", "not applicable"): CriterionStatus.NOT_APPLICABLE,
}
"""(criterion_type, expert_eligibility) -> status, as FORMATS.md maps them."""

TRIALGPT_DOC_ID = "note"
"""doc_id of the single document a TrialGPT note becomes."""

_SENTENCE = re.compile(r"^(\d+)\.\s(.*)$")


class DatasetError(ReasoningError, ValueError):
    """A data file that cannot be loaded as it is; the message names the file and line."""


class LabeledExample(BaseModel):
    """One (case, criterion) pair with the gold answer (FORMATS.md, "Labeled examples")."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    example_id: str = Field(min_length=1)
    case: CaseBundle
    policy_id: str = Field(min_length=1)
    criterion_id: str = Field(min_length=1)
    gold_status: CriterionStatus
    gold_policy_quote: str = ""
    """Verbatim policy text that governs the decision."""
    gold_fact_fields: list[str] = Field(default_factory=list)
    gold_case_quotes: list[str] = Field(default_factory=list)
    """Verbatim text of the case's documents that is the evidence."""
    gold_sentence_ids: list[int] | None = None
    """TrialGPT only: ids of the numbered note sentences that are the evidence."""
    note: str = ""
    """The labeler's reason, in a few words."""


class ManifestEntry(BaseModel):
    """One policy of `policies/manifest.json`."""

    policy_id: str = Field(min_length=1)
    version: str = "1"
    title: str = ""
    file: str = ""
    source_url: str | None = None
    sha256: str = ""
    license: str | None = None


class PolicySource(NamedTuple):
    """A policy as loaded from disk: its manifest entry, Markdown text and criteria."""

    entry: ManifestEntry
    markdown: str
    criteria: CriteriaSet


# --- labeled examples -------------------------------------------------------------------------


class InvalidExample(BaseModel):
    """A line of a labeled-example file that is not a usable example, and why."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    example_id: str
    """The line's `example_id` when it has one, else `<file>:<line>`."""
    error: str
    """The `DatasetError` message (it names the file and line)."""
    criterion_id: str = ""
    gold_status: CriterionStatus | None = None


def load_labeled_examples(path: Path | str) -> list[LabeledExample]:
    """Read a labeled-example `.jsonl`; each `case` is a path relative to the file's folder.

    Raises:
        DatasetError: a line that is not JSON, a case that is missing or invalid, a bad field,
            or an `example_id` seen twice; the message says which line.
    """
    examples, _ = read_labeled_examples(path, strict=True)
    return examples


def read_labeled_examples(
    path: Path | str, *, strict: bool = False
) -> tuple[list[LabeledExample], list[InvalidExample]]:
    """The valid examples of a labeled-example `.jsonl`, and the lines that are not.

    Without `strict`, a bad line (not JSON, invalid or missing case, bad field, repeated
    `example_id`) becomes an `InvalidExample` and reading goes on; with it, the first one raises.

    Raises:
        DatasetError: the file cannot be read, or (`strict`) the first bad line.
    """
    path = Path(path)
    cases: dict[Path, CaseBundle] = {}
    examples: list[LabeledExample] = []
    invalid: list[InvalidExample] = []
    seen: set[str] = set()
    for line_num, record in _jsonl_records(path):
        where = f"{path}:{line_num}"
        try:
            if isinstance(record, DatasetError):
                raise record
            example = _to_example(record, path.parent, cases, where)
            if example.example_id in seen:
                raise DatasetError(f"{where}: example_id {example.example_id!r} appears twice")
        except DatasetError as exc:
            if strict:
                raise
            invalid.append(_invalid(record, where, exc, seen))
            continue
        seen.add(example.example_id)
        examples.append(example)
    return examples, invalid


def _invalid(
    record: dict[str, Any] | DatasetError, where: str, exc: DatasetError, seen: set[str]
) -> InvalidExample:
    """What can be said about a bad line: its own id when usable, else its place."""
    fields = record if isinstance(record, dict) else {}
    example_id = fields.get("example_id")
    if not isinstance(example_id, str) or not example_id or example_id in seen:
        example_id = where
    status = fields.get("gold_status")
    return InvalidExample(
        example_id=example_id,
        error=str(exc),
        criterion_id=str(fields.get("criterion_id") or ""),
        gold_status=status if status in set(CriterionStatus) else None,
    )


def _jsonl_records(path: Path) -> Iterator[tuple[int, dict[str, Any] | DatasetError]]:
    """Yield (1-based line number, object) for each non-blank line; a line that is not a JSON
    object yields the `DatasetError` that says so, for the caller to raise or record."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from exc
    for line_num, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            yield line_num, DatasetError(f"{path}:{line_num}: not valid JSON: {exc.msg}")
            continue
        if not isinstance(record, dict):
            yield line_num, DatasetError(f"{path}:{line_num}: expected a JSON object")
            continue
        yield line_num, record


def _to_example(
    record: dict[str, Any], folder: Path, cases: dict[Path, CaseBundle], where: str
) -> LabeledExample:
    case_ref = record.get("case")
    if isinstance(case_ref, str):
        case: Any = _load_case((folder / case_ref).resolve(), cases, where)
    elif isinstance(case_ref, dict):
        case = case_ref
    else:
        raise DatasetError(f"{where}: `case` must be a path relative to the file, or a case object")
    try:
        return LabeledExample.model_validate({**record, "case": case})
    except ValidationError as exc:
        raise DatasetError(f"{where}: invalid example: {_brief(exc)}") from exc


def _load_case(path: Path, cases: dict[Path, CaseBundle], where: str) -> CaseBundle:
    """Load a case bundle once, however many examples point at it."""
    if path not in cases:
        try:
            cases[path] = CaseBundle.model_validate_json(path.read_bytes())
        except OSError as exc:
            raise DatasetError(f"{where}: cannot read case {path}: {exc.strerror}") from exc
        except ValidationError as exc:
            raise DatasetError(f"{where}: invalid case {path}: {_brief(exc)}") from exc
    return cases[path]


def _brief(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
    )


# --- TrialGPT -----------------------------------------------------------------------------------


def load_trialgpt(path: Path | str) -> tuple[list[LabeledExample], dict[str, PolicySource]]:
    """Map TrialGPT criterion annotations to labeled examples and one-criterion policies.

    Each annotation becomes the policy `trialgpt/<trial_id>/<annotation_id>` (a `# <trial title>`
    heading and an `## Inclusion criterion` or `## Exclusion criterion` section holding the
    criterion text verbatim, so a policy quote can be verified) with one criterion `<policy>/C1`;
    the note becomes a one-page document `note` (kept as-is, sentences numbered "0. …"). The gold
    case quotes are the expert sentences' text, without their number. Annotations without
    criterion text are skipped with a warning.

    Raises:
        DatasetError: the file is not a JSON list, or a record has an unknown label or a bad
            `expert_sentences` value.
    """
    path = Path(path)
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read TrialGPT annotations: {exc}") from exc
    if not isinstance(records, list):
        raise DatasetError(f"{path}: expected a JSON list of annotations")
    examples: list[LabeledExample] = []
    policies: dict[str, PolicySource] = {}
    for index, record in enumerate(records):
        where = f"{path}[{index}]"
        if not isinstance(record, dict):
            raise DatasetError(f"{where}: expected an object")
        if not (record.get("criterion_text") or "").strip():
            _log.warning("%s: annotation without criterion text skipped", where)
            continue
        source, example = _from_trialgpt(record, where)
        policies[source.entry.policy_id] = source
        examples.append(example)
    return examples, policies


def _from_trialgpt(record: dict[str, Any], where: str) -> tuple[PolicySource, LabeledExample]:
    try:
        annotation_id = record["annotation_id"]
        kind = str(record["criterion_type"]).strip().lower()
        label = str(record["expert_eligibility"]).strip().lower()
        note = str(record["note"])
        criterion_text = str(record["criterion_text"]).strip()
        title = str(record.get("trial_title") or record["trial_id"]).strip()
        trial_id = str(record["trial_id"])
        patient_id = str(record["patient_id"])
    except KeyError as exc:
        raise DatasetError(f"{where}: missing field {exc}") from exc
    status = TRIALGPT_STATUS.get((kind, label))
    if status is None:
        raise DatasetError(f"{where}: unknown label ({kind!r}, {label!r})")
    sentence_ids = _sentence_ids(record.get("expert_sentences"), where)
    sentences = note_sentences(note)
    unknown = [i for i in sentence_ids if i not in sentences]
    if unknown:
        raise DatasetError(f"{where}: expert_sentences {unknown} are not sentences of the note")
    source = _trial_policy(f"trialgpt/{trial_id}/{annotation_id}", title, kind, criterion_text)
    case = CaseBundle(
        case_id=f"trialgpt-{patient_id}",
        request=ServiceRequest(service=f"Enrollment in clinical trial {trial_id}"),
        documents=[Document(doc_id=TRIALGPT_DOC_ID, title="Patient note", pages=[note])],
    )
    example = LabeledExample(
        example_id=f"trialgpt/{annotation_id}",
        case=case,
        policy_id=source.entry.policy_id,
        criterion_id=source.criteria.criteria[0].criterion_id,
        gold_status=status,
        gold_policy_quote=criterion_text,
        gold_case_quotes=[sentences[i] for i in sentence_ids],
        gold_sentence_ids=sentence_ids,
        note=f"{kind} criterion: {label}",
    )
    return source, example


def _trial_policy(policy_id: str, title: str, kind: str, criterion_text: str) -> PolicySource:
    """A one-criterion policy; an exclusion is negated in the logic, as the dev set's are."""
    section = f"{kind.capitalize()} criterion"
    markdown = f"# {title}\n\n## {section}\n\n{criterion_text}\n"
    criterion_id = f"{policy_id}/C1"
    criteria = CriteriaSet(
        policy_id=policy_id,
        version="1",
        criteria=[
            Criterion(
                criterion_id=criterion_id,
                text=criterion_text,
                section=section,
                quote=criterion_text,
            )
        ],
        logic=Not(not_=criterion_id) if kind == "exclusion" else criterion_id,
    )
    entry = ManifestEntry(
        policy_id=policy_id,
        version="1",
        title=title,
        sha256=hashlib.sha256(markdown.encode()).hexdigest(),
        license="public domain (NCBI TrialGPT annotations)",
    )
    return PolicySource(entry, markdown, criteria)


def _sentence_ids(raw: Any, where: str) -> list[int]:
    """`expert_sentences` is a string like "[0, 1, 2]" (or already a list)."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: expert_sentences is not a JSON list: {raw!r}") from exc
    if value is None:
        return []
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        raise DatasetError(f"{where}: expert_sentences must be a list of integers: {raw!r}")
    return list(value)


def note_sentences(note: str) -> dict[int, str]:
    """The numbered sentences of a TrialGPT note ("0. text" per line): id -> text without number."""
    sentences: dict[int, str] = {}
    for line in note.splitlines():
        match = _SENTENCE.match(line.strip())
        if match:
            sentences[int(match.group(1))] = match.group(2).strip()
    return sentences


# --- policies ---------------------------------------------------------------------------------


def load_data_dir(path: Path | str) -> list[PolicySource]:
    """Read `policies/manifest.json`, each policy's Markdown and `criteria/<policy_id>.json`.

    Raises:
        DatasetError: a missing file, a sha256 that does not match the Markdown, or criteria
            that do not belong to the policy.
    """
    root = Path(path)
    manifest = root / "policies" / "manifest.json"
    try:
        raw = json.loads(manifest.read_text(encoding="utf-8"))
        entries = [ManifestEntry.model_validate(item) for item in raw["policies"]]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise DatasetError(f"{manifest}: cannot read the policy manifest: {exc}") from exc
    except ValidationError as exc:
        raise DatasetError(f"{manifest}: invalid entry: {_brief(exc)}") from exc
    return [_load_policy_source(root, entry) for entry in entries]


def _load_policy_source(root: Path, entry: ManifestEntry) -> PolicySource:
    md_path = root / "policies" / (entry.file or f"{entry.policy_id}.md")
    criteria_path = root / "criteria" / f"{entry.policy_id}.json"
    try:
        md_bytes = md_path.read_bytes()
        criteria = CriteriaSet.model_validate_json(criteria_path.read_bytes())
    except OSError as exc:
        raise DatasetError(
            f"{entry.policy_id}: cannot read {exc.filename}: {exc.strerror}"
        ) from exc
    except ValidationError as exc:
        raise DatasetError(f"{criteria_path}: invalid criteria: {_brief(exc)}") from exc
    digest = hashlib.sha256(md_bytes).hexdigest()
    if entry.sha256 and entry.sha256 != digest:
        raise DatasetError(
            f"{md_path}: sha256 {digest} does not match the manifest's {entry.sha256}"
        )
    if criteria.policy_id != entry.policy_id:
        raise DatasetError(
            f"{criteria_path}: policy_id {criteria.policy_id!r} != {entry.policy_id!r}"
        )
    entry = entry.model_copy(update={"sha256": digest})
    return PolicySource(entry, md_bytes.decode("utf-8"), criteria)


def to_policy(source: PolicySource, *, created_at: dt.datetime | None = None) -> Policy:
    """Index a loaded policy as the `Policy` the controllers take (Markdown heading tree)."""
    entry = source.entry
    return Policy(
        policy_id=entry.policy_id,
        version=entry.version,
        sha256=entry.sha256 or hashlib.sha256(source.markdown.encode()).hexdigest(),
        title=entry.title,
        source_format=SourceFormat.MARKDOWN,
        source_url=entry.source_url,
        license=entry.license,
        created_at=created_at or dt.datetime.now(dt.UTC),
        criteria_count=len(source.criteria.criteria),
        tree=build_tree_from_markdown(source.markdown),
        criteria=source.criteria,
    )
