"""General clinical vocabulary, read from data (`vocabulary/clinical-synonyms.json`).

Nothing here names a policy or a condition: synonym groups widen an atom's aliases, unit
spellings map what notes write (`kg/m2`, `lbs`, `events/h`) to pint units, extra ConText cues
extend medspaCy's defaults, and fact words say which fact values mean absent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

__all__ = ["ContextCue", "Vocabulary", "load_vocabulary", "normalise_words"]

_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")
_NON_WORD = re.compile(r"[^0-9a-z]+")
_FIELD_GAP = re.compile(r"\t|\s{3,}|\s\|\s")
"""What parts the fields of a form's line ("Visit date: 04/27/2026     Provider: ...")."""


def normalise_words(text: str) -> tuple[str, ...]:
    """Words of a field name or alias: camelCase, dots, underscores, digits and case folded.

    `echoEF` -> (echo, ef); `lv_ejection_fraction` -> (lv, ejection, fraction); `GAD-7` and
    `gad7Total` -> (gad, 7) and (gad, 7, total).
    """
    return tuple(word for word in _NON_WORD.split(_CAMEL.sub(" ", text).lower()) if word)


class ContextCue(BaseModel):
    """One extra ConText rule: a cue phrase and what it does to the mentions around it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    literal: str = Field(min_length=1)
    category: Literal[
        "NEGATED_EXISTENCE", "HYPOTHETICAL", "PLANNED", "POSSIBLE_EXISTENCE", "FAMILY"
    ]
    """`PLANNED` is a hypothetical that also says the thing has not happened yet ("will
    schedule", "referred for"): evidence against a finding that must already have occurred."""
    direction: Literal["FORWARD", "BACKWARD", "BIDIRECTIONAL", "TERMINATE", "PSEUDO"]
    """`TERMINATE` ends the scope of earlier cues of the category (and, being longer, keeps a
    shorter cue inside it from firing: "not elsewhere classified" is not a negation).
    `PSEUDO` only keeps the shorter cues inside it from firing: "with pt and daughter" names
    a companion, not whose history it is."""
    max_scope: int | None = Field(default=None, ge=1, le=50)
    """Tokens the cue reaches; the whole sentence when unset."""
    pattern: list[dict[str, Any]] | None = Field(default=None, max_length=12)
    """A spaCy token pattern that finds the cue instead of `literal` (which then names it):
    one rule for "with pt and daughter", "with the patient and her husband", …"""


class FactWords(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    absent: list[str] = Field(default_factory=list)
    """Words that, as a fact's whole value or its opening words, say the thing is absent
    ("none known", "self-referred (employer program)"); any other value says present."""
    expiry: list[str] = Field(default_factory=list)
    """Words that, ending a fact's name (`license.expires`, `lic_exp`), make its date the end
    of the thing's validity: present until that date, absent after it."""
    refusal: list[str] = Field(default_factory=list)
    """Words that, ending a fact's name (`ect.declined`, `tms_refused`), turn a true value
    into the thing's absence; a false one then says nothing of it."""


class Vocabulary(BaseModel):
    """The vocabulary file, validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    about: str = ""
    synonym_groups: list[list[str]] = Field(default_factory=list)
    unit_spellings: dict[str, str] = Field(default_factory=dict)
    context_rules: list[ContextCue] = Field(default_factory=list)
    dropped_context_cues: list[str] = Field(default_factory=list)
    """medspaCy default cues (by literal) these records are better read without: its
    "secondary" ends every negation's scope, so "not secondary prevention" denied nothing;
    a rule above (`secondary to`) keeps what it was for."""
    fact_words: FactWords = Field(default_factory=FactWords)
    field_abbreviations: dict[str, str] = Field(default_factory=dict)
    """Words that field names shorten (`hx` -> `history`, `req` -> `request`): a fact named
    `Req.Visits` binds to the alias "request visits" as well as to its own words."""
    relative_words: list[str] = Field(default_factory=list)
    """Words that make a field name about a relative (`family`, `fhx`, `mother`): such a fact
    is not the patient's unless the atom itself asks about relatives."""
    form_kinds: list[str] = Field(default_factory=list)
    """Phrases that name the kind of a form (`prior authorization`): in a document's title they
    say nothing of what its values measure, so "prior" there marks no prior count."""
    outcome_words: list[str] = Field(default_factory=list)
    """Words for what came of a thing (`response`, `improvement`, `side effects`) or what
    is judged of it (`contraindication`): in "Sertraline 8 weeks: no response" and "no
    contraindication to rTMS" the negation is of the outcome, not of the thing."""

    credentials: list[str] = Field(default_factory=list)
    """Degrees and licenses written after a clinician's name (`MD`, `DO`, `NP`, `LCSW`): a line
    that opens with a name and one of them signs or heads a document."""
    author_labels: list[str] = Field(default_factory=list)
    """Labels that make the name after them a document's author (`Provider`, `Signed by`);
    a name after any other label is someone else ("Referral source: Alan Whitby, MD")."""

    def expand(self, names: list[str]) -> list[str]:
        """`names` plus every member of a synonym group that one of them belongs to."""
        keys = {normalise_words(name) for name in names}
        widened = list(names)
        for group, members in zip(self.synonym_groups, self._group_keys, strict=True):
            if not keys.isdisjoint(members):
                widened.extend(group)
        return list(dict.fromkeys(widened))

    _units: dict[str, str] = PrivateAttr(default_factory=dict)
    _spellings: tuple[str, ...] = PrivateAttr(default=())
    _abbreviations: dict[str, str] = PrivateAttr(default_factory=dict)
    _relatives: frozenset[str] = PrivateAttr(default=frozenset())
    _author_labels: frozenset[str] = PrivateAttr(default=frozenset())
    _outcome: re.Pattern[str] | None = PrivateAttr(default=None)
    _author: re.Pattern[str] | None = PrivateAttr(default=None)
    _group_keys: tuple[frozenset[tuple[str, ...]], ...] = PrivateAttr(default=())

    def model_post_init(self, context: object, /) -> None:
        """Prepare the unit spellings and synonym groups once: every number read in a note
        looks the spellings up, every atom evaluated widens its names by the groups."""
        self._units = {key.lower(): value for key, value in self.unit_spellings.items()}
        self._spellings = tuple(sorted(self._units, key=len, reverse=True))
        self._abbreviations = {k.lower(): v for k, v in self.field_abbreviations.items()}
        self._author_labels = frozenset(label.lower() for label in self.author_labels)
        self._relatives = frozenset(w for n in self.relative_words for w in normalise_words(n))
        self._group_keys = tuple(
            frozenset(normalise_words(member) for member in group) for group in self.synonym_groups
        )
        if self.outcome_words:
            spelled = "|".join(re.escape(word) for word in self.outcome_words)
            self._outcome = re.compile(rf"\b(?:{spelled})\b", re.I)
        if self.credentials:
            self._author = _author_pattern(self.credentials)

    def author_role(self, line: str) -> str | None:
        """What a line that names a document's author says of them, from their credentials on
        ("MD, Psychiatry" of "Lena Marsh, MD, Psychiatry | seen 2026-02-11"); None when the
        line names no author."""
        if self._author is None:
            return None
        for field in _FIELD_GAP.split(line):
            match = self._author.match(field)
            if match is None:
                continue
            label = match.group("label")
            if label is None or label.strip().lower() in self._author_labels:
                return match.group("role")
        return None

    def spelled_out(self, words: tuple[str, ...]) -> tuple[str, ...]:
        """Field-name words with abbreviations written in full (may be `words` itself)."""
        return tuple(
            word
            for short in words
            for word in normalise_words(self._abbreviations.get(short, short))
        )

    def names_relative(self, words: Iterable[str]) -> bool:
        """Whether any of `words` says "a relative" (`fhx`, `family`, `mother`)."""
        return not self._relatives.isdisjoint(words)

    def names_outcome(self, text: str) -> bool:
        """Whether `text` speaks of an outcome ("no clinically significant response")."""
        return self._outcome is not None and self._outcome.search(text) is not None

    @property
    def spellings_longest_first(self) -> tuple[str, ...]:
        """Unit spellings in lower case, longest first (`events/hour` before `h`)."""
        return self._spellings

    def unit_for(self, spelling: str) -> str | None:
        """The pint unit a spelling in a note stands for (`lbs` -> `lb`), or None."""
        return self._units.get(spelling.lower().strip())


def _author_pattern(credentials: list[str]) -> re.Pattern[str]:
    """A line that opens with an optional "Label:", a capitalised name of two to four words,
    a comma and a credential; the role is the rest of the line from the credential on. A
    credential that runs on into words ("Dana Ruiz, LMFT, with no change in her scores") or a
    colon is a sentence about the clinician, not a signature, unless a label heads the line
    ("Provider: Anand Kapoor, DO, psychiatry (board-cert.)")."""
    spelled = "|".join(re.escape(c) for c in sorted(credentials, key=len, reverse=True))
    return re.compile(
        r"(?:(?P<label>[A-Za-z][A-Za-z /-]{0,40}):\s*)?(?:Dr\.?\s+)?"
        r"[A-Z][\w'’.-]*(?:[ \t]+[A-Z][\w'’.-]*){1,3},[ \t]*"
        rf"(?P<role>(?:{spelled})(?![A-Za-z])(?![,;]?[ \t]*:)"
        r"(?(label)|(?![,:;]?[ \t]*[a-z])).*)"
    )


def load_vocabulary(path: Path | None) -> Vocabulary:
    """Read and validate the vocabulary file; an empty vocabulary when `path` is None."""
    if path is None:
        return Vocabulary()
    return Vocabulary.model_validate_json(path.read_bytes())
