"""One atom against one case: holds, fails, no evidence, or conflicting — with the evidence.

Each evaluator gathers observations (a fact or a sentence that says the atom holds, fails, or
says something vague) and `_settle` turns them into a state, the same way for every kind:
agreeing trusted observations decide; disagreeing ones, vague ones alone, or low-confidence
facts alone are conflicting; nothing at all is no evidence.
"""

from __future__ import annotations

import ast
import datetime as dt
import functools
import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Protocol, TypeVar

from reasoning_service.conditions.case_reading import (
    CaseReading,
    FactView,
    Mention,
    Sentence,
    form_value,
    part_defers,
    unchecked,
    value_defers,
)
from reasoning_service.conditions.units import convert
from reasoning_service.conditions.values import (
    Bound,
    Measured,
    TimePoint,
    duration_right_after,
    find_bounded_durations,
    find_dates,
    find_durations,
    measured_near,
    month_only,
    parse_measured,
    year_at_either_end,
    year_beside,
)
from reasoning_service.conditions.vocabulary import normalise_words
from reasoning_service.models import AtomState, CaseEvidence
from reasoning_service.models.conditions import (
    Atom,
    CategoryAtom,
    Concept,
    Derivation,
    FindingAtom,
    QuantityAtom,
    QuantityInput,
    TimeWindowAtom,
)

__all__ = [
    "AtomVerdict",
    "denied_by_its_sentence",
    "evaluate_atom",
    "fact_is_evidence",
    "fact_presence",
]


class _Says(Enum):
    HOLDS = "holds"
    FAILS = "fails"
    VAGUE = "vague"
    PARTLY = "partly"
    """A period the record names lies partly inside a time window ("in 2025", 40 days)."""


@dataclass(frozen=True, slots=True)
class _Observation:
    says: _Says
    evidence: CaseEvidence
    note: str
    trusted: bool = True
    """False for a fact below the confidence threshold."""
    date: dt.date | None = None
    name: str | None = None
    """The words of a mention that named the concept (None for a fact)."""
    from_expiry: bool = False
    """Read from a validity date (`license.expires`), which no naming of the thing in the
    fact's own sentence contradicts."""


@dataclass(frozen=True, slots=True)
class AtomVerdict:
    state: AtomState
    note: str
    evidence: list[CaseEvidence]
    by_silence: bool = False


def evaluate_atom(
    atom: Atom, reading: CaseReading, min_confidence: float, affirming: bool = False
) -> AtomVerdict:
    """Decide one atom from the case (see the module docstring). `affirming`: the atom's
    holding speaks for the criterion being met (in `require`, under no `not`), so doubt
    that only the notes raise may be settled against it."""
    reading = reading.without(tuple(atom.outside))
    match atom:
        case QuantityAtom():
            observations = _quantity(atom, reading, min_confidence)
        case FindingAtom():
            observations = _finding(atom, reading, min_confidence)
        case TimeWindowAtom():
            observations = _time_window(atom, reading, min_confidence)
        case CategoryAtom():
            observations = _category(atom, reading, min_confidence)
    names = reading.names(atom.concept, atom.aliases)
    observations = _document_wins(observations, reading, names)
    if isinstance(atom, TimeWindowAtom) and atom.relation != "at_least":
        observations = _any_occurrence(observations)
    if isinstance(atom, FindingAtom | QuantityAtom | TimeWindowAtom):
        observations = _notes_over_forms(observations, reading)
    elif isinstance(atom, CategoryAtom) and atom.select != "request":
        # Only a denial: a form's class that the notes would grant stays a conflict.
        observations = _notes_over_forms(observations, reading, only=_Says.FAILS)
    if isinstance(atom, FindingAtom) and atom.expect == "absent":
        observations = _presence_wins(observations)
    if affirming and isinstance(atom, FindingAtom) and atom.expect == "present":
        observations = _denial_wins_in_text(observations)
    if isinstance(atom, FindingAtom) and not observations and atom.when_silent == "absent":
        if any(mention.blank for mention in reading.mentions(names)):
            return AtomVerdict(AtomState.NO_EVIDENCE, "a form asks and leaves it blank", [])
        state = AtomState.HOLDS if atom.expect == "absent" else AtomState.FAILS
        return AtomVerdict(state, "not mentioned anywhere: taken as absent", [], by_silence=True)
    if isinstance(atom, TimeWindowAtom) and not observations and atom.when_undated == "holds":
        return AtomVerdict(
            AtomState.HOLDS, "no dates to check: order taken as kept", [], by_silence=True
        )
    verdict = _settle(observations)
    if isinstance(atom, FindingAtom) and atom.expect == "absent":
        return _doubted_absence(verdict, observations)
    return verdict


def _doubted_absence(verdict: AtomVerdict, observations: list[_Observation]) -> AtomVerdict:
    """A thing held absent that the record also calls possible ("?metastasis", "versus early
    axial spondyloarthritis") is in doubt: its absence is the unsafe answer to give."""
    possible = [o for o in observations if o.says is _Says.VAGUE]
    if verdict.state is not AtomState.HOLDS or not possible:
        return verdict
    held = [o for o in observations if o.says is _Says.HOLDS and o.trusted]
    return _verdict(AtomState.CONFLICTING, [*held, *possible], "absent, yet called possible")


def _document_wins(
    observations: list[_Observation], reading: CaseReading, names: tuple[str, ...]
) -> list[_Observation]:
    """Drop a fact that its own source sentence contradicts: gold follows the document.

    A fact read from a sentence is set aside when that sentence, read by itself, says the
    opposite, or speaks of the concept only about a relative or hypothetically (an extractor
    that dropped a negation or took a family history as the patient's). Disagreement between
    different sources is left alone: that is a real conflict.
    """
    text = [o for o in observations if o.evidence.field is None and o.evidence.doc_id]
    kept: list[_Observation] = []
    for observation in observations:
        sentences = _source_sentences(observation.evidence, reading)
        if not sentences or observation.from_expiry:
            kept.append(observation)
            continue
        same_place = [
            o for o in text if any(_inside(o.evidence, sentence) for sentence in sentences)
        ]
        if any(o.says is not observation.says for o in same_place):
            continue
        if not same_place and _only_unaffirmed(sentences, reading, names):
            continue
        kept.append(observation)
    return kept


def _decided(observations: list[_Observation]) -> list[_Observation]:
    """The trusted observations that say the atom holds or fails."""
    return [o for o in observations if o.trusted and o.says in (_Says.HOLDS, _Says.FAILS)]


def _notes_over_forms(
    observations: list[_Observation], reading: CaseReading, only: _Says | None = None
) -> list[_Observation]:
    """A request form's box or answer that the clinical notes contradict gives way to them
    (with `only`, when the notes say that).

    The form is the requester's summary of the record ("[x] history of sustained VT", "Prior
    supervised program: Y"); the notes are the record. Only when the notes agree among
    themselves do they settle it: notes that disagree are a conflict whatever the form says.
    """
    decided = _decided(observations)
    if len({o.says for o in decided}) < 2:
        return observations
    on_forms = [o for o in decided if reading.on_request_form(o.evidence.doc_id)]
    in_notes = {o.says for o in decided if o not in on_forms}
    if len(in_notes) != 1 or not on_forms or (only is not None and in_notes != {only}):
        return observations
    return [o for o in observations if o not in on_forms or o.says in in_notes]


def _restated(values: list[_Value], reading: CaseReading) -> list[_Value]:
    """A value a note only repeats ("EF 33% on MRI", dated by the note) is as old as the
    measurement that dates the same number ("MRI 04/21/2026: EF 33%"): for `select:
    latest`, a newer report's value is not outdone by a later note that restates an older one."""
    measured = [
        ((v.low, v.high), v.date)
        for v in values
        if v.date is not None and v.date != _written(v, reading)
    ]
    restated = []
    for value in values:
        if value.date is not None and value.date == _written(value, reading):
            earlier = [
                d for same, d in measured if same == (value.low, value.high) and d < value.date
            ]
            value = replace(value, date=max(earlier)) if earlier else value
        restated.append(value)
    return restated


def _written(value: _Value, reading: CaseReading) -> dt.date | None:
    """The date of the document a value was read from."""
    document = reading.case.document(value.evidence.doc_id) if value.evidence.doc_id else None
    return document.date if document is not None else None


