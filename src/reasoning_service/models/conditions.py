"""Criteria as checkable conditions: a tree of typed atoms authored once per criterion.

A criterion's `conditions` say what the criterion's prose means in terms that code can check
against a case (docs/conditions.md has the full reference and examples):

    {"applies_if": <node>,            optional: when it fails, the criterion is not_applicable
     "require": <node>}               what must hold for `met`

A node is `{"all_of": [node, ...]}`, `{"any_of": [node, ...]}`, `{"not": node}` or an atom:

| kind          | holds when                                                                 |
| ------------- | -------------------------------------------------------------------------- |
| `quantity`    | a measured (or derived) value compares to a threshold, in compatible units |
| `finding`     | the concept is documented as present (`expect: present`) or as absent      |
| `time_window` | the time since an event (or a stated duration) is within / at least N units |
| `category`    | the concept's value is one of the `allowed` values (at least `min_count`)   |

Every atom names its `concept` and the `aliases` that find it in fact field names, fact values
and document text; all vocabulary lives here, in data, never in code.
"""

from __future__ import annotations

import ast
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from reasoning_service.models.case import code_system_name

__all__ = [
    "AllOfConditions",
    "AnyOfConditions",
    "Atom",
    "AtomCode",
    "CategoryAtom",
    "Concept",
    "ConditionNode",
    "Conditions",
    "Derivation",
    "FindingAtom",
    "NotCondition",
    "QuantityAtom",
    "QuantityInput",
    "TimeWindowAtom",
    "atoms_of",
]

_ATOM_ID = r"^[a-z][a-z0-9_]{0,63}$"
_FORMULA_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.Pow,
    ast.USub,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class AtomCode(_Strict):
    """A standard code for an atom's concept: a fact coded with it binds by code."""

    system: str = Field(min_length=1, max_length=200)
    """`LOINC`, `SNOMED CT`, `ICD-10-CM`, `HCPCS`, `CPT` (or the FHIR system URI)."""
    code: str = Field(min_length=1, max_length=64)

    def key(self) -> tuple[str, str]:
        """The system's short name and the code, case-insensitively (as `Code.key`)."""
        return code_system_name(self.system).lower(), self.code.strip().lower()


class _Concept(_Strict):
    concept: str = Field(min_length=1, max_length=200)
    """Canonical name of what is looked for, e.g. "left ventricular ejection fraction"."""
    aliases: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=100
    )
    """Other names for it in field names and text ("HbA1c", "A1c", "glycated hemoglobin")."""
    codes: list[AtomCode] = Field(default_factory=list, max_length=50)
    """Standard codes of the concept (LOINC, SNOMED CT, ICD-10-CM, HCPCS/CPT): a fact coded
    with one binds by code; a fact coded in the same system with none of them is another
    concept and does not bind by name either."""

    @property
    def names(self) -> list[str]:
        """The concept and its aliases, concept first, without duplicates."""
        return list(dict.fromkeys([self.concept, *self.aliases]))


Concept = _Concept
"""A concept with its names and codes: what atoms, derive inputs and time references share."""


class _AtomBase(_Concept):
    id: str = Field(pattern=_ATOM_ID)
    """Short id, unique within the criterion (`hba1c`, `stage`)."""
    label: str = Field(min_length=1, max_length=300)
    """The atom as one short checkable statement, shown to reviewers ("HbA1c ≥ 6.5%")."""
    outside: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=50
    )
    """Words that put what a sentence says outside what the criterion asks about (`prior
    episode` for trials "in the current episode"): a sentence that names one, or stands under
    a heading that does ("Past trials (prior episode):"), and a fact whose name or quote names
    one, are not read for this atom."""
    question: str | None = Field(default=None, max_length=500)
    """A narrow yes/no question for the LLM; defaults to one built from `label`."""


class _Plausible(_Strict):
    plausible: tuple[float, float] | None = None
    """Range, in `unit`, a real value falls in. A value written without a unit is read in
    `unit` or else in the first of `accepted_units` that lands it in this range ("height 165"
    is cm, not m); one that fits none is not read."""
    accepted_units: list[str] = Field(default_factory=list)
    unit_required: bool = False
    """Read only values written with a unit: next to a drug's name a bare number is its dose,
    never a duration."""
    read_in: Literal["next_to_name", "sentence"] = "next_to_name"
    """Where a value in text belongs to a name: right next to it, or anywhere in the name's
    sentence, for values a record writes one per line (a medication list's durations:
    "escitalopram 10->20 mg 10/2025-1/2026 (~12 wk)", a table row)."""


