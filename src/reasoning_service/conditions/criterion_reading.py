"""Reading a criterion's text into parts a deterministic controller can check.

A criterion sentence is read into: the situation it is restricted to ("For continued
coverage…", "If … less than 2 hours of sleep…"), numeric constraints (thresholds, ranges,
durations), the qualitative concepts left over (one concept, or a list of alternatives), and
flags: does it speak of an absence ("does not have…"), of the requested procedure, or of a count
the heuristic cannot compute. Only wording patterns are used, never policy or case ids.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum

from reasoning_service.conditions.clinical_text import canonical, concept_tokens, to_base_unit

__all__ = [
    "Constraint",
    "CriterionReading",
    "Situation",
    "read_criterion",
]


def _concept_set(words: str) -> frozenset[str]:
    """Concept keys of whitespace-separated words, so lists stay readable."""
    return frozenset(canonical(word) for word in words.split())


_STOP = _concept_set(
    """
    a an the of and or to in on for with by from at as is are was were be been being that
    this these those it its which who whom whose there their his her he she they any all
    each has have had must should may can will would than then other such also per only when
    if either beneficiary patient patients member individual record documented documentation
    document evidence show shows showing case request requested criterion criteria met one
    least more less equal greater following listed list e g i applicable not no does did has
    type inclusive within last into under over after during while including include includes
    use done period related
    """
)
_LOW_WEIGHT = _concept_set(
    """
    clinical appropriate proper adequate significant current currently diagnosis diagnosed
    confirmed severe qualifying reported measured different course treat furnish device
    history
    """
)

_QUANTITIES = ("ahi", "bmi", "age", "sleep_time", "lvef")
_ADULT_AGE = 18.0


class Situation(StrEnum):
    """Request situations a criterion may restrict itself to."""

    RENEWAL = "renewal"
    """Continued coverage, retreatment, additional sessions."""
    INITIAL = "initial"


@dataclass(frozen=True, slots=True)
class Constraint:
    """`quantity` must satisfy `low <= value <= high` (bounds may be open or absent)."""

    quantity: str
    low: float | None = None
    high: float | None = None
    low_strict: bool = False
    high_strict: bool = False
    unit: str | None = None
    phrase: str = ""
    """The criterion words that state it, for the rationale."""
    subject: tuple[str, ...] = ()
    """Durations and time windows: concept keys of what lasts or happened ("back_pain")."""

    def holds(self, value: float) -> bool:
        """Exact comparison: BMI 34.86 is below 35; 15.0 meets ≥ 15."""
        if self.low is not None and (value <= self.low if self.low_strict else value < self.low):
            return False
        return not (
            self.high is not None
            and (value >= self.high if self.high_strict else value > self.high)
        )


@dataclass(frozen=True, slots=True)
class CriterionReading:
    """What a criterion asks, in checkable parts."""

    terms: list[str]
    """Search terms: content words, numbers and concept keys."""
    concepts: dict[str, float]
    """Concept key -> weight, for the qualitative part."""
    alternatives: list[list[str]]
    """Any-of alternatives of the qualitative part (each a list of keys); empty when single."""
    constraints: list[Constraint]
    situation: Situation | None = None
    condition: CriterionReading | None = None
    """An "If …" precondition: when it does not hold, the criterion is not applicable."""
    condition_is_optional_mention: bool = False
    """True when the precondition is a mention ("if X is requested"), so silence means N/A."""
    absence: bool = False
    """The criterion is met when something is absent ("does not have", "not associated with")."""
    about_request: bool = False
    """The criterion names the requested procedure or service."""
    uncountable: bool = False
    """It needs a count or computation the heuristic cannot do ("at least the number …")."""
    extra_phrases: dict[str, str] = field(default_factory=dict)


_NOT_APPLICABLE_NOTE = re.compile(r"\(\s*not applicable[^)]*\)", re.IGNORECASE)
_PARENTHETICAL = re.compile(r"\([^()]*\)")
_RENEWAL = re.compile(
    r"\b(?:continued coverage|retreatment|re-treatment|additional (?:\(up to \d+\) )?sessions|"
    r"renewal|subsequent coverage)\b",
    re.IGNORECASE,
)
_INITIAL = re.compile(r"^\s*for (?:an? )?initial\b", re.IGNORECASE)
_LEADING_CONDITION = re.compile(r"^\s*(if|for|in)\b([^:]*?)(?::|,\s(?=the\b|a\b|an\b))", re.I)
_ABSENCE = re.compile(
    r"\b(?:does not have|do not have|has not had|have not had|is not associated with|not "
    r"associated with|is not due to|has no|no personal history of|not in)\b",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"\b(?:requested (?:procedure|service|device|treatment)|(?:procedure|service|device) "
    r"(?:being )?requested)\b",
    re.IGNORECASE,
)
_UNCOUNTABLE = re.compile(
    r"\b(?:number of|at least the number|at a minimum the number|required in a)\b", re.I
)

_NUM = r"(\d+(?:\.\d+)?)"
_UNIT = r"\s*(%|events?(?: per hour)?|kg/m²|kg/m2|hours?|minutes?|days?|weeks?|months?|years?)?"
_LOWER_WORDS = (
    r"greater than or equal to|more than or equal to|at least|no less than|≥|>=|"
    r"greater than|more than|over|above|>"
)
_UPPER_WORDS = r"less than or equal to|no more than|at most|≤|<=|less than|fewer than|under|below|<"
_STRICT = {
    "greater than",
    "more than",
    "over",
    "above",
    ">",
    "less than",
    "fewer than",
    "under",
    "below",
    "<",
}
_RANGE = re.compile(
    rf"between\s+{_NUM}\s*(?:and|-|to)\s+{_NUM}{_UNIT}(?:\s+\w+){{0,2}}?\s*(inclusive)?|"
    rf"(?:{_LOWER_WORDS})\s+{_NUM}(?:\s+\w+)?\s+and\s+(?:{_UPPER_WORDS})\s+{_NUM}{_UNIT}",
    re.IGNORECASE,
)
_WITHIN = re.compile(
    rf"\bwithin\s+(?:the\s+)?(?:(?:past|last|prior|previous|preceding)\s+)?{_NUM}\s*"
    r"(days?|weeks?|months?|years?)\b",
    re.IGNORECASE,
)
DURATION = "duration"
"""How long something has lasted, in days ("lasting 12 weeks or longer")."""
RECENCY = "recency"
"""How long ago something happened, in days, counted back from the case's as-of date."""
_COMPARE_BEFORE = re.compile(rf"({_LOWER_WORDS}|{_UPPER_WORDS})\s+{_NUM}{_UNIT}", re.IGNORECASE)
_COMPARE_AFTER = re.compile(
    rf"{_NUM}{_UNIT}\s+(?:or|and)\s+(more|older|greater|longer|higher|above|less|fewer|younger|"
    r"lower|below|shorter)\b",
    re.IGNORECASE,
)