def _off_forms(values: list[_Value], reading: CaseReading) -> list[_Value]:
    """The values the clinical notes give, if any: a request form restates a measurement on the
    day it is filled in ("BMI: 35.2" copied from a 2024 problem list), so its date is no date
    of measurement for `select: latest`."""
    in_notes = [v for v in values if not reading.on_request_form(v.evidence.doc_id)]
    return in_notes or values


def _source_sentences(evidence: CaseEvidence, reading: CaseReading) -> list[Sentence]:
    """The sentences a fact's source quote was taken from (none for text evidence)."""
    if evidence.field is None or evidence.doc_id is None or not evidence.quote.strip():
        return []
    document = reading.case.document(evidence.doc_id)
    if document is None:
        return []
    pages = [evidence.page] if evidence.page else range(1, len(document.pages) + 1)
    for number in pages:
        if not 1 <= number <= len(document.pages):
            continue
        start = document.pages[number - 1].find(evidence.quote.strip())
        if start < 0:
            continue
        end = start + len(evidence.quote.strip())
        on_page = reading.sentences_on(evidence.doc_id, number)
        return [s for s in on_page if s.start < end and start < s.end]
    return []


def denied_by_its_sentence(view: FactView, reading: CaseReading, names: tuple[str, ...]) -> bool:
    """A fact whose own source sentence mentions the concept only negated, about a relative or
    hypothetically (an extractor that dropped a negation): its value is no evidence by itself."""
    return _only_unaffirmed(_source_sentences(view.evidence(), reading), reading, names)


def _inside(evidence: CaseEvidence, sentence: Sentence) -> bool:
    return (
        evidence.doc_id == sentence.doc_id
        and evidence.page == sentence.page
        and evidence.char_start == sentence.start
    )


def _only_unaffirmed(
    sentences: list[Sentence], reading: CaseReading, names: tuple[str, ...]
) -> bool:
    here = _mentions_in(sentences, reading, names)
    return bool(here) and not any(m.stance.affirmed for m in here)


def _mentions_in(
    sentences: list[Sentence], reading: CaseReading, names: tuple[str, ...]
) -> list[Mention]:
    indexes = {sentence.index for sentence in sentences}
    return [m for m in reading.mentions(names) if m.sentence.index in indexes]


def _denial_wins_in_text(observations: list[_Observation]) -> list[_Observation]:
    """For a thing that must be present, notes alone that both affirm and deny it fail it.

    A denial is deliberate ("No prior stroke", "has not yet participated in a supervised
    program"); an affirmation in text is often loose (a history list, a plan, another sense of
    the words). With no fact to settle it, the denial stands: the answer that costs least.
    """
    both_ways = {o.says for o in _decided(observations)} == {_Says.HOLDS, _Says.FAILS}
    if not both_ways or any(o.evidence.field for o in observations):
        return observations
    return [o for o in observations if o.says is not _Says.HOLDS]


def _presence_wins(observations: list[_Observation]) -> list[_Observation]:
    """For an absence: one trusted statement that the thing is present settles it (fails).

    An absence atom often names several conditions ("no metastatic, inflammatory or infectious
    cause"): "no cauda equina" does not contradict "metastases to L2". The same name both
    denied and affirmed ("no significant improvement" in one note, "a clinically significant
    improvement" in another) is a conflict.
    """
    present = [o for o in observations if o.says is _Says.FAILS and o.trusted]
    if not present:
        return observations
    affirmed = [_words(o.name) for o in present if o.name]
    denied_alike = [
        o
        for o in observations
        if o.says is _Says.HOLDS and o.name and _alike(_words(o.name), affirmed)
    ]
    return present + denied_alike


def _words(name: str) -> frozenset[str]:
    """A name's words, a plural as its singular (as names match in text)."""
    return frozenset(word.removesuffix("s") for word in normalise_words(name))


def _alike(words: frozenset[str], others: list[frozenset[str]]) -> bool:
    """Whether one name's words hold all of another's, or the reverse ("significant
    improvement" and "clinically significant improvement"; not "MI" and "STEMI", whose
    letters only overlap)."""
    return any(words <= other or other <= words for other in others)


def _any_occurrence(observations: list[_Observation]) -> list[_Observation]:
    """For `within`/`between`: one dated occurrence inside the window is enough; other
    occurrences of a recurring event (an old MI) do not contradict it."""
    inside = [o for o in observations if o.says is _Says.HOLDS and o.trusted]
    if not inside:
        return observations
    dated_outside = [
        o
        for o in observations
        if o.says in (_Says.FAILS, _Says.PARTLY) and o.note.endswith("days before")
    ]
    return [o for o in observations if o not in dated_outside]


def _settle(observations: list[_Observation]) -> AtomVerdict:
    unsure = (_Says.VAGUE, _Says.PARTLY)
    trusted = [o for o in observations if o.trusted and o.says not in unsure]
    says = {o.says for o in trusted}
    weak = [o for o in observations if not o.trusted and o.says not in unsure]
    partly = [o for o in observations if o.says is _Says.PARTLY]
    if len(says) == 1:
        outcome = says.pop()
        against = [o for o in weak if o.says is not outcome] + partly
        if against and outcome is _Says.HOLDS:
            # A doubtful fact or a period only partly inside the window never overrides
            # evidence of failure, but it does cast doubt on evidence that the atom holds: the
            # unsafe direction.
            return _verdict(AtomState.CONFLICTING, [*trusted, *against], "sources disagree")
        state = AtomState.HOLDS if outcome is _Says.HOLDS else AtomState.FAILS
        return _verdict(state, trusted, "")
    if len(says) > 1:
        return _verdict(AtomState.CONFLICTING, trusted, "sources disagree")
    if weak:
        # A doubtful fact alone is no evidence: nothing in the record backs it (gold labels
        # follow the documents), so the criterion asks for documentation.
        # The doubtful facts stay listed for the reviewer; they decide nothing.
        return _verdict(AtomState.NO_EVIDENCE, weak, "only low-confidence facts")
    vague = [o for o in observations if o.says in unsure]
    if vague:
        return _verdict(AtomState.CONFLICTING, vague, "only vague or uncertain mentions")
    return AtomVerdict(AtomState.NO_EVIDENCE, "nothing in the case", [])


def _verdict(state: AtomState, observations: list[_Observation], why: str) -> AtomVerdict:
    notes = list(dict.fromkeys(o.note for o in observations if o.note))
    note = "; ".join(notes[:4])
    if why:
        note = f"{why}: {note}" if note else why
    evidence = list({_key(o.evidence): o.evidence for o in observations}.values())
    return AtomVerdict(state, note, evidence[:6])


def _key(evidence: CaseEvidence) -> tuple[object, ...]:
    return (evidence.field, evidence.doc_id, evidence.page, evidence.char_start, evidence.quote)


def _trusted(view: FactView, min_confidence: float) -> bool:
    return view.fact.confidence >= min_confidence


def fact_is_evidence(view: FactView, min_confidence: float) -> bool:
    """A finding needs the record's word: the request's own codes and service text are the
    requester's claim, so on their own they never settle a clinical finding; nor does a fact
    below the confidence threshold."""
    return _trusted(view, min_confidence) and not view.fact.field.startswith("request.")


def _about(mentions: Iterable[Mention]) -> list[Mention]:
    """Mentions that are statements about this patient (not a relative, not hypothetical)."""
    return [m for m in mentions if m.stance.about_patient]


# --- findings -----------------------------------------------------------------------------