class QuantityInput(_Concept, _Plausible):
    """A measured value a derived quantity is computed from (weight and height for BMI)."""

    unit: str = Field(min_length=1)
    """Unit the formula expects this input in (`kg`, `m`)."""


class Derivation(_Strict):
    """How to compute the quantity from other measured values when it is not stated."""

    formula: str = Field(min_length=1, max_length=200)
    """Arithmetic over the input names: + - * / ** and numbers only (`weight / height ** 2`)."""
    inputs: dict[str, QuantityInput] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_formula(self) -> Derivation:
        try:
            tree = ast.parse(self.formula, mode="eval")
        except SyntaxError as exc:
            raise ValueError(f"formula {self.formula!r} is not arithmetic: {exc.msg}") from exc
        for node in ast.walk(tree):
            if not isinstance(node, _FORMULA_NODES):
                raise ValueError(f"formula {self.formula!r}: {type(node).__name__} not allowed")
            if isinstance(node, ast.Name) and node.id not in self.inputs:
                raise ValueError(f"formula {self.formula!r} names {node.id!r}, not an input")
        return self


class _OtherNamed(_Strict):
    not_when: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=100
    )
    """Words that mark another thing or person of the same name when they stand right before
    the name in a sentence or in a fact's name: `residual` AHI on treatment, a `goal` weight,
    a `supervising` practitioner, an `APRN` license. Such mentions and facts are ignored (for
    a quantity, also every value of a document whose title names one: a `download` report)."""


class QuantityAtom(_AtomBase, _Plausible, _OtherNamed):
    """A measured value compared to a threshold (`AHI ≥ 15 events/hour`, `BMI ≥ 35 kg/m2`)."""

    kind: Literal["quantity"]
    comparator: Literal[">=", ">", "<=", "<", "=="]
    value: float
    unit: str = Field(min_length=1)
    """Unit of `value`; a stated value in another compatible unit is converted (pint)."""
    derive: Derivation | None = None
    """Compute the value from other measurements when the case does not state it."""
    select: Literal["all", "latest"] = "all"
    """`all`: every value found must agree; `latest`: the value of the latest dated source."""
    prefer: Literal["all", "facts"] = "all"
    """`facts`: when a trusted fact (or the demographics) gives the value, text values are not
    read (an age is the patient's; "appendectomy age 15" in a history is another age)."""
    measure: Literal["value", "relative_change"] = "value"
    """`relative_change`: what is compared is a change the record reports next to a name,
    as percent of its first value ("score 21 -> 20" is -4.8; "from 40 to 18" is -55), and
    `unit` must be `percent`: "without significant improvement" on a scale where lower is
    better is `> -25`."""
    kinds: dict[
        Annotated[str, Field(pattern=_ATOM_ID)],
        list[Annotated[str, Field(min_length=1, max_length=200)]],
    ] = Field(default_factory=dict, max_length=50)
    """Kinds of the thing measured, each with the names that find it (`{"ssri": ["sertraline",
    "fluoxetine"], "snri": [...]}`): values are then not one measurement that must agree but
    one per kind, and the atom holds when `min_kinds` kinds meet the threshold ("trials of 2
    agents from different classes, each at least 6 weeks"). It fails only when the kinds the
    record names could not make up `min_kinds` however the unmeasured ones turned out."""
    min_kinds: int = Field(default=1, ge=1, le=20)

    @model_validator(mode="after")
    def _check_kinds(self) -> QuantityAtom:
        if self.measure == "relative_change" and (self.unit != "percent" or self.derive):
            raise ValueError("a relative_change is in unit 'percent' and is never derived")
        if self.min_kinds > max(1, len(self.kinds)):
            raise ValueError(f"min_kinds {self.min_kinds} exceeds the {len(self.kinds)} kinds")
        if self.kinds and self.derive is not None:
            raise ValueError("kinds and derive do not combine: a derived value has no kind")
        return self


