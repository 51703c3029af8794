"""A case read once per evaluation: sentences with their stance, and facts by their words.

Binding an atom to a case means finding its names (concept, aliases, synonyms) in three places:
fact field names (normalised words), fact values, and document sentences. A sentence mention
carries a stance read by medspaCy's ConText (negated, about a family member, hypothetical,
only possible), so "denies stroke" and "father had a stroke" never count as the patient's
stroke. Every scan here is linear in the case's text: sentences are bounded in length, and each
set of names is compiled into one pattern and searched once per case.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Literal

from reasoning_service.conditions.vocabulary import Vocabulary, normalise_words
from reasoning_service.models import CaseBundle, CaseEvidence, Fact
from reasoning_service.models.conditions import AtomCode
from reasoning_service.tools.citations import is_instruction_like

if TYPE_CHECKING:
    from medspacy.context import ConText, ConTextModifier
    from spacy.language import Language
    from spacy.tokens import Span

__all__ = [
    "CaseReading",
    "ContextReader",
    "FactView",
    "Mention",
    "Sentence",
    "Stance",
    "form_value",
    "part_defers",
    "unchecked",
    "value_defers",
]

_STANCES_KEPT = 50_000
_OUTCOME_REACH = 2
"""Words after a negation that follows a name in which an outcome makes it the outcome's
negation ("never fully resolved", "not improved")."""
MAX_SENTENCE_CHARS = 400
"""Longer runs of text are cut at whitespace, so no scan is quadratic in a page."""
_ABBREVIATIONS = (
    "Dr.",
    "Mr.",
    "Mrs.",
    "Ms.",
    "St.",
    "Mt.",
    "vs.",
    "e.g.",
    "i.e.",
    "incl.",
    "approx.",
)
"""Stops that end a title or an abbreviation, never a sentence ("St. Brigid", "approx. 3 mo")."""
_ABBREVIATED = re.compile(r"\b(?:" + "|".join(re.escape(word) for word in _ABBREVIATIONS) + ")")
_SENTENCE_END = re.compile(
    r"(?<=[.!?;])(?<![:,(/][A-Z]\.)(?<![:,(/] [A-Z]\.)(?<!^[A-Z]\.)(?<!\b[A-Z]\. [A-Z]\.)"
    r"(?<!\bDr\. [A-Z]\.)(?<!\bL\.Ac\.)(?<![^\S\n]\.)(?<![^\S\n]\?)(?<!\.\.)"
    + "".join(rf"(?<!\b{re.escape(word)})" for word in _ABBREVIATIONS)
    + r"[\"'”’)\]]?(?:(?<=\?)[^\S\n]++(?!\||(?:Y|N|Yes|No)\b|[\[(☐☑☒])|(?<!\?)[^\S\n]++(?!\|))"
    + r"|\s*\n\s*",
    re.MULTILINE,
)
"""A stop and space, or a line break; not the stop of an initial ("provider: G. Halvorsen",
"L. Marsh, MD", "visit w/ H. Brandt NP booked 2/16"), of a credential ("L.Ac.") or of an
abbreviation, nor a lone query mark ("referred for ? inflammatory back pain"), nor a form's
dot leader ("Y   .   (scheduled 02/20/26)", "Seizure ...... N") or a question's stop before
its answer or table cells ("Seizure ever?     N", "VF arrest? |  | X"), which would cut a
name from what the line says of it."""
_SHORT_CAPS = 4
"""An alias this short written in capitals ("MI", "VT") matches only in capitals in text."""


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence of a document page, with its exact place in the page."""

    index: int
    doc_id: str
    page: int
    start: int
    end: int
    text: str
    date: dt.date | None
    """The document's date, for "3 weeks ago" and for picking the latest value."""

    def evidence(self) -> CaseEvidence:
        return CaseEvidence(
            doc_id=self.doc_id,
            page=self.page,
            quote=self.text,
            char_start=self.start,
            char_end=self.end,
        )


@dataclass(frozen=True, slots=True)
class Stance:
    """What ConText says about one mention."""

    negated: bool = False
    family: bool = False
    hypothetical: bool = False
    possible: bool = False
    planned: bool = False
    """Hypothetical because it is still to come ("will schedule"): a planned thing is also
    hypothetical."""

    def __or__(self, other: Stance) -> Stance:
        """Either reading's cues count (the whole name's and its head's)."""
        return Stance(
            negated=self.negated or other.negated,
            family=self.family or other.family,
            hypothetical=self.hypothetical or other.hypothetical,
            possible=self.possible or other.possible,
            planned=self.planned or other.planned,
        )

    @property
    def about_patient(self) -> bool:
        """A real statement about this patient (negated or not)."""
        return not (self.family or self.hypothetical)

    @property
    def affirmed(self) -> bool:
        return self.about_patient and not (self.negated or self.possible)


@dataclass(frozen=True, slots=True)
class Mention:
    """A name found in a sentence, and its stance."""

    sentence: Sentence
    start: int
    end: int
    """Offsets inside `sentence.text`."""
    stance: Stance
    blank: bool = False
    """The name labels a form field left empty ("Adverse effects:"): asked, never answered."""

    @property
    def text(self) -> str:
        return self.sentence.text[self.start : self.end]


@dataclass(frozen=True, slots=True)
class FactView:
    """A fact (or a demographic/request field) with the words of its name."""

    fact: Fact
    words: tuple[str, ...]
    date: dt.date | None
    """Date of the document the fact was read from."""
    spelled: tuple[str, ...] = ()
    """`words` with the field name's abbreviations written in full (`hx` -> `history`)."""
    about_relative: bool = False
    """The field name says the fact is a relative's (`family_history.osa`, `fhx.dcm`)."""

    @property
    def every_word(self) -> tuple[str, ...]:
        """The field name's words as written, then spelled out."""
        return (*self.words, *self.spelled)

    @property
    def quote(self) -> str:
        """The words the fact was read from ("" when it cites none)."""
        return self.fact.source.quote if self.fact.source is not None else ""

    def named_by(self, key: tuple[str, ...]) -> bool:
        """Whether the field name has `key`'s words side by side, in any order, as written or
        spelled out."""
        return _contains(self.words, key) or _contains(self.spelled, key)

    def evidence(self) -> CaseEvidence:
        source = self.fact.source
        if source is not None and self.quote:
            return CaseEvidence(
                field=self.fact.field, doc_id=source.doc_id, page=source.page, quote=self.quote
            )
        return CaseEvidence(field=self.fact.field, quote=_value_text(self.fact.value))