def _finding(atom: FindingAtom, reading: CaseReading, min_confidence: float) -> list[_Observation]:
    names = reading.names(atom.concept, atom.aliases)
    present_says = _Says.HOLDS if atom.expect == "present" else _Says.FAILS
    absent_says = _Says.FAILS if atom.expect == "present" else _Says.HOLDS
    observations: list[_Observation] = []
    other, excepts = tuple(atom.not_when), tuple(atom.excepts)
    named = [
        v
        for v in reading.facts_named(names, atom.codes)
        if _on_topic(atom, reading, v)
        and not _named_other(v, other, reading)
        and not _of_excepted_kind(v, names, excepts, reading)
    ]
    for view in named:
        expires = _valid_through(view, reading)
        is_present = _presence(view, reading, expires)
        if is_present is None:
            continue
        says = present_says if is_present else absent_says
        expiry = expires is not None
        yes, no = ("valid", "expired") if expiry else ("present", "absent")
        word = yes if is_present else no
        unsupported = view.fact.value is True and _quote_silent_on(view, reading, names)
        observations.append(
            _Observation(
                says,
                view.evidence(),
                f"{view.fact.field} = {_short(view.fact.value)} ({word})"
                + (", its quote does not say so" if unsupported else ""),
                fact_is_evidence(view, min_confidence) and not unsupported,
                view.date,
                from_expiry=expiry,
            )
        )
    for view in reading.facts:
        if view in named or not isinstance(view.fact.value, str):
            continue
        text, spans = _naming_value(view, names, reading)
        if not spans or not _on_topic(atom, reading, view):
            continue
        if _of_excepted_kind(view, names, excepts, reading):
            continue
        if _stands_before(text, spans[0][0], other, reading):
            continue
        stance = reading.context.stances(text, spans)[0]
        if not stance.about_patient:
            continue
        says = _Says.VAGUE if stance.possible else (absent_says if stance.negated else present_says)
        observations.append(
            _Observation(
                says,
                view.evidence(),
                f"{view.fact.field}: {_short(view.fact.value)}",
                fact_is_evidence(view, min_confidence),
                view.date,
            )
        )
    planned: list[Mention] = []
    for mention in reading.mentions(names):
        if not _on_topic(atom, reading, reading.semicolon_group(mention.sentence)):
            continue
        if _preceded_by(mention, other, reading):
            continue  # "APRN license": another thing of the same name
        if _planned(mention, reading):
            if mention.stance.planned and not _credential_of_a_person(mention):
                planned.append(mention)
            continue  # "visit on 04/08/2026" after the case's date: a plan, not a finding
        if not mention.stance.about_patient:
            continue
        lapsed = _lapsed(reading.line_from(mention.sentence), mention.end, reading)
        if lapsed is not None and not mention.stance.negated:
            observations.append(_said_in(mention, absent_says, f"expired {lapsed}"))
            continue
        if mention.stance.possible and not mention.stance.negated:
            says = _Says.VAGUE
        else:
            says = absent_says if mention.stance.negated else present_says
        observations.append(_said_in(mention, says))
    observations += _denials(atom, reading, min_confidence, absent_says)
    observations += _unlisted(atom, names, reading, absent_says)
    return observations + _only_planned(atom, planned, observations, reading)


def _unlisted(
    atom: FindingAtom, names: tuple[str, ...], reading: CaseReading, absent_says: _Says
) -> list[_Observation]:
    """Absence read from a list that leaves the finding out (`listed_in`): "PSH: tonsillectomy
    as a child" names a surgery, and no spine surgery."""
    if not atom.listed_in:
        return []
    observations = []
    for mention in _about(reading.mentions(tuple(atom.listed_in))):
        if mention.stance.negated or mention.stance.hypothetical:
            continue  # "PSH: none" is a denial (`denied_by`), "PSH: ?" no list
        listing = _LISTING.match(reading.line_from(mention.sentence), mention.end)
        if listing is None or _NOT_A_LIST.search(listing.group(1)):
            continue
        if reading.find_in(listing.group(1), names):
            continue
        observations.append(_said_in(mention, absent_says, "not among those listed"))
    return observations


_LISTING = re.compile(r"[^\S\n]*(?:\([^()\n]{0,20}\))?[^\S\n]*:[^\S\n]*([^\s_?].*)")
"""A heading's list: what its colon opens on the same line ("PSH: tonsillectomy")."""
_NOT_A_LIST = re.compile(
    r"\b(?:see|refer(?:s|red)?\s+to|per|as\s+(?:above|below|before|noted|documented)|on\s+file"
    r"|in\s+(?:the\s+)?(?:chart|EHR|EMR|record)|reviewed|unchanged|non-?contributory"
    r"|unknown|unable|deferred|pending|not\s+(?:obtained|available|reviewed))\b",
    re.I,
)
"""A heading's value that points elsewhere or only says it was looked at ("PMH: reviewed, see
EHR problem list"): it lists nothing, so it leaves nothing out."""


_PERSON_BEFORE = re.compile(r"\b[A-Z][a-z'’-]+(?:[^\S\n]+[A-Z]\.)?[^\S\n]+[A-Z][a-z'’-]+,[^\S\n]*$")


def _credential_of_a_person(mention: Mention) -> bool:
    """Whether the mention is a credential written after a person's name ("Referral to Grace
    Liu, L.Ac."): the plan is for what that person will do, not for their credential."""
    text = mention.sentence.text
    return _PERSON_BEFORE.search(text, max(0, mention.start - 40), mention.start) is not None


def _only_planned(
    atom: FindingAtom,
    planned: list[Mention],
    observations: list[_Observation],
    reading: CaseReading,
) -> list[_Observation]:
    """What the record only plans ("will schedule an SDM visit", "education: [x] scheduled")
    has not happened yet: for a finding expected present that is evidence it fails, unless the
    record also says it did (a request form's tick is the requester's summary, not the record).
    A plan read only from a later date is not: "stroke prevention visit in April" plans no
    stroke."""
    if atom.expect != "present" or any(
        o.says is _Says.HOLDS and o.trusted and not reading.on_request_form(o.evidence.doc_id)
        for o in observations
    ):
        return []
    return [_said_in(mention, _Says.FAILS, "only planned") for mention in planned]


def _naming_value(
    view: FactView, names: tuple[str, ...], reading: CaseReading
) -> tuple[str, list[tuple[int, int]]]:
    """A fact's string value where it names the finding, else its field and a short value read
    as one statement ("priorTms.outcome: response and remission" names a response to prior
    TMS): the text read and the spans of the names in it."""
    value = str(view.fact.value)
    spans = reading.find_in(value, names)
    if spans or len(value.split()) > _STATEMENT_WORDS:
        return value, spans
    label = " ".join(view.words) + " "
    text = label + value
    return text, [span for span in reading.find_in(text, names) if span[1] > len(label)]


_STATEMENT_WORDS = 6
"""The longest value read with its field name as one statement."""


def _on_topic(atom: FindingAtom, reading: CaseReading, where: str | FactView) -> bool:
    """Whether a sentence, or a fact's name, value and quote, names what the finding is about
    (always, when the finding names no topic)."""
    if not atom.topic:
        return True
    if isinstance(where, FactView):
        where = " ".join([*where.every_word, _category_text(where.fact.value), where.quote])
    return bool(reading.find_in(where, tuple(atom.topic)))


def _said_in(mention: Mention, says: _Says, word: str = "") -> _Observation:
    """`says` from a mention, noted as `word` (by default "negated" or "mentioned")."""
    word = word or ("negated" if mention.stance.negated else "mentioned")
    return _Observation(
        says,
        mention.sentence.evidence(),
        f"{mention.text!r} {word}",
        date=mention.sentence.date,
        name=mention.text,
    )


_OTHER = re.compile(r"\b(?:other|additional|further)\b[^,;.]{0,20}$", re.I)
"""Right before a denied name: "no other surgeries" denies only what the record did not list."""


def _denials(
    atom: FindingAtom, reading: CaseReading, min_confidence: float, absent_says: _Says
) -> list[_Observation]:
    """Absence read from the atom's broader names (`denied_by`): only their denial counts.

    "No other comorbidities" after a list denies the rest of the list, not what it names, so
    it is no evidence against a finding expected present.
    """
    if not atom.denied_by:
        return []
    names = tuple(atom.denied_by)
    observations = [
        _Observation(
            absent_says,
            view.evidence(),
            f"{view.fact.field} = {_short(view.fact.value)} (none)",
            fact_is_evidence(view, min_confidence),
            view.date,
        )
        for view in reading.facts_named(names)
        if fact_presence(view, reading) is False
    ]
    for mention in _about(reading.mentions(names)):
        if not mention.stance.negated:
            continue  # a denial is never a plan: `_planned` keeps negated mentions
        if atom.expect == "present" and _OTHER.search(mention.sentence.text, 0, mention.start):
            continue
        observations.append(_said_in(mention, absent_says))
    return observations


def _quote_silent_on(view: FactView, reading: CaseReading, names: tuple[str, ...]) -> bool:
    """A fact that says a finding is present while the sentence it was read from never names
    it ("examined: true" from "Dr. V has reviewed the record"): the extractor's inference, not
    the record's word, so it is no evidence by itself."""
    sentences = _source_sentences(view.evidence(), reading)
    if not sentences or _mentions_in(sentences, reading, names):
        return False
    stems = {word[:5] for word in view.every_word if len(word) > 2}
    said = {word[:5] for s in sentences for word in normalise_words(s.text)}
    return not stems & said