class FindingAtom(_AtomBase, _OtherNamed):
    """A clinical finding documented as present, or documented as absent."""

    kind: Literal["finding"]
    expect: Literal["present", "absent"] = "present"
    """`absent` needs evidence of absence: a false fact or an explicitly negated mention."""
    when_silent: Literal["no_evidence", "absent"] = "no_evidence"
    """What a case that never mentions the concept shows. `absent` is a reviewed choice for
    things a record would always state when present (a restricted license, a suspension)."""
    denied_by: list[str] = Field(default_factory=list, max_length=50)
    """Broader names whose denial covers this finding ("no surgical history", "no
    obesity-related comorbidities"): a negated mention or a false fact counts as absence. Their
    affirmation says nothing: a surgical history is not a spine surgery."""
    listed_in: list[str] = Field(default_factory=list, max_length=50)
    """Headings of a list a record gives whole ("PSH:", "Past surgical history:"): a list
    under one that names other things and not this finding shows it absent ("PSH:
    tonsillectomy as a child" has no spine surgery). For findings a clinician always lists."""
    excepts: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=50
    )
    """Kinds the finding leaves out, by name (`febrile seizure` of "seizures other than isolated
    febrile seizures", `single concussion` of "repetitive or severe head trauma"): a fact whose
    value or quote names one of them and no alias besides is about that kind, not the finding."""
    topic: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=200
    )
    """Names of what the finding is about, one of which must stand in the same sentence (or
    fact) for a mention to count: a bare "response" speaks of a medication trial only where a
    drug is named, not in "ECT was switched for slow response". Empty: every mention counts."""


class TimeWindowAtom(_AtomBase):
    """Time elapsed since an event (to `as_of`, or to a `reference` event), or a duration.

    Evidence is an event date (fact value, dated mention, "69 days ago") or a stated duration
    ("pain for 14 weeks", "since March 2026"). `concept`/`aliases` name the event.
    """

    kind: Literal["time_window"]
    relation: Literal["within", "at_least", "between"]
    """`within`: elapsed ≤ amount; `at_least`: elapsed ≥ amount; `between`: amount..amount_max."""
    amount: float = Field(ge=0)
    amount_max: float | None = Field(default=None, ge=0)
    unit: Literal["days", "weeks", "months", "years"]
    reference: _Concept | None = None
    """Measure to this event's date instead of the case's `as_of`."""
    when_undated: Literal["no_evidence", "holds"] = "no_evidence"
    """What a case that never dates the event against the reference shows. `holds` is a
    reviewed choice for an order ("educated before first use") whose events other atoms
    already require: a record seldom dates both, and only dated evidence of the wrong order
    should fail it."""

    @model_validator(mode="after")
    def _check_between(self) -> TimeWindowAtom:
        if (self.relation == "between") != (self.amount_max is not None):
            raise ValueError("amount_max is required with relation 'between', and only then")
        if self.amount_max is not None and self.amount_max < self.amount:
            raise ValueError("amount_max is below amount")
        return self


class CategoryAtom(_AtomBase, _OtherNamed):
    """The concept's value is one of a set (a stage or class, initial vs renewal, device type)."""

    kind: Literal["category"]
    values: dict[str, list[Annotated[str, Field(min_length=1)]]] = Field(min_length=1)
    """Every value the concept can take, each with the words that name it in a case."""
    allowed: list[str] = Field(min_length=1)
    """The values for which the atom holds."""
    min_count: int = Field(default=1, ge=1)
    """Distinct allowed values that must be documented (2 for "two different classes")."""
    select: Literal["all", "latest", "request"] = "all"
    """`all`: every value found must agree; `latest`: the values of the latest dated source, for
    a state that changes (a class or severity now, not at the first visit); `request`: the
    values the request itself states (its service, codes), when it states one, for what is
    asked for: a plan in an older note does not change what is requested."""
    value_anywhere: bool = False
    """Also count a value's words anywhere in the case text, not only next to the concept
    (for values named by distinctive phrases, such as a drug or a device type)."""
    in_documents_naming: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    """Read values in the text only of documents that name one of these: a header such as
    "Physician: …" names the author of every note, and only the note that places the order
    speaks of the ordering physician. Facts are read wherever they come from."""
    author_of_documents_naming: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, max_length=50
    )
    """The concept is the author of a document that states one of these as done (the note that
    places the order, not one that leaves it "to be placed by PCP"): what its signature or
    header says from the author's credential on counts as a value ("Lena Marsh, MD,
    Psychiatry"; "Anjali Mehra, DO" above "Diplomate, … (Psychiatry)")."""

    @model_validator(mode="after")
    def _check_allowed(self) -> CategoryAtom:
        unknown = [value for value in self.allowed if value not in self.values]
        if unknown:
            raise ValueError(f"allowed names values not in `values`: {unknown}")
        if self.select == "latest" and self.min_count > 1:
            raise ValueError("select 'latest' reads one state: it needs min_count 1")
        return self