class ContextReader:
    """medspaCy's ConText over single sentences: cues from its defaults plus the vocabulary's."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self._vocabulary = vocabulary
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, tuple[tuple[int, int], ...]], list[Stance]] = (
            OrderedDict()
        )

    def plans(self, value: str) -> bool:
        """Whether a form's value is a plan ("scheduled 03/12/2026", "to be done")."""
        return self._plans.match(value) is not None

    @cached_property
    def _plans(self) -> re.Pattern[str]:
        """A form value that is a plan ("[x] scheduled 03/12/2026"), by the vocabulary's cues."""
        cues = [c.literal for c in self._vocabulary.context_rules if c.category == "PLANNED"]
        if not cues:
            return re.compile(r"(?!)")
        words = "|".join(re.escape(cue) for cue in sorted(cues, key=len, reverse=True))
        return re.compile(rf"\s*(?:{words})\b", re.I)

    @cached_property
    def _pipeline(self) -> tuple[Language, ConText]:
        import spacy
        from medspacy.context import ConText, ConTextRule

        nlp = spacy.blank("en")
        ours = [
            ConTextRule(
                cue.literal,
                cue.category,
                pattern=cue.pattern,
                direction=cue.direction,
                max_scope=cue.max_scope,
            )
            for cue in self._vocabulary.context_rules
        ]
        replaced = {rule.literal.lower() for rule in ours}
        replaced |= {literal.lower() for literal in self._vocabulary.dropped_context_cues}
        defaults = ConText(nlp, rules="default").rules
        context = ConText(nlp, rules=None)
        context.add([rule for rule in defaults if rule.literal.lower() not in replaced] + ours)
        return nlp, context

    def stances(self, text: str, spans: list[tuple[int, int]]) -> list[Stance]:
        """The stance of each `(start, end)` span of `text` (one sentence).

        A "Label: content" line is read twice: the content alone decides negation (ConText's
        backward ": no" cue would otherwise swallow "PSH: No spine surgery"), the whole line
        decides family, hypothetical and possible ("Family history: stroke"). Forms are read as
        forms: a name that is itself the label takes its stance from the value after it
        ("GERD: denies", "Risk-benefit review: not completed", "SDM: deferred") unless the
        value negates an outcome ("Sertraline 8 wk: no response": sertraline was given), and an
        unchecked box before a name ("[ ] degree verified") is no statement that it is so.
        A name the patient declined ("ECT was offered and declined", "ECT discussed; pt
        declines") is negated, however hypothetical the offer made it sound; a name a negation
        excepts ("no seizures (other than ECT-induced)") is not.
        """
        whole = self._read(text, spans)
        stances: list[Stance] = []
        for (start, end), line in zip(spans, whole, strict=True):
            if _declined(text, start, end):
                stances.append(Stance(negated=True, family=line.family))
                continue
            form = self._form_stance(text, start, end)
            label_end, cut = _label_end(text, start), self._outcome_cut(text, end)
            own = (
                line
                if (label_end, cut) == (0, len(text))
                else self._read(text[label_end:cut], [(start - label_end, end - label_end)])[0]
            )
            if label_end and self._label_denies(text, label_end):
                unlabelled = f"{text[: label_end - 1]} {text[label_end:cut]}"
                own = self._read(unlabelled, [(start, end)])[0]
            excepted = _EXCEPTED.search(text, 0, start) is not None
            stances.append(
                Stance(
                    negated=(own.negated or form.negated) and not excepted,
                    family=line.family or own.family,
                    hypothetical=line.hypothetical or own.hypothetical or form.hypothetical,
                    possible=line.possible or own.possible,
                    planned=line.planned or own.planned or form.planned,
                )
            )
        return stances

    def _label_denies(self, text: str, label_end: int) -> bool:
        """Whether the label itself is a denial ("Denies:", "Negative for:"): its content is
        then read with it, as ConText reads "Denies daytime sleepiness, memory problems"."""
        label = re.split(r"[.;:]", text[: label_end - 1])[-1].strip()
        if not label or len(label.split()) > _LABEL_WORDS:
            return False
        probe = f"{label} finding"
        return self._read(probe, [(len(label) + 1, len(probe))])[0].negated

    def _form_stance(self, text: str, start: int, end: int) -> Stance:
        """What a form line says about a name: its value ("X: denies") or its unchecked box."""
        leading = _leading_pair_answer(text, start)
        if leading is not None:
            return Stance(negated=leading == "no", hypothetical=leading == "unanswered")
        if unchecked(text, start):
            return Stance(hypothetical=True)
        if _in_deferred_value(text, start):
            return Stance(hypothetical=True)
        column = _column_answer(text, end)
        if column == "unanswered":
            return Stance(hypothetical=True)
        if column is not None:
            return Stance(negated=column == "no")
        colon = _answer_mark(text, end)
        between = _ABBREVIATED.sub(" ", _LEADER.sub(" ", text[end:colon]))
        stops = _ASIDE.sub(" ", between)
        if colon < 0 or colon - end > 60 or ":" in text[start:end] or "." in stops:
            return Stance()
        field = _NEXT_FIELD.search(text, end, colon + 1)
        if field is not None:
            return Stance()  # the colon is another field's: "…, DC    Supervising physician: none"
        value = _yes_no(text, colon) or form_value(text[colon + 1 :])
        if value is None or value_defers(value):
            return Stance(hypothetical=True, planned=bool(value and self._plans.match(value)))
        question = between.split("?")[0] if "?" in text[end : colon + 1] else None
        if question is not None and _ASKS_OF_ANOTHER.search(_LIST_GOES_ON.sub(" ", question)):
            return Stance()  # "Pain related to prior surgery? [x] no" denies the relation
        opening = text.rfind("(", 0, start)
        if (
            opening > text.rfind(")", 0, start)
            and ")" in between
            and _PURPOSE.match(text, opening, start) is not None
        ):
            return Stance(hypothetical=True)  # "Bone scan (done for back pain): negative"
        negates = self._value_negates(value)
        return Stance(negated=negates == "name")

    def _outcome_cut(self, text: str, end: int) -> int:
        """Where the name's own part of the line ends: at the next field of a form's line
        ("Rendering provider: B. Kowalski, DC    Supervising physician: none"); before a
        "Label: no response" value, which negates what came of the name, not the name
        ("Sertraline 8 wk: no response"); otherwise the line's end."""
        field = _NEXT_FIELD.search(text, end)
        if field is not None and "\n" not in text[end : field.start()]:
            return field.start()
        colon = _next_label(text, end)
        return colon if self._value_negates(text[colon + 1 :]) == "outcome" else len(text)

    def _value_negates(self, value: str) -> Literal["name", "outcome"] | None:
        """What a form's value negates: its label ("none"), an outcome of it ("no clinically
        significant response", "without benefit"), or nothing."""
        negation = _VALUE_NEGATES.match(value)
        if negation is None:
            return None
        clause = re.split(r"[;.,]", value[negation.end() :], maxsplit=1)[0]
        return "outcome" if self._vocabulary.names_outcome(clause) else "name"

    def _read(self, text: str, spans: list[tuple[int, int]]) -> list[Stance]:
        """ConText over one sentence, remembered: atoms of one case share their sentences."""
        key = (text, tuple(spans))
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None:
                return seen
            stances = self._run(text, spans)
            self._seen[key] = stances
            if len(self._seen) > _STANCES_KEPT:
                self._seen.popitem(last=False)
            return stances

    def _run(self, text: str, spans: list[tuple[int, int]]) -> list[Stance]:
        nlp, context = self._pipeline
        doc = nlp.make_doc(text)
        for position, token in enumerate(doc):
            token.is_sent_start = position == 0
        entities = [
            doc.char_span(start, end, label="TARGET", alignment_mode="expand")
            for start, end in spans
        ]
        doc.ents = _non_overlapping(entity for entity in entities if entity is not None)
        context(doc)
        by_start = {entity.start_char: entity for entity in doc.ents}
        return [
            self._stance_of(by_start.get(entity.start_char) if entity is not None else None)
            for entity in entities
        ]

    def _stance_of(self, entity: Span | None) -> Stance:
        if entity is None:
            return Stance()
        # A cue inside the name is part of it ("benefit vs risk"), no doubt about it.
        cues = [
            cue
            for cue in entity._.modifiers
            if not entity.start <= cue.modifier_span[0] < cue.modifier_span[1] <= entity.end
        ]
        categories = {cue.category for cue in cues}
        hypothetical = "HYPOTHETICAL" in categories
        possible = "POSSIBLE_EXISTENCE" in categories
        # "will schedule an SDM visit" plans the visit; "will consider stroke workup" plans no
        # stroke: another hypothetical cue makes the name no longer the thing planned.
        planned = "PLANNED" in categories
        return Stance(
            negated=any(self._negates(cue, entity) for cue in cues),
            family="FAMILY" in categories,
            hypothetical=hypothetical or planned,
            possible=possible,
            planned=planned and not (hypothetical or possible),
        )

    def _negates(self, cue: ConTextModifier, entity: Span) -> bool:
        """Whether a cue negates the name itself. Not a cue that opens a compound ("no-flow
        time", "no-show"), nor one whose negated thing is an outcome: between the cue and the
        name ("no real change in back pain", "no response to sertraline") or right after a cue
        that follows the name ("back pain, never fully resolved"), or itself negated ("not
        resolved"): the pain was there, the drug was given."""
        if cue.category != "NEGATED_EXISTENCE":
            return False
        doc = entity.doc
        cue_span = doc[cue.modifier_span[0] : cue.modifier_span[1]]
        if doc.text[cue_span.end_char : cue_span.end_char + 1] == "-":
            return False
        if self._vocabulary.names_outcome(cue_span.text) and _NEGATION_BEFORE.search(
            doc[max(0, cue_span.start - _OUTCOME_REACH) : cue_span.start].text
        ):
            return False  # "back pain not resolved": the outcome is negated, the pain remains
        if cue_span.end <= entity.start:
            between = doc.text[cue_span.end_char : entity.start_char]
            if _DENIAL_ENDS.search(between):
                return False  # "no red flags, with a clear response"; "(no benefit), sertraline"
            return not self._vocabulary.names_outcome(between)
        if cue_span.start >= entity.end:
            after = doc[cue_span.end : cue_span.end + _OUTCOME_REACH].text
            return not self._vocabulary.names_outcome(after)
        return True