def _planned(mention: Mention, reading: CaseReading) -> bool:
    """A mention ConText reads as still to come, dated after the case's `as_of` in its own
    sentence, or in a document that records something still to come ("Status: SCHEDULED"), is
    something planned (a denial or a relative's never is); a date the thing is valid through
    ("exp 06/30/2027") plans nothing."""
    stance = mention.stance
    if stance.negated or stance.family:
        return False
    sentence = mention.sentence
    if stance.planned or reading.scheduled(sentence.doc_id):
        return True
    written = sentence.date or reading.as_of
    validity = {point.start for point in _expiries(sentence.text, reading)}
    return any(
        point.surely_after(reading.as_of) and point.start not in validity
        for point in find_dates(sentence.text, written)
    )


def fact_presence(view: FactView, reading: CaseReading) -> bool | None:
    """True / False when a fact named for the finding says it is present / absent."""
    return _presence(view, reading, _valid_through(view, reading))


def _presence(view: FactView, reading: CaseReading, expires: dt.date | None) -> bool | None:
    """`fact_presence`, given the date the fact says the thing is valid through (if any)."""
    present = _value_presence(view, reading, expires)
    refusal = reading.vocabulary.fact_words.refusal
    if present is not None and _named_ending(view, refusal):
        return False if present else None  # `ect.declined: true`: no ECT
    return present


def _value_presence(view: FactView, reading: CaseReading, expires: dt.date | None) -> bool | None:
    """What the fact's value alone says of the thing, whatever its name says."""
    value = view.fact.value
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, list):
        return bool(value)
    if expires is not None:
        return expires >= reading.as_of
    if isinstance(value, str):
        value = _only_date(value, reading) or value
    if isinstance(value, dt.date):
        return value <= reading.as_of or None  # a date still to come: booked, not done
    words = reading.vocabulary.fact_words
    shown = form_value(value)
    if shown is None or value_defers(shown) or part_defers(shown):
        return None
    text = shown.lower()
    if any(_starts_with(text, word) for word in words.absent):
        return False
    if _lapsed(shown, 0, reading) is not None:
        return False
    return bool(text)


def _valid_through(view: FactView, reading: CaseReading) -> dt.date | None:
    """The date a fact named for an expiry (`license.expires`, `lic_exp`) gives: the last day
    the thing is valid."""
    endings = reading.vocabulary.fact_words.expiry
    if not _named_ending(view, endings):
        return None
    value = view.fact.value
    if isinstance(value, dt.date):
        return value
    return _only_date(value, reading) if isinstance(value, str) else None


def _only_date(value: str, reading: CaseReading) -> dt.date | None:
    """The date a value is, when it is one date and nothing else ("2026-02-20", "02/20/26")."""
    text = value.strip(" .")
    points = find_dates(text, reading.as_of)
    if len(points) != 1 or (points[0].start, points[0].end) != (0, len(text)):
        return None
    return points[0].date


def _lapsed(text: str, start: int, reading: CaseReading) -> dt.date | None:
    """The date an expiry after `start` gives ("license #AC-1188, exp 10/31/2025"), when it is
    before the case's date: what was valid then is no longer."""
    for point in _expiries(text, reading):
        if point.start >= start:
            last_day = point.days[1]  # "exp 01/2026" is valid through January 31
            return last_day if last_day < reading.as_of else None
    return None


def _expiries(text: str, reading: CaseReading) -> list[TimePoint]:
    """The dates an expiry word introduces ("exp 10/31/2026", "valid through 2027")."""
    found = []
    for match in _expiry_words(tuple(reading.vocabulary.fact_words.expiry)).finditer(text):
        points = find_dates(text[match.end() :], None)
        if points and points[0].start == 0:
            point = points[0]
            found.append(replace(point, start=match.end(), end=match.end() + point.end))
    return found


@functools.cache
def _expiry_words(words: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))
    return re.compile(rf"\b(?:{alternatives})\b\.?[\s:,-]*(?:on\s+)?", re.I)


def _named_ending(view: FactView, endings: list[str]) -> bool:
    """Whether the fact's name, as written or spelled out, ends with one of `endings`."""
    return any(_ends_with(words, endings) for words in (view.words, view.spelled))


def _ends_with(words: tuple[str, ...], endings: list[str]) -> bool:
    named = " ".join(words)
    return any(named == end or named.endswith(" " + end) for end in endings)


def _starts_with(text: str, word: str) -> bool:
    """Whether `text` is `word` or opens with it as whole words ("none known", "self-referred
    (employer program)"; not "N-terminal pro-BNP" for "n")."""
    word = word.lower()
    after = text[len(word) : len(word) + 1]
    return text.startswith(word) and not (after.isalnum() or after in ("-", "/"))


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- quantities ---------------------------------------------------------------------------

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": lambda a, b: abs(a - b) < 1e-9,
}


@dataclass(frozen=True, slots=True)
class _Value:
    low: float
    high: float
    evidence: CaseEvidence
    text: str
    trusted: bool
    date: dt.date | None
    approximate: bool = False
    bound: Bound | None = None
    """Read from a bound ("<30"): `low`/`high` are then the values it allows."""


_NEAR_THRESHOLD = 0.05
"""An estimate ("BMI ~35") this close to the threshold (as a share of it) decides nothing."""


def _quantity(
    atom: QuantityAtom, reading: CaseReading, min_confidence: float
) -> list[_Observation]:
    values = _values(atom, atom.unit, reading, min_confidence)
    if atom.prefer == "facts" and any(v.trusted and v.evidence.field for v in values):
        values = [v for v in values if v.evidence.field]
    if atom.derive is not None:
        values += _derived(atom.derive, atom.unit, reading, min_confidence)
    if atom.select == "latest":
        values = _latest(_restated(_off_forms(values, reading), reading))
    compare = _COMPARE[atom.comparator]
    observations = []
    for value in values:
        low_ok, high_ok = compare(value.low, atom.value), compare(value.high, atom.value)
        says = _Says.HOLDS if low_ok and high_ok else _Says.FAILS
        near = abs(value.low - atom.value) <= _NEAR_THRESHOLD * abs(atom.value)
        if low_ok != high_ok or (value.approximate and near):
            says = _Says.VAGUE
        shown = _shown(value)
        note = f"{value.text}: {shown} {atom.unit} vs {atom.comparator} {_number(atom.value)}"
        observations.append(_Observation(says, value.evidence, note, value.trusted, value.date))
    if atom.kinds:
        kinds = [_kind_of(value, atom.kinds, reading) for value in values]
        return _per_kind(atom, list(zip(kinds, observations, strict=True)), reading)
    return observations


def _shown(value: _Value) -> str:
    if value.bound is not None:
        return f"{value.bound} {_number(value.low if value.bound[0] == '>' else value.high)}"
    if value.low == value.high:
        return _number(value.low)
    return f"{_number(value.low)}–{_number(value.high)}"


class _DatedEvidence(Protocol):
    @property
    def date(self) -> dt.date | None: ...
    @property
    def evidence(self) -> CaseEvidence: ...


_Dated = TypeVar("_Dated", bound=_DatedEvidence)


def _latest(values: list[_Dated]) -> list[_Dated]:
    """The values of the latest date, and every value of a fact field they hold: two facts of
    one field that disagree are doubt however far apart their dates."""
    dates = [v.date for v in values if v.date is not None]
    if not dates:
        return values
    latest = max(dates)
    fields = {v.evidence.field for v in values if v.date == latest and v.evidence.field}
    return [v for v in values if v.date == latest or v.evidence.field in fields]


def _kind_of(value: _Value, kinds: dict[str, list[str]], reading: CaseReading) -> str | None:
    """The kind a value measures: named by the mention or fact field, else by its quote."""
    for text in (" ".join(normalise_words(value.text)), value.evidence.quote):
        for kind, names in kinds.items():
            if reading.find_in(text, tuple(names)):
                return kind
    return None


def _per_kind(
    atom: QuantityAtom,
    judged: list[tuple[str | None, _Observation]],
    reading: CaseReading,
) -> list[_Observation]:
    """One measurement per kind: enough kinds meet the threshold (holds), or the kinds the
    record names cannot make up `min_kinds` (fails); otherwise nothing is settled."""
    judged = [(kind, o) for kind, o in judged if kind is not None and o.trusted]
    meeting: dict[str, list[_Observation]] = {}
    for kind, observation in judged:
        if observation.says is _Says.HOLDS:
            meeting.setdefault(kind, []).append(observation)
    if len(meeting) >= atom.min_kinds:
        return [observation for found in meeting.values() for observation in found]
    settled = {kind for kind, o in judged if o.says is not _Says.VAGUE}
    named = {
        kind
        for kind, names in atom.kinds.items()
        if any(not m.stance.negated for m in _about(reading.mentions(tuple(names))))
    }
    unsettled = named - settled
    if not judged or len(meeting) + len(unsettled) >= atom.min_kinds:
        return []
    count = f"{len(meeting)} of {atom.min_kinds} kinds"
    return [
        replace(observation, says=_Says.FAILS, note=f"{observation.note} ({count})")
        for _, observation in judged
    ]