Atom = Annotated[
    Annotated[QuantityAtom, Tag("quantity")]
    | Annotated[FindingAtom, Tag("finding")]
    | Annotated[TimeWindowAtom, Tag("time_window")]
    | Annotated[CategoryAtom, Tag("category")],
    Discriminator("kind"),
]


def _node_tag(node: object) -> str | None:
    """Which kind of node a raw value is, so a bad tree reports one precise path."""
    if isinstance(node, AllOfConditions | AnyOfConditions):
        return "all_of" if isinstance(node, AllOfConditions) else "any_of"
    if isinstance(node, NotCondition):
        return "not"
    if isinstance(node, BaseModel):
        return "atom"
    if isinstance(node, dict):
        for key in ("all_of", "any_of", "not"):
            if key in node:
                return key
        return "atom"
    return None


class AllOfConditions(_Strict):
    all_of: list[ConditionNode] = Field(min_length=1)


class AnyOfConditions(_Strict):
    any_of: list[ConditionNode] = Field(min_length=1)
    silent_children: Literal["no_evidence", "fail"] = "no_evidence"
    """`fail`: once the case rules out one alternative on evidence, alternatives it never
    mentions count as failed too (a reviewed choice for lists such as "documented
    hypertension, heart disease or stroke", where a record that goes through the list and
    names none of them shows none)."""
    same_fact: bool = False
    """The children are ways a record documents one fact, not alternatives ("no significant
    improvement" stated, or a rating scale that barely moved): one that holds and one that
    fails (or is itself conflicting) contradict or doubt each other, so the node is
    conflicting rather than holding; one that fails while the others are silent fails it."""


class NotCondition(_Strict):
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True
    )

    not_: ConditionNode = Field(alias="not")


ConditionNode = Annotated[
    Annotated[AllOfConditions, Tag("all_of")]
    | Annotated[AnyOfConditions, Tag("any_of")]
    | Annotated[NotCondition, Tag("not")]
    | Annotated[Atom, Tag("atom")],
    Discriminator(_node_tag),
]
"""`all_of` / `any_of` / `not` over condition nodes, or one atom."""

AllOfConditions.model_rebuild()
AnyOfConditions.model_rebuild()
NotCondition.model_rebuild()


def atoms_of(node: ConditionNode) -> list[Atom]:
    """Every atom of a condition tree, depth first."""
    match node:
        case AllOfConditions(all_of=children) | AnyOfConditions(any_of=children):
            return [atom for child in children for atom in atoms_of(child)]
        case NotCondition(not_=child):
            return atoms_of(child)
    return [node]


def affirming_atoms_of(node: ConditionNode) -> list[Atom]:
    """The atoms whose holding speaks for the tree holding: every atom not under a `not`."""
    match node:
        case AllOfConditions(all_of=children) | AnyOfConditions(any_of=children):
            return [atom for child in children for atom in affirming_atoms_of(child)]
        case NotCondition():
            return []
    return [node]


class Conditions(_Strict):
    """What a criterion means, as checkable conditions."""

    applies_if: ConditionNode | None = None
    """The situation the criterion is restricted to; when it fails -> `not_applicable`."""
    when_applicability_unknown: Literal["evaluate", "not_applicable"] = "evaluate"
    """With no evidence either way about `applies_if`: judge `require` (the safe default) or
    treat the criterion as not applicable (for "If … less than 2 hours of sleep"-style
    criteria that only matter when the case says so)."""
    require: ConditionNode
    """What must hold for the criterion to be `met`."""

    @model_validator(mode="after")
    def _check_unique_ids(self) -> Conditions:
        ids = [atom.id for atom in self.atoms()]
        duplicates = sorted({atom_id for atom_id in ids if ids.count(atom_id) > 1})
        if duplicates:
            raise ValueError(f"atom ids must be unique within the criterion: {duplicates}")
        return self

    def atoms(self) -> list[Atom]:
        """Every atom, applicability first."""
        head = atoms_of(self.applies_if) if self.applies_if is not None else []
        return [*head, *atoms_of(self.require)]