def read_criterion(text: str, *, policy_text: str = "") -> CriterionReading:
    """Read a criterion's text; `policy_text` lends the policy's own abbreviations."""
    from reasoning_service.conditions.clinical_text import abbreviations

    phrases = abbreviations(policy_text + "\n" + text)
    body = re.sub(r"^\s*EXCLUSION:\s*", "", text)
    body = re.sub(r"'met' means[^.]*\.?", "", body)
    situation = _situation(body)
    condition, mention_only = None, False
    leading = _LEADING_CONDITION.match(_NOT_APPLICABLE_NOTE.sub("", body))
    if leading and leading.group(1).lower() == "if":
        condition_text = leading.group(2)
        condition = _read_part(condition_text, phrases, None)
        mention_only = not condition.constraints
        body = body[leading.end() :]
    elif (leading and situation is not None) or (
        leading and re.search(r"considered under", leading.group(2), re.IGNORECASE)
    ):
        body = body[leading.end() :]
    body = _NOT_APPLICABLE_NOTE.sub("", body)
    reading = _read_part(body, phrases, situation)
    about_request = bool(_REQUEST.search(body))
    alternatives = reading.alternatives
    if about_request and not alternatives:
        listed = [g for g in re.findall(r"\(([^()]*,[^()]*)\)", body)]
        alternatives = _alternatives(" or ".join(listed), phrases) if listed else []
    return CriterionReading(
        terms=reading.terms,
        concepts=reading.concepts,
        alternatives=alternatives,
        constraints=reading.constraints,
        situation=situation,
        condition=condition,
        condition_is_optional_mention=mention_only,
        absence=_is_absence(body),
        about_request=about_request,
        uncountable=bool(_UNCOUNTABLE.search(body)) and not reading.constraints,
        extra_phrases=phrases,
    )