def _values(
    concept: QuantityAtom | QuantityInput, unit: str, reading: CaseReading, min_confidence: float
) -> list[_Value]:
    kinds = concept.kinds.values() if isinstance(concept, QuantityAtom) else ()
    names = reading.names(concept.concept, [*concept.aliases, *(n for k in kinds for n in k)])
    other = _other_words(concept)
    values: list[_Value] = []
    for view in reading.facts_named(names, concept.codes):
        if _named_other(view, other, reading):
            continue  # `residualAHI`, `goal_weight`: another measurement of the same name
        values += _fact_values(view, concept, unit, names, reading, min_confidence)
    read: set[tuple[int, int]] = set()
    for mention in _about(reading.mentions(names)):
        if mention.stance.negated or _qualified(mention, other, reading):
            continue
        sentence = mention.sentence
        for measured in _belonging_to(mention, concept, names, reading):
            converted = _in_unit(measured, unit, concept)
            if converted is None or (sentence.index, measured.start) in read:
                continue
            if other and reading.find_in(sentence.text[mention.end : measured.start], other):
                continue  # "AHI (3%/arousal rule): 21.3": another measurement of the name
            if measured.bound is not None:
                converted = _open_towards(measured.bound, converted)
            read.add((sentence.index, measured.start))
            date = _measured_on(sentence.text, measured, sentence.date or reading.as_of)
            values.append(
                _Value(
                    *converted, sentence.evidence(), mention.text, True,
                    date or sentence.date, measured.approximate, measured.bound,
                )
            )  # fmt: skip
            if concept.read_in == "next_to_name":
                break
    return values


def _open_towards(bound: Bound, value: tuple[float, float]) -> tuple[float, float]:
    """The values a bound allows: "<30" is anything below 30 (strictly, by a hair)."""
    low, high = value
    if bound.startswith("<"):
        return -math.inf, high if bound == "<=" else math.nextafter(high, -math.inf)
    return low if bound == ">=" else math.nextafter(low, math.inf), math.inf


def _other_words(concept: QuantityAtom | QuantityInput) -> tuple[str, ...]:
    return tuple(concept.not_when) if isinstance(concept, QuantityAtom) else ()


def _fact_values(
    view: FactView,
    concept: QuantityAtom | QuantityInput,
    unit: str,
    names: tuple[str, ...],
    reading: CaseReading,
    min_confidence: float,
) -> list[_Value]:
    """A fact's values, each as old as the date its quote gives it ("EF 55% in 2021"); where
    the quote gives other numbers in the unit ("days used >=4h: 61/84 (73%)" for a value of
    37), the quote's: the document wins, as for findings. A value the quote qualifies as
    another measurement of the name (`not_when`) is none."""
    trusted = _trusted(view, min_confidence)
    quote = view.quote
    written = parse_measured(quote, reading.vocabulary) if quote else []
    written_on = view.date or reading.as_of
    trends = _reads_trends(concept)

    def dated(measured: Measured) -> dt.date | None:
        return _measured_on(quote, measured, written_on) or view.date

    values = []
    for measured in _fact_measures(view, reading, trends):
        converted = _in_unit(measured, unit, concept)
        if converted is None:
            continue  # "97810 x16, 97811 x16; 2x/wk x 8 wks": a code, then the count
        same = [w for w in written if (w.low, w.high) == (measured.low, measured.high)]
        date = dated(same[0]) if same else view.date
        evidence, approximate = view.evidence(), measured.approximate
        values.append(_Value(*converted, evidence, view.fact.field, trusted, date, approximate))
        if not trends:
            break  # a value is its first reading in the unit
    quoted = [(w, q) for w in written if w.unit and (q := w.in_unit(unit)) is not None]
    quote_wins = values and quoted and not trends
    if quote_wins and not any(_same(v, w, unit) for v in values for w in written):
        note = f"{view.fact.field} (its quote)"
        values = [_Value(*q, view.evidence(), note, trusted, dated(w)) for w, q in quoted]
    other = _other_words(concept)
    if not other:
        return values
    return [
        v
        for v in values
        if not any(
            _same(v, w, unit) and _qualified_in(quote, w, names, other, reading) for w in written
        )
    ]


_CLAUSE_END = re.compile(r"[;,\n]|\.(?:\s|$)")
_OVERLAP_REACH = 60
"""How far past a mention a name overlapping it may run."""


def _qualified_in(
    quote: str,
    written: Measured,
    names: tuple[str, ...],
    other: tuple[str, ...],
    reading: CaseReading,
) -> bool:
    """Whether the quote qualifies its number with one of `other`, as another measurement of
    the name: right before the name ("Supine AHI: 19.0") or between it and the number ("AHI,
    3% hypopnea rule: 16.8"), or, in a quote that never names the concept, in the number's
    clause ("17.3/h using the 3% rule")."""
    named = reading.find_in(quote[: written.start], names)
    if named:
        start, end = max(named, key=lambda span: span[1])
        if _stands_before(quote, start, other, reading):
            return True
        before = quote[end : written.start]
    else:
        starts = [m.end() for m in _CLAUSE_END.finditer(quote, 0, written.start)]
        before = quote[max(starts, default=0) : written.start]
    after = ""
    if not reading.find_in(quote, names):
        end = _CLAUSE_END.search(quote, written.end)
        after = quote[written.end : end.start() if end else len(quote)]
    return bool(reading.find_in(before, other) or reading.find_in(after, other))


def _same(value: _Value, written: Measured, unit: str) -> bool:
    """Whether the quote writes this value, up to the rounding of a converted number."""
    quoted = written.in_unit(unit)
    return quoted is not None and all(
        abs(a - b) <= max(0.02 * abs(b), 0.05)
        for a, b in ((value.low, quoted[0]), (value.high, quoted[1]))
    )


def _belonging_to(
    mention: Mention,
    concept: QuantityAtom | QuantityInput,
    names: tuple[str, ...],
    reading: CaseReading,
) -> list[Measured]:
    text = mention.sentence.text
    periods, trends = _is_period(concept.unit), _reads_trends(concept)
    today = mention.sentence.date or reading.as_of
    # A bound ("EF <30%") settles a comparison, never a formula's input; nor a duration, whose
    # "more than 14 weeks" says nothing of which trial or episode it belongs to.
    bounds = isinstance(concept, QuantityAtom) and not periods
    if concept.read_in == "sentence":
        return parse_measured(text, reading.vocabulary, periods, trends, today, bounds)
    end = _name_end(mention, names, reading)
    return measured_near(
        text, mention.start, end, reading.vocabulary, periods, trends, today, bounds
    )


def _name_end(mention: Mention, names: tuple[str, ...], reading: CaseReading) -> int:
    """Where the name ends once names overlapping the mention are joined to it: matches never
    overlap, so in "Additional sessions requested: 8" the name found is "Additional sessions"
    and "sessions requested", which the number follows, has to be looked for again."""
    offset, end = mention.start + 1, mention.end
    window = mention.sentence.text[offset : end + _OVERLAP_REACH]
    overlapping = [
        offset + stop for start, stop in reading.find_in(window, names) if 0 < start < end - offset
    ]
    return max([end, *overlapping])


def _reads_trends(concept: QuantityAtom | QuantityInput) -> bool:
    return isinstance(concept, QuantityAtom) and concept.measure == "relative_change"


def _is_period(unit: str) -> bool:
    """Whether `unit` measures days or longer: a span between two dates is then a value."""
    days = convert(1, unit, "day")
    return days is not None and days >= 1


def _in_unit(
    measured: Measured, unit: str, concept: QuantityAtom | QuantityInput
) -> tuple[float, float] | None:
    """The value in `unit`; without a stated unit, the first reading that is plausible, a
    bare decimal below 1 in percent read as a share ("0.80" of nights is 80 percent)."""
    if measured.unit is None and concept.unit_required:
        return None
    if measured.unit is None and _share(measured, unit):
        measured = replace(measured, unit="dimensionless")
    if measured.unit is not None or concept.plausible is None:
        converted = measured.in_unit(unit)
        if converted is None or concept.plausible is None:
            return converted
        low, high = concept.plausible
        return converted if low <= converted[0] <= high else None
    low, high = concept.plausible
    for candidate in (None, *concept.accepted_units):
        read_as = measured if candidate is None else replace(measured, unit=candidate)
        converted = read_as.in_unit(unit)
        if converted is not None and low <= converted[0] <= high:
            return converted
    return None


