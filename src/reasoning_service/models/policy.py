"""Policies, their criteria and how the criteria combine (FORMATS.md, "Criteria set")."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from reasoning_service.models.conditions import Conditions
from retrieval.tree import TreeNode


class _Contract(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)


class Criterion(_Contract):
    """One checkable criterion of a policy."""

    criterion_id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    """The criterion restated as one checkable sentence."""
    section: str = ""
    """Title of the policy section it comes from."""
    quote: str = ""
    """Verbatim policy text the criterion comes from."""
    conditions: Conditions | None = None
    """The criterion as checkable conditions (docs/conditions.md); optional."""

    @field_validator("conditions", mode="wrap")
    @classmethod
    def _name_the_criterion(
        cls, value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Conditions | None:
        """A bad tree is reported with the criterion's id and the path inside the tree."""
        try:
            return handler(value)
        except ValidationError as exc:
            criterion_id = info.data.get("criterion_id", "?")
            problems = "; ".join(
                f"{_tree_path(error['loc'])}: {error['msg']}"
                for error in exc.errors(include_url=False)
            )
            raise ValueError(f"conditions of {criterion_id}: {problems}") from None


def _tree_path(loc: tuple[int | str, ...]) -> str:
    """`require.all_of.all_of.1.atom.finding.expect` -> `require.all_of.1.finding.expect`."""
    parts: list[str] = []
    for part in map(str, loc):
        if part != "atom" and (not parts or parts[-1] != part):
            parts.append(part)
    return ".".join(parts) or "(root)"


class AllOf(_Contract):
    all_of: list[LogicNode] = Field(min_length=1)


class AnyOf(_Contract):
    any_of: list[LogicNode] = Field(min_length=1)


class Not(_Contract):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    not_: LogicNode = Field(alias="not")


LogicNode = str | AllOf | AnyOf | Not
"""A criterion id, or `all_of` / `any_of` / `not` over logic nodes."""

AllOf.model_rebuild()
AnyOf.model_rebuild()
Not.model_rebuild()


def logic_ids(node: LogicNode) -> list[str]:
    """Every criterion id the logic tree names, in order."""
    match node:
        case str():
            return [node]
        case AllOf(all_of=children) | AnyOf(any_of=children):
            return [cid for child in children for cid in logic_ids(child)]
        case Not(not_=child):
            return logic_ids(child)
    raise TypeError(f"not a logic node: {node!r}")


class CriteriaSet(_Contract):
    """The checkable criteria of one policy version and the logic that combines them."""

    policy_id: str
    version: str
    criteria: list[Criterion] = Field(min_length=1)
    logic: LogicNode

    @model_validator(mode="after")
    def _check_references(self) -> CriteriaSet:
        ids = [c.criterion_id for c in self.criteria]
        duplicates = {cid for cid in ids if ids.count(cid) > 1}
        if duplicates:
            raise ValueError(f"criteria: duplicate criterion_id {sorted(duplicates)}")
        unknown = [cid for cid in logic_ids(self.logic) if cid not in ids]
        if unknown:
            raise ValueError(f"logic names criteria that are not defined: {unknown}")
        return self

    def criterion(self, criterion_id: str) -> Criterion | None:
        """Return the criterion with `criterion_id`, or None."""
        return next((c for c in self.criteria if c.criterion_id == criterion_id), None)


class SourceFormat(StrEnum):
    """How the policy document was supplied."""

    MARKDOWN = "markdown"
    PDF = "pdf"
    PAGEINDEX = "pageindex"


class PolicyRef(_Contract):
    """What identifies a policy text exactly; carried by every result."""

    policy_id: str
    version: str
    sha256: str
    """sha256 of the document bytes as ingested."""


class PolicySummary(PolicyRef):
    """A stored policy without its tree."""

    title: str
    source_format: SourceFormat
    source_url: str | None = None
    license: str | None = None
    created_at: dt.datetime
    criteria_count: int = 0


class Policy(PolicySummary):
    """A stored policy with its tree index and, when known, its criteria."""

    tree: list[TreeNode]
    criteria: CriteriaSet | None = None

    @property
    def ref(self) -> PolicyRef:
        return PolicyRef(policy_id=self.policy_id, version=self.version, sha256=self.sha256)

    def summary(self) -> PolicySummary:
        return PolicySummary.model_validate(self.model_dump(exclude={"tree", "criteria"}))


SAFE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
"""Policy ids and versions: one path segment of letters, digits, `.`, `-`, `_`; no `..`."""


class PolicyUpload(_Contract):
    """JSON body of `POST /v1/policies`."""

    policy_id: str = Field(pattern=SAFE_ID_PATTERN)
    """Letters, digits, `.`, `-`, `_` (up to 100, starting with a letter or digit, no `..`)."""
    version: str = Field(default="1", pattern=SAFE_ID_PATTERN)
    """The same rule as `policy_id`. A stored version never changes: upload a new one."""
    title: str | None = None
    """Defaults to the document's first heading."""
    source_format: SourceFormat
    content: str | dict[str, Any] | list[Any]
    """Markdown text, PDF bytes as base64, or PageIndex tree JSON."""
    source_url: str | None = None
    license: str | None = None
    criteria: CriteriaSet | None = None

    @field_validator("policy_id", "version")
    @classmethod
    def _no_parent_reference(cls, value: str) -> str:
        if ".." in value:
            raise ValueError("must not contain '..'")
        return value