_DENIAL_ENDS = re.compile(r",[^\S\n]*with\b|\)[^\S\n]*[,;]", re.I)
"""Where a denial's reach ends before the next name: ", with" turns to what is there, and a
closing parenthesis ends the aside the denial stood in. (ConText's own terminating cues would
end a relative's scope there too: "father had an MI at 60, with a stroke at 70".)"""
_REST_OF_LABEL = re.compile(
    r"(?:[^()\n:]{0,40}\))?(?:[^\S\n]+[A-Za-z][\w/-]*){0,3}"
    r"(?:[^\S\n]*\([^()\n:]{0,60}\))?[^\S\n]*:[^\S\n]*"
)
"""The end of a label after the name: at most three more words and a parenthesis of what to
fill in ("Shared decision-making encounter (date / clinician / decision tool):"), then its
colon."""
_NEGATION_BEFORE = re.compile(r"\b(?:not|never|no|without|nor)\b|n't\b", re.I)
_VALUE_NEGATES = re.compile(
    r"\s*(?:(?:has|have|had|was|were|is|did|does)\s+)?"
    r"(?:no\b|n[^\S\n]*(?:$|[;,.(])|none\b|denie[sd]\b|negative\b|neg\b|absent\b|not\b|never\b"
    r"|declined\b|n/?a\b"
    r"|without\b|nil\b|deferred\b|incomplete\b)",
    re.I,
)
_PLANS = r"pending|to be\b|will be\b|planned|scheduled|awaiting|tbd\b"
"""Words that put a thing off to later."""
_VALUE_DEFERS = re.compile(
    rf"\s*(?:{_PLANS}|requested|to follow\b"
    r"|see\b|refer to\b|(?:available\s+)?(?:up)?on\s+request\b|not\s+(?:attached|included)\b"
    r"|unknown\b|unclear\b|undetermined\b|unverified\b|not\s+(?:known|verified|confirmed)\b)",
    re.I,
)
_PART_DEFERS = re.compile(rf"[(;,/\-–]\s*(?:{_PLANS}|not yet\b)", re.I)
_BOX = re.compile(r"\[\s*[xX✓✔]?\s*\]|[☐☑☒✓✔]|\(\s*[xX✓✔]?\s*\)|(?<![^\s:])_{2,}(?=[^\S\n]+\w)")
_CHECKED = re.compile(r"\[\s*[xX✓✔]\s*\]|[☑☒✓✔]|\(\s*[xX✓✔]\s*\)")
"""Boxes of a form: "[x]", "☒", "(X)", a bare tick "✓", and a blank "__" before an option
("__ Prior stroke" on a checklist whose ticks mark yes)."""
_BOX_AHEAD = re.compile(rf"[^\S\n]*(?:(?:Y|N|Yes|No)[^\S\n]*)?(?:{_BOX.pattern})", re.I)
"""Boxes right after a question, an option's word before its box or not ("?  Y [ ]  N [x]")."""
_YES_NO = r"Y(?:es)?[^\S\n]*/[^\S\n]*N(?:o)?[^\S\n]*:"
"""A "Y/N:" field's label ("Seizure hx Y/N: N")."""
_NEXT_FIELD = re.compile(rf"[^\S\n]{{3,}}(?!{_YES_NO})(?=[A-Z][\w /()&-]{{0,40}}:)")
"""A form line's next field, after a gap: "…, DC    Supervising physician: none"."""
_YES_NO_LABEL = re.compile(rf"\b{_YES_NO}$", re.I)
_YES_NO_ANSWER = re.compile(r"[^\S\n]*(Y|N|Yes|No)\b(?!/)", re.I)
_ANSWER_AHEAD = re.compile(rf"[^\S\n]*(?:{_BOX.pattern}|{_YES_NO})", re.I)
"""A question's or a dotted label's answer on the same line: a box or a "Y/N:" field."""
_LEADER = re.compile(r"\.{2,}")
"""Dots that lead a form's label to its answer ("Prior lumbar surgery ........ Y/N: N")."""


def form_value(value: str) -> str | None:
    """What a form's value says: the option whose box is checked ("[ ] completed [x] scheduled
    03/12" says "scheduled 03/12"), None when it lists boxes and none is checked or is a blank
    to fill in ("______"): a blank field says nothing; else the value without its brackets
    ("[pending]")."""
    boxes = list(_BOX.finditer(value))
    if not boxes:
        shown = value.strip().strip("[]").strip()
        return None if shown and not shown.strip("_") else shown
    checked = [box for box in boxes if _CHECKED.fullmatch(box.group())]
    if not checked:
        return None
    if len(checked) > 1:
        return value
    shown = value.strip()
    if not _BOX.match(shown) and _BOX_AT_END.search(shown):  # "Y [ ]  N [x]": option, box
        preceding = [box.end() for box in boxes if box.end() <= checked[0].start()]
        return value[max(preceding, default=0) : checked[0].start()].strip()
    following = [box.start() for box in boxes if box.start() > checked[0].start()]
    return value[checked[0].end() : min(following, default=len(value))].strip()


def value_defers(value: str) -> bool:
    """Whether a form's or a fact's value puts the thing off or elsewhere, or leaves it open:
    "pending", "scheduled 03/12", "to follow", "see EP note", "available upon request",
    "unknown", "not verified" state nothing done."""
    return _VALUE_DEFERS.match(value) is not None


def part_defers(value: str) -> bool:
    """Whether a later part of a value puts the thing off: "2026-02-20 (scheduled)", "ordered -
    pending". Unlike a whole value, a later part that only points elsewhere ("done (see
    attached)") takes nothing back."""
    return _PART_DEFERS.search(value) is not None


_CONNECTING = (
    r"(?:\s*(?:[,;:\-–]|(?:was|were|is|has|had|been|offered|discussed|recommended|suggested"
    r"|proposed|and|but|the|patient|pt|he|she|they|with|today|\d{1,2}/\d{2,4})\b))*"
)
_DECLINED = re.compile(
    rf"{_CONNECTING}(?:\s*(?:during|in|at|for|on|by)"
    rf"(?:\s+(?!(?:no|not|never|without)\b)[A-Za-z0-9'’]+){{1,3}}\b{_CONNECTING})?"
    r"\s*(?:declined|declines|refused|refuses)\b"
    r"(?!\s+(?:to|from|over|further|additional|more|another|other|dose|increase)\b)",
    re.I,
)
"""Right after a name, only connecting words and at most one short phrase of when or where
("during a severe episode"), then the patient's refusal of it. One phrase, not a repeat of
them: words the phrase and the connecting words could both read must not multiply the ways
to read a sentence."""
_EXCEPTED = re.compile(
    r"\b(?:other than|except(?: for)?|excluding|besides|apart from|aside from|outside(?: of)?)"
    r"\b[^,;()]*$",
    re.I,
)
"""An exception clause that runs, unbroken, up to the name: "none outside of ECT"."""
_OPTION_REACH = 60
"""How far after its box an option's words may stand: "[ ] Physician (MD/DO)"."""


def unchecked(text: str, start: int) -> bool:
    """Whether `start` stands in an option whose box is empty: "[ ] Retreatment", and the "MD"
    of "[ ] Physician (MD/DO) [x] Auxiliary personnel", are options the form did not choose, no
    statement that they are so. A label after the box ends its option ("[ ] N/A  Note: …").
    A line whose boxes follow their options ("PSG [ ]   HST Type IV [x]") is read that way."""
    line_start = text.rfind("\n", 0, start) + 1
    trailing = _trailing_box(text, line_start, start)
    if trailing is not None:
        return _CHECKED.fullmatch(trailing) is None
    boxes = list(_BOX.finditer(text, max(line_start, start - _OPTION_REACH), start))
    if not boxes:
        return False
    box = boxes[-1]
    return ":" not in text[box.end() : start] and _CHECKED.fullmatch(box.group()) is None