def _measured_on(text: str, measured: Measured, written: dt.date) -> dt.date | None:
    """The date a sentence gives its value ("HbA1c 8.1% (2021)", "A1c 7.2% on 2026-01-05"), if any:
    for `select: latest`, an old value quoted in a new note is still old."""
    points = [p for p in find_dates(text, written) if abs(p.start - measured.end) <= 30]
    if not points:
        return None
    return min(points, key=lambda p: abs(p.start - measured.end)).date


def _qualified(mention: Mention, words: tuple[str, ...], reading: CaseReading) -> bool:
    """Whether one of `words` stands right before the mention ("Residual AHI") or in the title
    of its document ("device download report"; not where it names the form's kind: "prior
    authorization request")."""
    if not words:
        return False
    document = reading.case.document(mention.sentence.doc_id)
    title = document.title if document is not None else ""
    for start, end in reading.find_in(title, tuple(reading.vocabulary.form_kinds)):
        title = title[:start] + " " * (end - start) + title[end:]
    return _preceded_by(mention, words, reading) or bool(reading.find_in(title, words))


def _of_excepted_kind(
    view: FactView, names: tuple[str, ...], excepts: tuple[str, ...], reading: CaseReading
) -> bool:
    """Whether the fact speaks only of a kind the finding leaves out: its value or quote names
    one ("single febrile seizure at 18 months") and, that kind's words set aside, no alias."""
    if not excepts:
        return False
    value = view.fact.value
    texts = [value if isinstance(value, str) else "", view.quote]
    excepted = False
    for text in texts:
        for start, end in reading.find_in(text, excepts):
            text = text[:start] + " " * (end - start) + text[end:]
            excepted = True
        if reading.find_in(text, names):
            return False
    return excepted


def _named_other(view: FactView, words: tuple[str, ...], reading: CaseReading) -> bool:
    """Whether one of `words` stands in the fact's name (`residualAHI`, `supervising_physician`):
    the fact is about another measurement or person of the same name."""
    return bool(words) and bool(reading.find_in(" ".join(view.every_word), words))


def _preceded_by(mention: Mention, words: tuple[str, ...], reading: CaseReading) -> bool:
    """Whether one of `words` stands right before the mention ("Supervising practitioner")."""
    return _stands_before(mention.sentence.text, mention.start, words, reading)


def _stands_before(text: str, start: int, words: tuple[str, ...], reading: CaseReading) -> bool:
    before = text[max(0, start - 30) : start]
    return bool(words) and bool(reading.find_in(before, words))


def _fact_measures(view: FactView, reading: CaseReading, trends: bool) -> list[Measured]:
    value, unit = view.fact.value, view.fact.unit
    if trends:  # a fact's number is a score, not a change
        return _trends_in(value, reading)
    pint_unit = (reading.vocabulary.unit_for(unit) or unit) if unit else None
    named = pint_unit is None and bool(view.words) and not _numbered(view.words)
    if named:
        pint_unit = reading.vocabulary.unit_for(view.words[-1])  # `height_cm`, `weightLb`
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        found = [Measured(float(value), float(value), None, 0, 0)]
    elif isinstance(value, str):
        found = parse_measured(value, reading.vocabulary)
    else:
        return []
    return [
        replace(m, unit=m.unit or (None if named and _share(m, pint_unit) else pint_unit))
        for m in found
    ]


def _share(measured: Measured, unit: str | None) -> bool:
    """Whether a bare number is a share that a field named in percent holds as a decimal
    (`adherence_pct`: 0.80); read without the field's unit, it is then taken as one."""
    return unit == "percent" and 0 < measured.low <= measured.high < 1


def _numbered(words: tuple[str, ...]) -> bool:
    """Whether the field name's last word follows a number: `ahi_4pct` names a 4% rule, not
    a value in percent."""
    return len(words) > 1 and words[-2].replace(".", "").isdigit()


def _trends_in(value: object, reading: CaseReading) -> list[Measured]:
    return parse_measured(value, reading.vocabulary, trends=True) if isinstance(value, str) else []


def _derived(
    derivation: Derivation, unit: str, reading: CaseReading, min_confidence: float
) -> list[_Value]:
    """Values computed from the inputs' values (every combination; disagreement shows up),
    each as old as its oldest input: an old weight with today's height is an old BMI."""
    inputs = {
        name: _values(spec, spec.unit, reading, min_confidence)
        for name, spec in derivation.inputs.items()
    }
    if not all(inputs.values()):
        return []
    combos: list[dict[str, _Value]] = [{}]
    for name, candidates in inputs.items():
        combos = [{**combo, name: c} for combo in combos for c in candidates[:3]]
    values: list[_Value] = []
    for combo in combos[:9]:
        low = _evaluate(derivation.formula, {n: v.low for n, v in combo.items()})
        high = _evaluate(derivation.formula, {n: v.high for n, v in combo.items()})
        if low is None or high is None:
            continue
        parts = ", ".join(f"{v.text} {_number(v.low)}" for v in combo.values())
        first = next(iter(combo.values()))
        dates = [v.date for v in combo.values() if v.date is not None]
        values.append(
            _Value(
                round(min(low, high), 2),
                round(max(low, high), 2),
                first.evidence,
                f"computed from {parts}",
                all(v.trusted for v in combo.values()),
                min(dates) if dates else None,
            )
        )
    return values


def _evaluate(formula: str, names: dict[str, float]) -> float | None:
    """Arithmetic over named numbers (the schema allows nothing else in a formula)."""

    def walk(node: ast.AST) -> float:
        match node:
            case ast.Expression(body=body):
                return walk(body)
            case ast.Constant(value=value) if isinstance(value, int | float):
                return float(value)
            case ast.Name(id=name):
                return names[name]
            case ast.UnaryOp(op=ast.USub(), operand=operand):
                return -walk(operand)
            case ast.BinOp(left=left, op=op, right=right):
                return _BINARY[type(op)](walk(left), walk(right))
        raise ValueError(f"unsupported formula node {type(node).__name__}")

    try:
        return walk(ast.parse(formula, mode="eval"))
    except (ZeroDivisionError, OverflowError, KeyError, ValueError):
        return None


_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}


def _number(value: float) -> str:
    return f"{value:g}"


# --- time windows -------------------------------------------------------------------------

_UNIT_DAYS = {"days": 1.0, "weeks": 7.0, "months": 365.25 / 12, "years": 365.25}


@dataclass(frozen=True, slots=True)
class _Elapsed:
    """How long before the reference point the event happened (None: documented absent)."""

    days: float | None
    evidence: CaseEvidence
    note: str
    trusted: bool
    date: dt.date | None
    span: tuple[float, float] | None = None
    """Fewest and most days it may be, when the record names a period, not a day."""


def _time_window(
    atom: TimeWindowAtom, reading: CaseReading, min_confidence: float
) -> list[_Observation]:
    reference = reading.as_of
    if atom.reference is not None:
        dates = _event_dates(atom.reference, reading)
        if not dates:
            return []
        reference = max(dates)
    observations = []
    found = _elapsed(atom, reading, reference, min_confidence)
    exact = [e.days for e in found if e.days is not None and e.span is None and e.trusted]
    for elapsed in found:
        if elapsed.span is not None and any(_within(day, elapsed.span) for day in exact):
            continue  # "since October" agrees with the onset date 2025-10-10; the date decides
        if elapsed.days is None:
            observations.append(
                _Observation(_Says.FAILS, elapsed.evidence, elapsed.note, elapsed.trusted)
            )
            continue
        says = _Says.HOLDS if _in_window(atom, elapsed.days) else _Says.FAILS
        note = f"{elapsed.note}: {elapsed.days:.0f} days before"
        if elapsed.span is not None and _straddles(atom, *elapsed.span):
            says = _Says.PARTLY  # "MI in 2025" against a 40-day window near New Year
            note = f"{elapsed.note}: {elapsed.span[0]:.0f} to {elapsed.span[1]:.0f} days before"
        observations.append(
            _Observation(says, elapsed.evidence, note, elapsed.trusted, elapsed.date)
        )
    return observations