def _is_absence(body: str) -> bool:
    """Is the main predicate negated ("The patient does not have …")? Only the first words count,
    so a negation inside a qualifier ("VT not associated with an acute MI") does not."""
    main = re.split(r"[,:;]", _PARENTHETICAL.sub(" ", body), maxsplit=1)[0]
    match = _ABSENCE.search(main)
    return match is not None and len(main[: match.start()].split()) <= 6


def _situation(text: str) -> Situation | None:
    """The request situation the criterion is restricted to, from its lead or its N/A note."""
    note = _NOT_APPLICABLE_NOTE.search(text)
    plain = _PARENTHETICAL.sub(" ", text)
    lead = plain.split(":", 1)[0] if ":" in plain[:120] else plain[:80]
    if _INITIAL.search(lead):
        return Situation.INITIAL
    if _RENEWAL.search(lead):
        return Situation.RENEWAL
    if note and re.search(r"initial", note.group(), re.IGNORECASE):
        return Situation.RENEWAL
    if note and _RENEWAL.search(note.group()):
        return Situation.INITIAL
    return None


def _read_part(text: str, phrases: dict[str, str], situation: Situation | None) -> CriterionReading:
    constraints = _constraints(text)
    core = _PARENTHETICAL.sub(" ", text)
    if constraints:
        core = " ".join(p for p in re.split(r"\bAND\b|;", core) if not _constraints(p))
    if situation is not None:
        core = _RENEWAL.sub(" ", core)
    keys = [t.key for t in concept_tokens(core, phrases)]
    concepts = _weights(keys)
    alternatives = _alternatives(core, phrases)
    numbers = re.findall(r"\d+(?:\.\d+)?", text)
    terms = list(dict.fromkeys([*concepts, *numbers]))
    return CriterionReading(
        terms=terms,
        concepts=concepts,
        alternatives=alternatives,
        constraints=constraints,
        extra_phrases=phrases,
    )


def _weights(keys: list[str]) -> dict[str, float]:
    concepts: dict[str, float] = {}
    for key in keys:
        if key in _STOP or key.isdigit() or len(key) < 2 or key in _QUANTITIES:
            continue
        concepts[key] = 0.4 if key in _LOW_WEIGHT else 1.0
    return concepts


def _alternatives(core: str, phrases: dict[str, str]) -> list[list[str]]:
    """Split a list ("X, Y or Z") into alternatives; a single concept gives no alternatives."""
    tail = core.split(":", 1)[1] if ":" in core else core
    tail = re.split(r"\b(?:AND|and there (?:is|are))\b", tail)[-1]
    if not re.search(r"\bor\b", tail):
        return []
    tail = re.sub(r"\b(open|laparoscopic) or (open|laparoscopic) ([^,;]+)", r"\1 \3, \2 \3", tail)
    items = re.split(r",\s*(?:or\s+)?|\s+or\s+|;\s*", tail)
    alternatives: list[list[str]] = []
    for item in items:
        keys = [k for k in _weights([t.key for t in concept_tokens(item, phrases)])]
        keys = [k for k in keys if k not in _GENERIC_ALTERNATIVE]
        if keys:
            alternatives.append(keys)
    return alternatives if len(alternatives) > 1 else []


_GENERIC_ALTERNATIVE = frozenset(
    canonical(w)
    for w in ["symptom", "history", "procedure", "disease", "condition", "device", "documented"]
)