_LEADING_PAIR = re.compile(
    rf"[^\S\n]*(?:({_BOX.pattern})[^\S\n]*(?:Y|Yes)[^\S\n]*({_BOX.pattern})[^\S\n]*(?:N|No)"
    rf"|(?:Y|Yes)[^\S\n]*({_BOX.pattern})[^\S\n]*(?:N|No)[^\S\n]*({_BOX.pattern}))[^\S\n]+",
    re.I,
)
"""A yes/no pair of boxes that opens a checklist's row: "[ ] Y [x] N  Seizure / epilepsy"."""


def _leading_pair_answer(text: str, start: int) -> str | None:
    """The answer a yes/no pair of boxes at the head of the row gives the name on it ("yes",
    "no" or "unanswered"); None on any other line or when a label or box stands between."""
    line_start = text.rfind("\n", 0, start) + 1
    pair = _LEADING_PAIR.match(text, line_start)
    if pair is None or pair.end() > start or start - pair.end() > _OPTION_REACH:
        return None
    if ":" in text[pair.end() : start] or _BOX.search(text, pair.end(), start):
        return None
    yes, no = (box for box in pair.groups() if box is not None)
    ticked = (_CHECKED.fullmatch(yes) is not None, _CHECKED.fullmatch(no) is not None)
    return {(True, False): "yes", (False, True): "no", (False, False): "unanswered"}.get(ticked)


def _unanswered_question(text: str) -> bool:
    """Whether the sentence is a question left without an answer ("Reviewer: was this an acute
    MI?", "Stroke, TIA, brain tumor?"): it asks about a thing and states nothing of it."""
    return text.rstrip().endswith("?")


def _trailing_box(text: str, line_start: int, start: int) -> str | None:
    """The box after the option at `start`, on a line of options whose boxes follow them
    ("Qualifying study:  PSG [ ]   HST Type IV [x]"); None on any other line."""
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    options_start = max(line_start, _label_end(text, start))
    options = text[options_start:line_end].strip()
    if not options or _BOX.match(options) or not _BOX_AT_END.search(options):
        return None
    if _ADJACENT_BOXES.search(options):
        return None  # "Currently receiving ECT   [ ] [X]" (or "| [ ] | [X]"): under a Y/N header
    box = _BOX.search(text, start, line_end)
    if (
        box is None
        or box.start() - start > _OPTION_REACH
        or _ASKED_BEFORE.search(text[start : box.start()])
    ):
        return None  # a label's or a question's boxes answer it: "Prior MI?  Y [ ]  N [x]"
    return box.group()


_BOX_AT_END = re.compile(rf"(?:{_BOX.pattern})$")
_ASKED_BEFORE = re.compile(r"[:?]|(?<!\S)(?:Y|Yes)[^\S\n]*$")
"""A label, a question, or the "Y" of a yes/no pair before a box: the boxes answer the name."""
_ADJACENT_BOXES = re.compile(rf"(?:{_BOX.pattern})[^\S\n]*\|?[^\S\n]*(?:{_BOX.pattern})")


def _declined(text: str, start: int, end: int) -> bool:
    """Whether the name opens its clause and the patient's refusal of it follows: "ECT was
    offered and declined" (not "ECT discussed given medication intolerance; he declined")."""
    opening = text[: _label_end(text, start)] if ":" in text[:start] else ""
    before = text[len(opening) : start]
    return len(re.findall(r"\w+", before)) <= 2 and _DECLINED.match(text, end) is not None


_LABEL_WORDS = 4
"""The longest label read as a possible denial ("Patient denies:", "ROS negative for:")."""


def _label_end(text: str, start: int) -> int:
    """Where the content after a "Label:" that precedes `start` begins (0 without one)."""
    colon = text.rfind(":", 0, start)
    while _in_clock_time(text, colon):
        colon = text.rfind(":", 0, colon)
    return colon + 1 if colon >= 0 else 0


def _in_deferred_value(text: str, start: int) -> bool:
    """Whether `start` stands in the first clause of a field's value that puts the field off
    ("Supervising physician: pending - clinic is finalizing a supervision arrangement"):
    nothing in it is done yet."""
    label_end = _label_end(text, start)
    if not label_end or re.search(r"[,;.]", text[label_end:start]):
        return False
    value = form_value(text[label_end:])
    return value is not None and value_defers(value)


def _yes_no(text: str, colon: int) -> str | None:
    """The answer after a "Y/N:" label ("Seizure hx Y/N: N"), as "yes" or "no"; None when the
    colon is not one."""
    if not _YES_NO_LABEL.search(text, 0, colon + 1):
        return None
    answer = _YES_NO_ANSWER.match(text, colon + 1)
    if answer is None:
        return None
    return ("yes" if answer.group(1).lower().startswith("y") else "no") + text[answer.end() :]


_COLUMN_GAP = re.compile(
    r"[^\S\n]*\.{2,}[^\S\n]*|[^\S\n]+\.[^\S\n]+|[^\S\n]{2,}|[^\S\n]*\|[^\S\n]*"
)
"""What parts the columns of a form's table: a dot leader, a run of spaces, or a bar."""
_BOXES_ONLY = re.compile(rf"(?:[^\S\n]*(?:{_BOX.pattern}))+[^\S\n]*")
_CELL_MARK = re.compile(r"[xX✓✔]")
_INLINE_ANSWER = re.compile(r"(?:[^|\n]*[^\S\n])?(Y|N|Yes|No)[^\S\n]*", re.I)
"""A Y/N answer that ends the name's cell, before the bar ("brain damage N |")."""
_BLANK_CELL = re.compile(r"_{2,}")
_COLUMN_CELLS = {"y": "yes", "yes": "yes", "n": "no", "no": "no", ".": "", "-": "", "": ""}
"""What a cell of a Y/N table says; a dot or a dash is the column left empty."""


def _column_answer(text: str, end: int) -> str | None:
    """The answer a Y/N table gives the name on its row ("Ischemic cardiomyopathy   .   N",
    "Prior lumbar surgery | N", "VF arrest? |  | X"): "yes", "no" or "unanswered"; None when
    the row is no such table row."""
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    parts = _COLUMN_GAP.split(text[end:line_end])
    if ":" in parts[0] or len(parts[0]) > _OPTION_REACH:
        return None
    inline = _INLINE_ANSWER.fullmatch(parts[0])
    if inline is not None and "|" in text[text.rfind("\n", 0, end) + 1 : line_end]:
        return _COLUMN_CELLS[inline.group(1).lower()]  # "brain damage N | survival <1 yr N"
    if len(parts) < 2:
        return None
    boxes = _BOX.findall(" ".join(parts[1:]))
    if len(boxes) == 2 and _BOXES_ONLY.fullmatch(" ".join(parts[1:])):
        # "[ ] [X]" under a "Y N" header: the column of the ticked box answers
        ticked = [_CHECKED.fullmatch(box) is not None for box in boxes]
        return None if ticked[0] == ticked[1] else ("yes" if ticked[0] else "no")
    if all(_BLANK_CELL.fullmatch(part.strip()) for part in parts[1:]):
        return "unanswered"  # "Degree (accredited school)        ___"
    marked = _marked_column(parts[1:]) if "|" in text[end:line_end] else None
    if marked is not None:
        return marked
    cells = [_COLUMN_CELLS.get(part.strip().lower()) for part in parts[1:]]
    if cells[0] and all(_COMMENT_CELL.search(part) for part in parts[2:]):
        return cells[0]  # "Set-up / teaching done     N     Appt booked 03/09/2026"
    answers = {cell for cell in cells if cell}
    if None in cells or len(answers) != 1:
        return None
    return answers.pop()


_COMMENT_CELL = re.compile(r"[A-Za-z]{3}")
"""A cell of words after a row's answer: a comment on it, not another column's answer."""


def _marked_column(cells: list[str]) -> str | None:
    """The answer of a row marked under a "| Y | N" header ("Prior MI? | X |" says yes,
    "VF arrest? |  | X" says no; forms put Y first); "unanswered" for a row of two empty cells."""
    if len(cells) != 2:
        return None
    marks = [_CELL_MARK.fullmatch(cell.strip()) is not None for cell in cells]
    empty = [not cell.strip() for cell in cells]
    if all(empty):
        return "unanswered"
    if marks[0] and empty[1]:
        return "yes"
    if marks[1] and empty[0]:
        return "no"
    return None