def _within(day: float, span: tuple[float, float]) -> bool:
    return span[0] <= day <= span[1]


def _in_window(atom: TimeWindowAtom, days: float) -> bool:
    low, high = _window(atom)
    return low <= days <= high


def _straddles(atom: TimeWindowAtom, fewest: float, most: float) -> bool:
    """Whether a period of possible days lies partly inside the window and partly outside."""
    low, high = _window(atom)
    return fewest <= high and most >= low and not (low <= fewest and most <= high)


def _window(atom: TimeWindowAtom) -> tuple[float, float]:
    amount = atom.amount * _UNIT_DAYS[atom.unit]
    if atom.relation == "within":
        return -1, amount
    if atom.relation == "at_least":
        return amount, math.inf
    return amount, (atom.amount_max or atom.amount) * _UNIT_DAYS[atom.unit]


def _elapsed(
    atom: TimeWindowAtom, reading: CaseReading, reference: dt.date, min_confidence: float
) -> list[_Elapsed]:
    names = reading.names(atom.concept, atom.aliases)
    found: list[_Elapsed] = []
    for view in reading.facts_named(names, atom.codes):
        found.extend(_fact_elapsed(view, reading, reference, _trusted(view, min_confidence)))
    mentions = reading.mentions(names)
    timings = {id(m): _timing_near(m, reading, reference) for m in mentions if not m.stance.negated}
    dated_in = {m.sentence.doc_id for m in mentions if timings.get(id(m)) is not None}
    for mention in _about(mentions):
        sentence = mention.sentence
        if mention.stance.negated:
            found.append(
                _Elapsed(None, sentence.evidence(), f"{mention.text!r} negated", True, None)
            )
            continue
        timing = timings[id(mention)]
        if timing is None and sentence.doc_id not in dated_in:
            timing = _dated_by_report(mention, names, reading, reference)
        if timing is not None:
            days, span = timing
            found.append(
                _Elapsed(days, sentence.evidence(), mention.text, True, sentence.date, span)
            )
    return found


_Timing = tuple[float, tuple[float, float] | None]
"""Days from an event to the reference point, and their range when a period dates it."""


def _timing_near(mention: Mention, reading: CaseReading, reference: dt.date) -> _Timing | None:
    """Days from the mentioned event to `reference`, from the nearest date or duration."""
    sentence = mention.sentence
    written = sentence.date or reading.as_of
    candidates: list[tuple[int, _Timing]] = []
    points = find_dates(sentence.text, written) + month_only(sentence.text, written)
    beside = year_beside(sentence.text, mention.start, mention.end)
    if beside is not None and not any(p.start <= beside.start < p.end for p in points):
        points.append(beside)
    for point in points:
        if not _date_of(mention, point.start) or point.surely_after(written):
            continue  # a date after the note was written is a plan, not when it happened
        distance = min(abs(point.start - mention.end), abs(mention.start - point.end))
        candidates.append((distance, _days_before(point, reference, written)))
    shift = (reference - written).days
    for days, start, end in find_durations(sentence.text):
        distance = min(abs(start - mention.end), abs(mention.start - end))
        candidates.append((distance, (days + shift, None)))
    for days, bound, start, end in find_bounded_durations(sentence.text):
        if unchecked(sentence.text, start):
            continue  # "[ ] < 12 weeks  [x] >= 12 weeks": the option not chosen
        distance = min(abs(start - mention.end), abs(mention.start - end))
        low, high = _open_towards(bound, (days + shift, days + shift))
        low = max(low, float(shift))  # "< 12 weeks" was at least 0 when it was written
        candidates.append((distance, (low if bound[0] == ">" else high, (low, high))))
    right_after = duration_right_after(sentence.text, mention.end)
    if right_after is not None:
        candidates.append((0, (right_after[0] + shift, None)))
    if not candidates:
        return None
    return min(candidates, key=lambda candidate: (candidate[0], candidate[1][0]))[1]


def _dated_by_report(
    mention: Mention, names: tuple[str, ...], reading: CaseReading, reference: dt.date
) -> _Timing | None:
    """The date of a report whose title names the event ("Cardiac catheterization / staged
    PCI report"), for a mention in it that states the event as done and gives no date of its
    own. The caller asks only where the report dates the event nowhere ("Discharge summary -
    NSTEMI admission" that gives "NSTEMI, 01/02/2026" dates its other mentions of it)."""
    sentence = mention.sentence
    if sentence.date is None or not mention.stance.affirmed:
        return None
    document = reading.case.document(sentence.doc_id)
    if document is None or not reading.find_in(document.title, names):
        return None
    return float((reference - sentence.date).days), None


def _days_before(point: TimePoint, reference: dt.date, written: dt.date) -> _Timing:
    """Days before `reference`; a period that runs past the day the record was written ends
    there, since what it reports had happened by then ("PCI in 2026", written in March)."""
    first, last = point.days
    last = max(first, min(last, written))
    days = float((reference - min(point.date, last)).days)
    if first == last:
        return days, None
    return days, (float((reference - last).days), float((reference - first).days))


_DATE_LEAD = re.compile(r"([A-Za-z][\w/&-]*)[\s(:,\-]*$")
_DATE_LINKS = frozenset(
    [
        "on",
        "in",
        "dated",
        "date",
        "of",
        "at",
        "from",
        "since",
        "performed",
        "done",
        "was",
        "were",
        "is",
        "completed",
        "placed",
        "s/p",
        "post",
        "status",
        "underwent",
        "had",
        "onset",
        "began",
        "started",
        "starting",
        "last",
        "prior",
        "previous",
        "around",
        "about",
        "approximately",
        "ago",
        "before",
        "after",
        "by",
        "until",
        "to",
        "mid",
        "early",
        "late",
        "the",
    ]
)


def _date_of(mention: Mention, date_start: int) -> bool:
    """Whether a date in the sentence can be the mentioned event's: not when another noun
    stands right before it ("TTE 2026-05-08" dates the echo, not the CABG mentioned nearby),
    unless that noun continues the event's own phrase ("DES to LAD 02/04/26")."""
    text = mention.sentence.text
    if mention.start <= date_start <= mention.end + 3:
        return True
    lead = _DATE_LEAD.search(text[max(0, date_start - 40) : date_start])
    if lead is None:
        return True
    word_end = date_start - (len(lead.group(0)) - len(lead.group(1)))
    if mention.start < word_end <= mention.end:
        return True
    word_start = word_end - len(lead.group(1))
    if _CHANGED_SINCE.search(text, max(0, word_start - 30), word_end):
        return False
    if word_start >= mention.end and _SAME_PHRASE.fullmatch(text, mention.end, word_start):
        return True
    return lead.group(1).lower().rstrip("-") in _DATE_LINKS


_CHANGED_SINCE = re.compile(
    r"\b(?:worse|worsened|worsening|better|improved|improving|increased|increasing|decreased"
    r"|flared|flaring|escalated|intensified|changed)(?:[^\S\n]+\w+){0,2}[^\S\n]+since$",
    re.I,
)
"""A "since" that dates a change of the thing ("a little worse since Feb"), not its onset."""
_SAME_PHRASE = re.compile(
    r"(?:[^\S\n]+(?!(?:and|or|with|then|plus|but)\b)[\w/-]+){0,2}[^\S\n]+", re.I
)
"""At most two words and no stop or conjunction between a name and the noun that ends it."""


def _fact_elapsed(
    view: FactView, reading: CaseReading, reference: dt.date, trusted: bool
) -> list[_Elapsed]:
    value, evidence = view.fact.value, view.evidence()
    note = f"{view.fact.field} = {_short(value)}"
    written = view.date or reading.as_of
    if isinstance(value, bool):
        return [] if value else [_Elapsed(None, evidence, note, trusted, view.date)]
    if isinstance(value, dt.date):
        return [_Elapsed(float((reference - value).days), evidence, note, trusted, view.date)]
    if _calendar_year(value, reference):
        value = str(int(value))  # `pci.last_year`: 2017 is a year, not 2017 years
    if isinstance(value, str):
        if fact_presence(view, reading) is False:
            return [_Elapsed(None, evidence, note, trusted, view.date)]
        dates = find_dates(value, written) or year_at_either_end(value)
        if dates:
            days, span = _days_before(dates[0], reference, written)
            return [_Elapsed(days, evidence, note, trusted, view.date, span)]
    quoted = find_dates(evidence.quote, written) if evidence.doc_id else []
    if quoted:
        # The sentence the fact was read from dates the event: the document wins over a
        # duration an extractor computed from it, whatever day it counted to.
        days, span = _days_before(quoted[0], reference, written)
        quote_note = f"{note} ({evidence.quote})"
        return [_Elapsed(days, evidence, quote_note, trusted, view.date, span)]
    for measured in _fact_measures(view, reading, trends=False):
        unit = measured.unit or _unit_from_words(view.words)
        days = convert(measured.low, unit, "day") if unit else None
        if days is not None:
            # "14 weeks" of pain or "69 days ago", as written in a note: add the time since.
            elapsed = days + (reference - written).days
            return [_Elapsed(elapsed, evidence, note, trusted, view.date)]
    return []