def _constraints(text: str) -> list[Constraint]:
    found: list[Constraint] = []
    consumed: list[tuple[int, int]] = []
    for match in _RANGE.finditer(text):
        numbers = [g for g in match.groups()[:2] if g] or [g for g in match.groups()[4:6] if g]
        unit = match.group(3) or match.group(7)
        quantity = _quantity_near(text, match.start(), match.end(), unit)
        if quantity and len(numbers) == 2:
            low, high = (_in_base(float(n), unit, quantity) for n in numbers)
            found.append(Constraint(quantity, low, high, unit=_unit(unit), phrase=match.group()))
            consumed.append(match.span())
    for match in _COMPARE_BEFORE.finditer(text):
        if any(s <= match.start() < e for s, e in consumed):
            continue
        word, unit = match.group(1).lower(), match.group(3)
        quantity = _quantity_near(text, match.start(), match.end(), unit)
        if quantity is None:
            continue
        number = _in_base(float(match.group(2)), unit, quantity)
        strict = word in _STRICT
        if re.match(_LOWER_WORDS, word, re.IGNORECASE) and not word.startswith(("less", "no more")):
            constraint = Constraint(quantity, low=number, low_strict=strict, unit=_unit(unit))
        else:
            constraint = Constraint(quantity, high=number, high_strict=strict, unit=_unit(unit))
        found.append(_with_phrase(constraint, match.group()))
    for match in _COMPARE_AFTER.finditer(text):
        unit, word = match.group(2), match.group(3).lower()
        quantity = _quantity_near(text, match.start(), match.end(), unit)
        if quantity is None:
            continue
        number = _in_base(float(match.group(1)), unit, quantity)
        upward = word in {"more", "older", "greater", "longer", "higher", "above"}
        constraint = (
            Constraint(quantity, low=number, unit=_unit(unit))
            if upward
            else Constraint(quantity, high=number, unit=_unit(unit))
        )
        found.append(_with_phrase(constraint, match.group()))
    for match in _WITHIN.finditer(text):
        days = to_base_unit(float(match.group(1)), match.group(2))[0]
        found = [c for c in found if not (c.quantity == DURATION and c.phrase in match.group())]
        found.append(Constraint(RECENCY, high=days, unit="days", phrase=match.group()))
    if not found and re.search(r"\badult\b", text, re.IGNORECASE):
        found.append(Constraint("age", low=_ADULT_AGE, unit="years", phrase="adult (18 or older)"))
    return [_with_subject(c, text) if c.quantity in {DURATION, RECENCY} else c for c in found]


def _with_subject(constraint: Constraint, text: str) -> Constraint:
    """What the duration or window is about: the criterion's concepts outside the phrase."""
    rest = text.replace(constraint.phrase, " ")
    keys = tuple(dict.fromkeys(t.key for t in concept_tokens(rest) if t.key not in _STOP))
    return replace(constraint, subject=keys)


def _in_base(value: float, unit: str | None, quantity: str) -> float:
    """Durations in days and sleep times in hours, so "12 weeks" compares with "3 months"."""
    scaled = quantity in {DURATION, "sleep_time"} and unit is not None
    return to_base_unit(value, unit)[0] if scaled else value


def _with_phrase(constraint: Constraint, phrase: str) -> Constraint:
    unit = "years" if constraint.quantity == "age" else constraint.unit
    return Constraint(
        constraint.quantity,
        constraint.low,
        constraint.high,
        constraint.low_strict,
        constraint.high_strict,
        unit,
        phrase,
    )


def _unit(raw: str | None) -> str | None:
    if raw is None:
        return None
    raw = raw.lower()
    if raw.startswith("event"):
        return "events/hour"
    if raw.startswith("kg/m"):
        return "kg/m2"
    return to_base_unit(1.0, raw)[1]


def _quantity_near(text: str, start: int, end: int, unit: str | None) -> str | None:
    """Which measured quantity a number belongs to: its unit first, then the nearest name."""
    unit_key = _unit(unit)
    window = text[max(0, start - 40) : end + 15]
    if (unit or "").lower().startswith("year") and re.search(r"old|adult|\bage", window, re.I):
        return "age"
    if unit_key == "hours":
        return "sleep_time"
    if unit_key == "days":
        return DURATION
    if unit_key == "kg/m2":
        return "bmi"
    if unit_key == "events/hour":
        return "ahi"
    before = concept_tokens(text[max(0, start - 80) : start])
    after = concept_tokens(text[end : end + 30])
    if unit_key == "years" or any(t.key in {"adult", "age", "old"} for t in after[:2]):
        return "age"
    for token in reversed(before):
        if token.key in _QUANTITIES:
            return token.key
    return None