def _answer_mark(text: str, end: int) -> int:
    """Where a form's answer to the name begins: the colon after a label, or the question mark
    of a question answered by boxes ("Holds a current license?  [ ] yes [x] no"); -1 if none."""
    colon = text.find(":", end)
    question = text.find("?", end)
    if question >= 0 and (colon < 0 or question < colon) and _BOX_AHEAD.match(text, question + 1):
        return question
    pair = _YES_NO_BOXES.match(text, end)
    if pair is not None:
        return pair.end() - 1  # "Prior spine surgery  Y [ ]  N [x]": the pair answers it
    return colon


_YES_NO_BOXES = re.compile(
    r"(?:[^\S\n]*\.{2,})?[^\S\n]+(?=(?:Y|Yes|YES)[^\S\n]*"
    rf"(?:{_BOX.pattern})[^\S\n]*(?:N|No|NO)[^\S\n]*(?:{_BOX.pattern}))"
)
"""Space (or a dot leader) before a yes/no pair of boxes that answers the name before it."""


def _next_label(text: str, end: int) -> int:
    """Where the next "Label:" colon after `end` stands (the text's length without one)."""
    colon = text.find(":", end)
    while _in_clock_time(text, colon):
        colon = text.find(":", colon + 1)
    return colon if colon >= 0 else len(text)


def _in_clock_time(text: str, colon: int) -> bool:
    """A colon inside a time such as 10:30, not a label's."""
    return colon > 0 and text[colon - 1].isdigit() and text[colon + 1 : colon + 2].isdigit()


def _non_overlapping(entities: Iterable) -> list:
    kept: list = []
    last_end = -1
    for entity in sorted(entities, key=lambda e: (e.start, -e.end)):
        if entity.start >= last_end:
            kept.append(entity)
            last_end = entity.end
    return kept