def _calendar_year(value: object, reference: dt.date) -> bool:
    """Whether a fact's number is a year of the calendar: no duration runs for centuries."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and float(value).is_integer()
        and _FIRST_YEAR <= value <= reference.year + 1
    )


_FIRST_YEAR = 1900


def _unit_from_words(words: tuple[str, ...]) -> str | None:
    for word in reversed(words):
        for unit in ("day", "week", "month", "year"):
            if word.startswith(unit[:3]) and unit.startswith(word[:3]):
                return unit
    return None


def _event_dates(event: Concept, reading: CaseReading) -> list[dt.date]:
    names = reading.names(event.concept, event.aliases)
    dates: list[dt.date] = []
    for view in reading.facts_named(names, event.codes):
        if isinstance(view.fact.value, dt.date):
            dates.append(view.fact.value)
        elif isinstance(view.fact.value, str):
            dates.extend(p.date for p in find_dates(view.fact.value, view.date))
    for mention in _about(reading.mentions(names)):
        if not mention.stance.negated:
            points = find_dates(mention.sentence.text, mention.sentence.date)
            dates.extend(p.date for p in points)
    return dates


# --- categories ---------------------------------------------------------------------------

_WINDOW_AFTER = 40
_WINDOW_BEFORE = 25
_NEW_CLAUSE = re.compile(
    r"\b(?:after|before|while|when|since|upon)\s+[a-z]+ing\b|\bbecause\b", re.IGNORECASE
)
"""Words that open another clause: in "ordered by me after reviewing neurology records" the
value of "ordered by" ends before "after" ("back pain since 2023 - mechanical" goes on)."""


_Found = tuple[str, CaseEvidence, str, bool, dt.date | None]
"""A category value found: the value, its evidence, a note, whether trusted, its date."""


def _category(
    atom: CategoryAtom, reading: CaseReading, min_confidence: float
) -> list[_Observation]:
    names = reading.names(atom.concept, atom.aliases)
    value_names = {value: tuple(words) for value, words in atom.values.items()}
    other = tuple(atom.not_when)
    found: list[_Found] = []
    for view in reading.facts_named(names, atom.codes):
        if _named_other(view, other, reading):
            continue  # `supervising_physician`: another person of the same role
        text = _category_text(view.fact.value)
        for value in _values_in(text, value_names, reading)[:1]:
            found.append(
                (
                    value,
                    view.evidence(),
                    f"{view.fact.field} = {_short(text)}",
                    _trusted(view, min_confidence),
                    view.date,
                )
            )
    documents = _documents_naming(atom.in_documents_naming, reading)
    for mention in _about(reading.mentions(names)):
        if mention.stance.negated or not _read_in(mention, documents):
            continue
        if _preceded_by(mention, other, reading):
            continue
        text = mention.sentence.text
        values = _nearest_value(text, mention, value_names, reading)
        for value in values:
            found.append(
                (
                    value,
                    mention.sentence.evidence(),
                    f"{mention.text}: {value}",
                    True,
                    mention.sentence.date,
                )
            )
    if atom.author_of_documents_naming:
        authored = _documents_naming(atom.author_of_documents_naming, reading, as_done=True)
        for sentence, role in reading.authors(authored or set()):
            for value in _values_in(role, value_names, reading)[:1]:
                found.append(
                    (value, sentence.evidence(), f"author {role!r}: {value}", True, sentence.date)
                )
    if atom.value_anywhere:
        for value, words in value_names.items():
            for mention in _about(reading.mentions(words)):
                if mention.stance.negated or mention.stance.possible:
                    continue
                if not _read_in(mention, documents):
                    continue
                found.append(
                    (
                        value,
                        mention.sentence.evidence(),
                        f"{mention.text!r}",
                        True,
                        mention.sentence.date,
                    )
                )
    if atom.select == "request":
        found = _requested(found)
    observations = _category_observations(atom, found)
    return _latest(observations) if atom.select == "latest" else observations


def _requested(
    found: list[_Found],
) -> list[_Found]:
    """The values the request states, if it states any; else every value found."""
    stated = [item for item in found if (item[1].field or "").startswith("request.")]
    return stated or found


def _documents_naming(
    words: list[str], reading: CaseReading, *, as_done: bool = False
) -> set[str] | None:
    """The documents that name one of `words`, in any stance (a note that rules TMS out still
    speaks of it), or with `as_done` only those that state it as done (a consult that leaves
    the order "to be placed by PCP" is not the note that places it); None when there are no
    words: every document is read."""
    if not words:
        return None
    mentions = reading.mentions(reading.names(words[0], words))
    return {m.sentence.doc_id for m in mentions if not as_done or m.stance.affirmed}


def _read_in(mention: Mention, documents: set[str] | None) -> bool:
    return documents is None or mention.sentence.doc_id in documents


def _nearest_value(
    text: str, mention: Mention, value_names: dict[str, tuple[str, ...]], reading: CaseReading
) -> list[str]:
    """The value named closest to the concept, after it ("GOLD stage 3") or before it
    ("continued coverage after the initial period" is continued); an option whose box is
    unchecked ("[ ] Initial course [x] Additional sessions") is no value; of two names from the
    same place the longer wins ("[x] Physician assistant" names no physician)."""
    after_start = mention.end
    before_start = max(0, mention.start - _WINDOW_BEFORE)
    while 0 < before_start < mention.start and text[before_start - 1].isalnum():
        before_start += 1  # a word the window cuts is not read ("…RE PRIOR AUTHORIZATION")
    after = text[after_start : after_start + 2 * _WINDOW_AFTER]
    clause_end = _NEW_CLAUSE.search(after)
    if clause_end is not None:
        after = after[: clause_end.start()]
    before = text[before_start : mention.start]
    spans: dict[tuple[int, int, str], tuple[int, int]] = {}
    for value, words in value_names.items():
        for start, end in reading.find_in(after, words):
            if start < _WINDOW_AFTER and not unchecked(text, after_start + start):
                spans[(start, start - end, value)] = (after_start + start, after_start + end)
        for start, end in reading.find_in(before, words):
            if not unchecked(text, before_start + start):
                key = (mention.start - (before_start + end), start - end, value)
                spans[key] = (before_start + start, before_start + end)
    stated = [
        key
        for key, stance in zip(
            spans, reading.context.stances(text, list(spans.values())), strict=True
        )
        if stance.affirmed
    ]  # "ICD requested (not secondary prevention)", "considered for secondary": no value
    return [min(stated)[2]] if stated else []


def _category_observations(atom: CategoryAtom, found: list[_Found]) -> list[_Observation]:
    allowed = set(atom.allowed)
    documented = {value for value, _, _, trusted, _ in found if trusted}
    enough = len(documented & allowed) >= atom.min_count
    observations = []
    for value, evidence, note, trusted, date in found:
        if value in allowed:
            says = _Says.HOLDS if enough or not trusted else _Says.FAILS
        else:
            says = _Says.FAILS if atom.min_count == 1 or not enough else None
            if says is None:
                continue
        if value in allowed and not enough and atom.min_count > 1:
            note = f"{note} (only {len(documented & allowed)} of {atom.min_count})"
        observations.append(_Observation(says, evidence, note, trusted, date))
    return observations


def _category_text(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _values_in(
    text: str, value_names: dict[str, tuple[str, ...]], reading: CaseReading
) -> list[str]:
    """The values named in `text`, in order of appearance; of two named from the same place the
    longer name wins ("Physician assistant" is no physician)."""
    hits: list[tuple[int, int, str]] = []
    for value, words in value_names.items():
        spans = reading.find_in(text, words)
        if spans:
            start, end = min(spans, key=lambda span: (span[0], span[0] - span[1]))
            hits.append((start, start - end, value))
    return [value for _, _, value in sorted(hits)]