@dataclass
class CaseReading:
    """Everything the atom evaluators read from one case, built once per evaluation."""

    case: CaseBundle
    vocabulary: Vocabulary
    context: ContextReader
    sentences: list[Sentence]
    facts: list[FactView]
    _mentions: dict[tuple[str, ...], list[Mention]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _by_page: dict[tuple[str, int], list[Sentence]] = field(default_factory=dict)
    _request_forms: frozenset[str] = frozenset()
    _scheduled: frozenset[str] = frozenset()
    _outside: tuple[str, ...] = ()
    _scopes: dict[tuple[str, ...], CaseReading] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for sentence in self.sentences:
            self._by_page.setdefault((sentence.doc_id, sentence.page), []).append(sentence)
        kinds = tuple(self.vocabulary.form_kinds)
        self._request_forms = frozenset(
            d.doc_id for d in self.case.documents if self.find_in(d.title, kinds)
        )
        self._scheduled = frozenset(
            d.doc_id
            for d in self.case.documents
            if any(
                self.context.plans(match.group(1))
                for page in d.pages
                for match in _STATUS_LINE.finditer(page)
            )
        )

    def scheduled(self, doc_id: str) -> bool:
        """Whether a document records something still to come as a whole: an appointment or
        order whose status is a plan ("Status: SCHEDULED")."""
        return doc_id in self._scheduled

    def on_request_form(self, doc_id: str | None) -> bool:
        """Whether a document is a request form (its title names a form kind): the requester's
        summary of the record, not the record."""
        return doc_id in self._request_forms

    def without(self, outside: tuple[str, ...]) -> CaseReading:
        """The reading with what names one of `outside` set aside (an atom's `outside`): its
        facts, and the mentions in its sentences or under its headings. Kept per words."""
        if not outside:
            return self
        with self._lock:
            kept = self._scopes.get(outside)
        if kept is not None:
            return kept
        facts = [
            view
            for view in self.facts
            if not self._names_outside(" ".join(view.every_word), outside)
            and not self._names_outside(view.quote, outside)
        ]
        scoped = replace(
            self, facts=facts, _mentions={}, _lock=threading.Lock(), _by_page={},
            _outside=outside, _scopes={},
        )  # fmt: skip
        with self._lock:
            self._scopes[outside] = scoped
        return scoped

    def _set_aside(self, sentence: Sentence) -> bool:
        """Whether the sentence, or the heading it stands under, names one of `_outside`."""
        if self._names_outside(sentence.text, self._outside):
            return True
        page = self._page_of(sentence)
        block_start = page.rfind("\n\n", 0, sentence.start)
        lines = page[block_start + 1 : sentence.start].split("\n")[:-1]
        headings = [line for line in lines if line.rstrip().endswith(":")]
        return bool(headings) and self._names_outside(headings[-1], self._outside)

    def _names_outside(self, text: str, outside: tuple[str, ...]) -> bool:
        """Whether `text` names one of `outside`; in a phrase, "{past year}" stands for a year
        (or a span of years, "2022-2023") that ended two calendar years or more before the
        case's date ("the 2019 episode"), which cannot be the case's present."""
        plain = tuple(phrase for phrase in outside if _PAST_YEAR not in phrase)
        if plain and self.find_in(text, plain):
            return True
        latest = self.as_of.year - 2
        for phrase in outside:
            if _PAST_YEAR not in phrase:
                continue
            for match in _dated_phrase(phrase).finditer(text):
                if _last_year(match.group("year")) <= latest:
                    return True
        return False

    def sentences_on(self, doc_id: str, page: int) -> list[Sentence]:
        """The sentences of one document page, in order."""
        return self._by_page.get((doc_id, page), [])

    def line_from(self, sentence: Sentence) -> str:
        """The sentence and whatever follows it on its line: a form's line is one record
        ("License #AC-1188: Active; Expiration date: 01/2026")."""
        page = self._page_of(sentence)
        reach = sentence.end + _LINE_REACH
        line_end = page.find("\n", sentence.end, reach)
        return page[sentence.start : line_end if line_end >= 0 else reach]

    @classmethod
    def read(cls, case: CaseBundle, vocabulary: Vocabulary, context: ContextReader) -> CaseReading:
        dates = {document.doc_id: document.date for document in case.documents}
        sentences: list[Sentence] = []
        for document in case.documents:
            for number, page in enumerate(document.pages, start=1):
                for start, end in _sentence_spans(page):
                    if is_instruction_like(page[start:end]):
                        continue  # addressed to a reviewer or an AI: data, never evidence
                    sentences.append(
                        Sentence(
                            len(sentences),
                            document.doc_id,
                            number,
                            start,
                            end,
                            page[start:end],
                            document.date,
                        )
                    )
        facts = [
            _view_of(fact, dates.get(_doc_of(fact)), vocabulary)
            for fact in [*case.facts, *case.request_facts()]
        ]
        return cls(case, vocabulary, context, sentences, facts)

    @property
    def as_of(self) -> dt.date:
        return self.case.reference_date

    def names(self, concept: str, aliases: Iterable[str]) -> tuple[str, ...]:
        """An atom's names widened by the vocabulary's synonym groups."""
        return tuple(self.vocabulary.expand([concept, *aliases]))

    def facts_named(self, names: Iterable[str], codes: Sequence[AtomCode] = ()) -> list[FactView]:
        """Facts bound to an atom: by code first, then by name.

        A fact coded with one of `codes` binds (first in the list). A fact whose field name
        contains one of `names` as whole words, side by side in any order (`sessionsRequested`
        for "requested sessions"), binds too, unless it is coded in a system that
        `codes` also uses and with none of them: then the codes say it is another concept.
        A relative's fact (`fhx.dcm`) binds only to an atom that itself names relatives.
        """
        keys = _name_keys(tuple(names))
        wanted = {code.key() for code in codes}
        systems = {system for system, _ in wanted}
        asks_about_relatives = any(self.vocabulary.names_relative(key.words) for key in keys)
        by_code = [v for v in self.facts if wanted & {c.key() for c in v.fact.codes}]
        by_name = [
            view
            for view in self.facts
            if view not in by_code
            and _named_by_any(view, keys)
            and not systems & {c.key()[0] for c in view.fact.codes}
        ]
        return [
            view for view in [*by_code, *by_name] if asks_about_relatives or not view.about_relative
        ]

    def mentions(self, names: tuple[str, ...]) -> list[Mention]:
        """Every mention of `names` in the documents, with its stance (cached per names)."""
        with self._lock:
            cached = self._mentions.get(names)
        if cached is not None:
            return cached
        found = self._find_mentions(names)
        if self._outside:
            found = [mention for mention in found if not self._set_aside(mention.sentence)]
        with self._lock:
            self._mentions[names] = found
        return found

    def find_in(self, text: str, names: tuple[str, ...]) -> list[tuple[int, int]]:
        """Spans of `names` in any text (a fact's value), by the same matching rules."""
        return [match.span() for pattern in _patterns(names) for match in pattern.finditer(text)]

    def _judged_whole(self, name: str, names: frozenset[str]) -> bool:
        """Whether the name carries its own cue, which its head alone would read as one: its
        negation ("weight loss not sustained"), a comparison ("benefit vs risk"), or a word of
        the alias itself that cues the rest ("return demonstration"; not a word the text put
        between an alias's words, as "to provide" in "RT to provide mask fit and education")."""
        if _negates_itself(name) or _COMPARISON.search(name) is not None:
            return True
        if " ".join(name.lower().split()) not in names:
            return False
        head = _head(name, 0, len(name))
        return head != (0, len(name)) and self.context.stances(name, [head])[0] != Stance()

    def _find_mentions(self, names: tuple[str, ...]) -> list[Mention]:
        patterns = _patterns(names)
        if not patterns:
            return []
        mentions: list[Mention] = []
        spelled = frozenset(" ".join(name.lower().split()) for name in names)
        for sentence in self.sentences:
            spans = sorted(
                {m.span() for pattern in patterns for m in pattern.finditer(sentence.text)}
            )
            if not spans:
                continue
            whole = self.context.stances(sentence.text, [_judged(sentence.text, *s) for s in spans])
            heads = self.context.stances(sentence.text, [_head(sentence.text, *s) for s in spans])
            clause = self._clause_of(sentence)
            unticked = self._unticked_option(sentence)
            for (start, end), by_name, by_head in zip(spans, whole, heads, strict=True):
                name = sentence.text[start:end]
                stance = by_name if self._judged_whole(name, spelled) else by_name | by_head
                if clause != sentence.text and _declined(clause, start, end):
                    stance = Stance(negated=True, family=stance.family)  # "ECT discussed; declined"
                if _ZERO_ROW.fullmatch(sentence.text, end) is not None:
                    stance = Stance(negated=True, family=stance.family)  # "Sustained VT  0  0"
                below = self._ticked_below(sentence, end)
                if below == "":  # "Prior program:" over "[ ] Completed  [ ] None"
                    stance = Stance(hypothetical=True)
                elif below is not None:  # "Education on proper use:" over "[x] Not done"
                    answered = f"{sentence.text} {below}"
                    stance = self.context.stances(answered, [_judged(answered, start, end)])[0]
                    value = form_value(below)
                    if value is not None and (value_defers(value) or part_defers(value)):
                        stance = Stance(hypothetical=True, planned=True)  # "[x] Will be done …"
                if self._marked_under_header(sentence, end) == "no":
                    stance = Stance(negated=True, family=stance.family)  # "ECT ....   X" under N
                blank = self._blank_field(sentence, end)
                if unticked or blank or _heading(sentence.text):
                    stance = Stance(hypothetical=True)  # "Adverse effects:" left empty
                elif _unanswered_question(sentence.text) and not stance.negated:
                    stance = Stance(family=stance.family, hypothetical=True)  # "was it an MI?"
                if stance.negated and _denies_recurrence(sentence.text, start, end):
                    # "no myocardial infarction since 2024": denies a new one, affirms the old
                    stance = Stance(
                        family=stance.family,
                        hypothetical=stance.hypothetical,
                        possible=stance.possible,
                        planned=stance.planned,
                    )
                mentions.append(Mention(sentence, start, end, stance, blank))
        return mentions

    def authors(self, doc_ids: set[str]) -> list[tuple[Sentence, str]]:
        """The lines of these documents that sign or head them, with what they say of the
        author: the line from the credential on, and a short title line under it that holds
        no field ("Psychiatrist", "Silver Pines Geriatric Psychiatry")."""
        found = []
        for sentence in self.sentences:
            if sentence.doc_id not in doc_ids:
                continue
            role = self.vocabulary.author_role(sentence.text)
            if role is None:
                continue
            below = self._next_on_page(sentence)
            if below is not None and _title_line(below.text, self.vocabulary):
                role = f"{role}\n{below.text}"
            found.append((sentence, role))
        return found

    def _page_of(self, sentence: Sentence) -> str:
        document = self.case.document(sentence.doc_id)
        pages = document.pages if document is not None else []
        return pages[sentence.page - 1] if len(pages) >= sentence.page else sentence.text

    def _unticked_option(self, sentence: Sentence) -> bool:
        """Whether the sentence is an option of a checklist left without its tick: a line
        indented to where the text of a ticked or boxed sibling line starts (" ✓  Stopped two
        agents" above "    Prior response to TMS")."""
        page = self._page_of(sentence)
        reach_start = max(0, sentence.start - _CHECKLIST_REACH)
        line_start = page.rfind("\n", reach_start, sentence.start)
        if line_start < 0 and reach_start > 0:
            return False  # a line longer than a checklist's reach is no checklist's
        indent = page[line_start + 1 : sentence.start]
        if len(indent) < 2 or indent.strip():
            return False
        above = page[max(0, line_start - _CHECKLIST_REACH) : max(line_start, 0)].split("\n")
        below_start = page.find("\n", sentence.start, sentence.start + _CHECKLIST_REACH) + 1
        below = (
            page[below_start : below_start + _CHECKLIST_REACH].split("\n") if below_start else []
        )
        siblings = [*_block(reversed(above)), *_block(below)]
        return any(
            (match := _OPTION_LINE.match(line)) is not None and match.end() == len(indent)
            for line in siblings
        )

    def _blank_field(self, sentence: Sentence, end: int) -> bool:
        """Whether the name labels a field left empty: nothing after its colon (a few words of
        the label may follow the name: "Decision tool used:"), and the next line is another
        field ("Adverse effects:" then "Psychotherapy: CBT") or there is none. A label whose
        content follows on its own lines is a heading, not a blank."""
        if _REST_OF_LABEL.fullmatch(sentence.text, end) is None:
            return False
        after = self._next_on_page(sentence)
        while after is not None and _ITEM_NUMBER.fullmatch(after.text):
            after = self._next_on_page(after)  # "8." that numbers the next item
        return after is None or _FIELD.match(after.text) is not None

    def _ticked_below(self, sentence: Sentence, end: int) -> str | None:
        """The ticked options on the lines under a label that the name ends ("Beneficiary
        education on proper use of device:" over "[x] Will be completed at setup, scheduled
        04/20", or over "[ ] Completed  [x] In progress / planned"): the label's answer, read
        as if it followed on its line; "" when options stand there and none is ticked, None
        when none do."""
        if _REST_OF_LABEL.fullmatch(sentence.text, end) is None:
            return None
        options = False
        ticked: list[str] = []
        below = self._next_on_page(sentence)
        for _ in range(_CHECKLIST_LINES):
            if below is None or _OPTION_LINE.match(below.text) is None:
                break
            options = True
            if _CHECKED.search(below.text) is not None:
                ticked.append(form_value(below.text) or below.text)
            below = self._next_on_page(below)
        return " ".join(ticked) if options else None

    def _marked_under_header(self, sentence: Sentence, end: int) -> str | None:
        """The answer of a row whose only mark after the name stands under the "Y" or the "N"
        of a header line above ("Currently receiving ECT .......      X" under "Y   N"): the
        header column nearest the mark; None on any other row."""
        mark = _LONE_MARK.fullmatch(sentence.text, end)
        if mark is None:
            return None
        page = self._page_of(sentence)
        at = sentence.start + mark.start(1)
        column = at - (page.rfind("\n", 0, at) + 1)
        lines = page[: page.rfind("\n", 0, sentence.start) + 1].split("\n")[:-1]
        for line in reversed(lines[-_HEADER_REACH:]):
            header = _YES_NO_HEADER.search(line)
            if header is not None:
                yes, no = header.start("yes"), header.start("no")
                return "yes" if abs(column - yes) < abs(column - no) else "no"
        return None

    def semicolon_group(self, sentence: Sentence) -> str:
        """The sentence with its neighbours that only a semicolon parts from it: "vortioxetine
        20 mg; now 14 weeks, tolerating it well." speaks of the drug throughout."""
        clause = self._clause_of(sentence)
        if sentence.index == 0:
            return clause
        before = self.sentences[sentence.index - 1]
        same_page = (before.doc_id, before.page) == (sentence.doc_id, sentence.page)
        return f"{before.text} {clause}" if same_page and before.text.endswith(";") else clause

    def _clause_of(self, sentence: Sentence) -> str:
        """The sentence, joined to the next one when only a semicolon parts them."""
        after = self._next_on_page(sentence) if sentence.text.endswith(";") else None
        return sentence.text if after is None else f"{sentence.text} {after.text}"

    def _next_on_page(self, sentence: Sentence) -> Sentence | None:
        """The sentence after this one, if it stands on the same page."""
        following = self.sentences[sentence.index + 1 : sentence.index + 2]
        if not following or (following[0].doc_id, following[0].page) != (
            sentence.doc_id,
            sentence.page,
        ):
            return None
        return following[0]


_OPTION_LINE = re.compile(rf"[^\S\n]*(?:{_BOX.pattern})[^\S\n]+(?=\S)")
"""A checklist line up to the text of its option: " ✓  ", "  [ ] "."""
_CHECKLIST_REACH = 600
"""How far around a line its checklist siblings are looked for, at most `_CHECKLIST_LINES`."""
_CHECKLIST_LINES = 8

_LINE_REACH = 120
"""How far past its sentence a line is read as the same record."""

_TITLE_WORDS = 10
"""Longest line under a signature that is still read as the signer's title."""


_ZERO_ROW = re.compile(r"[^\S\n]*(?:\([^)\n]*\))?(?:[^\S\n]+0+(?:\.0+)?)+[^\S\n]*")
"""The rest of a table row that counts none of the name in every column ("Sustained VT  0  0")."""


def _heading(text: str) -> bool:
    """A line of a few words all in capitals, with no number and no "label:": a heading names
    its section's topic ("SECTION B - PSYCHOTHERAPY"); it says nothing of the patient."""
    letters = [char for char in text if char.isalpha()]
    return (
        len(text.split()) >= _HEADING_WORDS
        and all(char.isupper() for char in letters)
        and not any(char.isdigit() or char == ":" for char in text)
    )


_HEADING_WORDS = 3
"""The fewest words of a heading: shorter capitals are a name or a result ("LEFT BBB")."""


def _block(lines: Iterable[str]) -> list[str]:
    """The lines up to the first blank one, at most a checklist's worth."""
    block: list[str] = []
    for line in lines:
        if not line.strip() or len(block) == _CHECKLIST_LINES:
            break
        block.append(line)
    return block


def _title_line(text: str, vocabulary: Vocabulary) -> bool:
    """A line under a signature that can only be the signer's title or practice."""
    return (
        ":" not in text
        and len(text.split()) <= _TITLE_WORDS
        and vocabulary.author_role(text) is None
        and not any(char.isdigit() for char in text)
    )


_PAST_YEAR = "{past year}"
_YEARS = r"(?P<year>(?:19|20)\d{2}(?:[^\S\n]*[-–/][^\S\n]*(?:19|20)?\d{2})?)"


@lru_cache(maxsize=256)
def _dated_phrase(phrase: str) -> re.Pattern[str]:
    """An `outside` phrase with its "{past year}" as a year or a span of years."""
    before, after = (re.escape(part).replace(r"\ ", r"\s+") for part in phrase.split(_PAST_YEAR, 1))
    return re.compile(rf"(?<!\w){before}{_YEARS}{after}(?!\w)", re.I)


def _last_year(years: str) -> int:
    """The last year of "2019", "2022-2023" or "2023-24"."""
    first, *rest = re.split(r"[^\S\n]*[-–/][^\S\n]*", years)
    if not rest:
        return int(first)
    last = rest[0]
    return int(last) if len(last) == 4 else int(first[:2] + last)


_LONE_MARK = re.compile(r"[^\S\n]*(?:\.{2,}|_{2,})?[^\S\n]{2,}([xX✓✔])[^\S\n]*")
"""A row's only mark after its name, set off by a leader or a run of spaces."""
_YES_NO_HEADER = re.compile(
    r"(?:^|[^\S\n]{2,})(?P<yes>Y|Yes|YES)[^\S\n]{2,}(?P<no>N|No|NO)(?:[^\S\n]{2,}\S.*)?$"
)
"""A table's header line that ends in "Y   N" columns (a comment column may follow)."""
_HEADER_REACH = 20
"""How many lines above a row its table's header may stand."""
_ASKS_OF_ANOTHER = re.compile(
    r"\b(?:related|relat\w+|due|caused|cause|secondary|attributed|attributable|associated"
    r"|because|from|after|since|within|during|before|prior|past|last|over|more|less|than"
    r"|by|in|at|on|of|to|for|with|without|other|another|besides|except"
    r"|suspended|revoked|restricted|expired|lapsed|inactive|denied|failed|discontinued"
    r"|stopped|resolved|limited|worse|worsening|improved|changed)\b",
    re.I,
)
"""Words after the name that make a form's question ask about something else than the name:
its cause, its time, another person, a change of its state ("Pain related to prior surgery?
[x] no" has pain; "Stroke within 6 months? Y/N: N" may have an older stroke; "License
suspended? [x] no" has a license). Without them, the question's words only finish naming it
("Life-limiting non-cardiac illness?  Y/N: N") and its "no" denies it."""
_PURPOSE = re.compile(
    r"\([^\S\n]*(?:[\w/-]+[^\S\n]+){0,2}(?:for|due\s+to|because\s+of|re:?|regarding)\b", re.I
)
"""A label's aside that gives its purpose ("Bone scan (done for back pain): negative"): the
value speaks of the label's finding, and of that purpose neither yes nor no."""
_LIST_GOES_ON = re.compile(
    r"(?:,|\bor\b|\band\b|/)[^\S\n]*(?:any[^\S\n]+)?(?:other|another)\b", re.I
)
"""A list the name opens, not another thing: "Hallucinations, delusions or other psychotic
symptoms?  [x] no" asks of each, and its "no" denies each."""
_ASIDE = re.compile(r"\([^()\n]{0,40}\)")
"""A short parenthesis between a form's label and its answer ("Psychosis (current ep.):"),
whose abbreviation dots end no sentence."""
_STATUS_LINE = re.compile(
    r"^[ \t]*(?:(?:appointment|appt\.?|visit|order|referral|request)[ \t]+)?status[ \t]*:(.*)$",
    re.I | re.M,
)
"""A form's line that gives the status of what the whole document records."""
_ITEM_NUMBER = re.compile(r"\(?\d{1,2}[.)]")
"""The number of a form's item, split from it as a sentence of its own ("8.")."""
_FIELD = re.compile(r"(?:\d{1,2}[.)][^\S\n]*)?[A-Za-z](?:[^:\n]{0,60}:(?!\d)|[^?:\n]{0,60}\?)")
"""A line that opens with a "Label:" or a question of its own, numbered or not ("8. Stable?")."""


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """The name without a leading "history of" (ConText reads that as a cue of its own)."""
    prefix = _HISTORY_PREFIX.match(text[start:end])
    return (start + prefix.end(), end) if prefix and start + prefix.end() < end else (start, end)


def _judged(text: str, start: int, end: int) -> tuple[int, int]:
    """The part of a name ConText judges as a whole: its first word when the name carries its
    own negation ("weight loss not sustained"), else the name without "history of"."""
    if _negates_itself(text[start:end]):
        first = re.match(r"\S+", text[start:end])
        return (start, start + first.end()) if first else (start, end)
    return _trimmed(text, start, end)


def _head(text: str, start: int, end: int) -> tuple[int, int]:
    """The last word of the name: its head in English.

    ConText ignores a cue that overlaps its target, so "no significant improvement" would not
    negate "significant improvement"; the head alone is past the cue.
    """
    words = list(re.finditer(r"\S+", text[start:end]))
    return (start + words[-1].start(), end) if len(words) > 1 else (start, end)


_COMPARISON = re.compile(r"\b(?:vs\.?|versus)(?!\w)", re.I)
"""A comparison inside a name ("benefit vs risk"): its head alone would read it as doubt."""


def _negates_itself(name: str) -> bool:
    """A name such as "not sustained" carries its own negation: only the whole name is read."""
    return _SELF_NEGATION.search(name) is not None


def _view_of(fact: Fact, date: dt.date | None, vocabulary: Vocabulary) -> FactView:
    words = normalise_words(fact.field)
    spelled = vocabulary.spelled_out(words)
    return FactView(fact, words, date, spelled, vocabulary.names_relative(spelled))


def _doc_of(fact: Fact) -> str | None:
    return fact.source.doc_id if fact.source is not None else None


@dataclass(frozen=True, slots=True)
class _NameKey:
    """A name's words as a field name would hold them, with what rules a field out fast."""

    words: tuple[str, ...]
    word_set: frozenset[str]
    joined: str


@lru_cache(maxsize=4096)
def _name_keys(names: tuple[str, ...]) -> tuple[_NameKey, ...]:
    """The keys of an atom's names (criteria data, never case text, so safe to cache)."""
    keys = (normalise_words(name) for name in names)
    return tuple(_NameKey(key, frozenset(key), "".join(key)) for key in keys if key)


def _named_by_any(view: FactView, keys: tuple[_NameKey, ...]) -> bool:
    """`view.named_by` for any key, skipping at once the keys whose words the field lacks (an
    atom has up to a hundred names; a case, dozens of facts)."""
    field_words = frozenset(view.every_word)
    joined = ("".join(view.words), "".join(view.spelled))
    return any(
        (key.word_set <= field_words or key.joined in joined) and view.named_by(key.words)
        for key in keys
    )


def _contains(words: tuple[str, ...], key: tuple[str, ...]) -> bool:
    if "".join(key) == "".join(words):
        return True
    wanted = sorted(key)
    return any(sorted(words[i : i + len(key)]) == wanted for i in range(len(words) - len(key) + 1))


def _value_text(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return str(value)


def _sentence_spans(page: str) -> list[tuple[int, int]]:
    """Sentences and lines of a page, trimmed, none longer than MAX_SENTENCE_CHARS."""
    spans: list[tuple[int, int]] = []
    start = 0
    for boundary in _SENTENCE_END.finditer(page):
        answered = _ANSWER_AHEAD.match(page, boundary.end()) is not None
        if answered and (
            page[boundary.start() - 1] == "?"
            or _LEADER.search(page, boundary.start() - 2, boundary.start())
        ):
            continue  # "Holds a current license?  [ ] yes [x] no": a question and its answer
        _add_bounded(spans, page, start, boundary.start())
        start = boundary.end()
    _add_bounded(spans, page, start, len(page))
    return spans


def _add_bounded(spans: list[tuple[int, int]], page: str, start: int, end: int) -> None:
    while start < end and page[start].isspace():
        start += 1
    while end > start and page[end - 1].isspace():
        end -= 1
    while end - start > MAX_SENTENCE_CHARS:
        cut = page.rfind(" ", start + MAX_SENTENCE_CHARS // 2, start + MAX_SENTENCE_CHARS)
        cut = cut if cut > start else start + MAX_SENTENCE_CHARS
        spans.append((start, cut))
        start = cut
        while start < end and page[start].isspace():
            start += 1
    if end > start:
        spans.append((start, end))


_NOT_AFTER = r"(?<![A-Za-z0-9])(?<![Nn]on-)(?<![Nn]on )(?<![Nn]on)"
"""A name never matches inside a longer word, nor after "non-" ("non-sustained", "non ischemic")."""
_HISTORY_PREFIX = re.compile(
    r"^(?:(?:past\s+|prior\s+|previous\s+)?(?:history|hx)\s+of|h/o|prior|previous)\s+", re.I
)
"""Words at the start of a name that ConText reads as its own cue ("No history of stroke")."""

_RECURRENCE = re.compile(
    r"\s*since\s+(?:\d|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|the\b|then\b|that\b)",
    re.I,
)
_AGAIN = re.compile(r"\b(?:further|recurrent|repeat)\b[^,;.]{0,12}$", re.I)
"""Right before a denied name: "no further VT/VF after day 1" says the first one happened."""


def _denies_recurrence(text: str, start: int, end: int) -> bool:
    return bool(_RECURRENCE.match(text, end) or _AGAIN.search(text, max(0, start - 40), start))


_SELF_NEGATION = re.compile(
    r"\b(?:no|not|non|never|negative|without|unable|fail(?:ed|s)?|un\w+)\b", re.I
)

_PATTERN_CACHE: dict[tuple[str, ...], list[re.Pattern[str]]] = {}
_PATTERN_LOCK = threading.Lock()


def _longest_first(regex: str) -> tuple[int, str]:
    return -len(regex), regex


def _patterns(names: tuple[str, ...]) -> list[re.Pattern[str]]:
    """At most two patterns for a set of names: case-insensitive, and capitals-only."""
    with _PATTERN_LOCK:
        cached = _PATTERN_CACHE.get(names)
    if cached is not None:
        return cached
    # Longest first, ties by text: a set's order changes with each process's hash seed, and
    # the first alternative that matches names the mention in the evidence.
    folded = sorted({_alias_regex(n) for n in names if not _is_short_caps(n)}, key=_longest_first)
    exact = sorted({_alias_regex(n) for n in names if _is_short_caps(n)}, key=_longest_first)
    patterns = [
        re.compile(rf"{_NOT_AFTER}(?:{'|'.join(group)})(?![A-Za-z0-9])", flags)
        for group, flags in ((folded, re.IGNORECASE), (exact, 0))
        if group
    ]
    with _PATTERN_LOCK:
        if len(_PATTERN_CACHE) > 4096:
            _PATTERN_CACHE.clear()
        _PATTERN_CACHE[names] = patterns
    return patterns


def _hyphenated(word: str) -> str:
    """A hyphenated word's parts, joined by a hyphen, a space or nothing ("re-authorization",
    "reauthorization"), never by other words."""
    parts = [re.escape(part) for part in word.split("-") if part]
    return r"[\s\-]?".join(parts)


def _is_short_caps(name: str) -> bool:
    letters = [c for c in name if c.isalpha()]
    return len(name) <= _SHORT_CAPS and bool(letters) and all(c.isupper() for c in letters)


_SEPARATOR = r"(?:\s+|\s*/\s*|-)"
_WORD = r"(?!(?:no|not|never|without|non|nor)\b)(?:Dr\.|[A-Za-z'’]+)"
_LIST = rf"(?:(?:\s*,\s*|\s+){_WORD}){{0,4}}\s*,?\s+(?:and|or|&)\s+(?:{_WORD}\s+){{0,3}}"
_GAP = rf"(?:{_SEPARATOR}(?:{_WORD}{_SEPARATOR}){{0,2}}|-?)"
"""Between the words of a name: nothing, a hyphen, or up to two other words that are not a
negation, so "reviewed the records" also finds "reviewed his pharmacy records". A spaced dash
separates a title from what follows: "Prior Authorization - Imaging" is no "prior
imaging"."""
_PAIR_GAP = rf"(?:{_SEPARATOR}(?:{_WORD}{_SEPARATOR}){{0,2}}|{_LIST}|-?)"
"""Between the two words of a two-word name, also a list joined by "and" or "or": "chart
reviewed" finds "chart, pharmacy record and therapy summary reviewed". Only there: in every
gap of every name, it tripled the slowest criteria (p95 on held-out 60 -> 170 ms) for no
verdict that the two-word names do not give."""


def _alias_regex(name: str) -> str:
    words = [_hyphenated(word) for word in name.split()]
    body = (_PAIR_GAP if len(words) == 2 else _GAP).join(words)
    plural = "(?:s|es)?" if name[-1:].isalpha() and not _is_short_caps(name) else "s?"
    return body + plural
