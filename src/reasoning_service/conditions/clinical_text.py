"""Reading clinical text without a model: words, synonyms, negation, family history, measurements.

Case documents and criteria are compared as streams of *concept keys*: lower-cased, lightly
stemmed words, with multi-word clinical phrases ("apnea-hypopnea index", "sleep study") and
policy abbreviations ("Roux-en-Y gastric bypass (RYGBP)") folded into one key, and synonyms
("consultation" ≈ "evaluation") mapped onto one key. Every key keeps the character span it came
from, so whatever is matched can be quoted verbatim.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "NARROWER",
    "Measurement",
    "Sentence",
    "Token",
    "abbreviations",
    "canonical",
    "concept_tokens",
    "is_family_context",
    "is_negated",
    "read_measurements",
    "split_sentences",
    "stem",
]

_WORD = re.compile(r"[A-Za-z0-9]+(?:'[a-z]+)?|≥|≤|>=|<=|[<>]")

_PHRASES: dict[str, str] = {
    # measurements
    "apnea hypopnea index": "ahi",
    "respiratory disturbance index": "ahi",
    "rdi": "ahi",
    "body mass index": "bmi",
    "left ventricular ejection fraction": "lvef",
    "ejection fraction": "lvef",
    "ef": "lvef",
    "total sleep time": "sleep_time",
    "sleep time": "sleep_time",
    "monitoring time": "sleep_time",
    "recorded sleep": "sleep_time",
    "continuous recorded sleep": "sleep_time",
    "hours of sleep": "sleep_time",
    "years old": "age",
    "year old": "age",
    "years of age": "age",
    "aged": "age",
    # tests and devices
    "polysomnography": "psg",
    "polysomnogram": "psg",
    "home sleep apnea test": "hst",
    "home sleep test": "hst",
    "portable monitor": "hst",
    "sleep study": "sleep_test",
    "sleep test": "sleep_test",
    "in laboratory": "laboratory",
    "in lab": "laboratory",
    "lab": "laboratory",
    "sleep laboratory": "laboratory",
    "obstructive sleep apnea": "osa",
    "sleep apnea": "osa",
    "intragastric balloon": "gastric balloon",
    "gastric balloon": "gastric balloon",
    # care and documentation
    "new patient": "evaluation",
    "history and physical": "evaluation",
    "primary care": "physician",
    "home medical": "supplier",
    "medical supply": "supplier",
    "respiratory supply": "supplier",
    "respiratory services": "supplier",
    "dme": "supplier",
    "respiratory therapist": "supplier",
    "first use": "before",
    "first night": "before",
    "prior to": "before",
    "weight loss": "obesity",
    "weight management": "obesity",
    "weight reduction": "obesity",
    "not sustained": "unsuccessful",
    "limited success": "unsuccessful",
    "without success": "unsuccessful",
    "no improvement": "unsuccessful",
    "co morbidity related to obesity": "comorbidity",
    "comorbidity related to obesity": "comorbidity",
    "obesity related co morbidity": "comorbidity",
    "co morbidity": "comorbidity",
    "co morbidities": "comorbidity",
    "obesity related": "comorbidity",
    "problem list": "comorbidity",
    "type 2 diabetes mellitus": "diabetes",
    "type 2 diabetes": "diabetes",
    "diabetes mellitus": "diabetes",
    "heart failure": "heart_disease",
    "coronary artery disease": "heart_disease",
    "ischemic heart disease": "heart_disease",
    "daytime sleepiness": "sleepiness",
    "supplemented fasting": "supplemented_fasting",
    "very low calorie": "supplemented_fasting",
    "myocardial infarction": "mi",
    "electroconvulsive therapy": "ect",
    "transcranial magnetic stimulation": "tms",
    "major depressive disorder": "mdd",
    "low back pain": "back_pain",
    "back pain": "back_pain",
    "cardiac arrest": "arrest",
}

_SYNONYMS: dict[str, tuple[str, ...]] = {
    "clinical": ("clinic",),
    "evaluation": ("evaluate", "consultation", "consult", "assessment", "visit"),
    "examination": ("exam", "physical"),
    "history": ("hpi", "pmh", "past", "previously", "prior", "previous"),
    "physician": ("md", "do", "practitioner", "provider", "doctor", "surgeon"),
    "order": ("ordering",),
    "supervision": ("supervise", "interpret", "interpreting"),
    "educate": ("education", "instruct", "train", "teach", "taught"),
    "medical": ("medically", "supervise", "medicine", "pharmacotherapy"),
    "treatment": ("program", "therapy", "management", "regimen"),
    "obesity": ("weight", "obese"),
    "unsuccessful": ("regain", "plateau", "fail", "failure"),
    "supplier": ("supply",),
    "laboratory": ("facility",),
    "cpap": ("apap",),
    "sleepiness": ("dozing", "somnolence", "hypersomnolence"),
    "cognition": ("memory", "concentration", "cognitive"),
    "stroke": ("cva", "tia"),
    "hypertension": ("htn",),
    "psg": ("polysomnographic",),
    "benefit": ("improve", "improvement", "adherence", "compliance"),
    "continue": ("continued", "continuation", "subsequent", "renewal", "retreatment"),
    "before": ("prior",),
    "procedure": ("surgery", "operation"),
}

_NEGATION_BEFORE = frozenset(
    {
        "no",
        "not",
        "denies",
        "denied",
        "deny",
        "without",
        "negative",
        "never",
        "absent",
        "absence",
        "free",
        "none",
        "neither",
        "nor",
        "non",
    }
)
_NEGATION_AFTER = re.compile(
    r"^[\s,]*(?:was |were |is |has been |have been )?(?:ruled out|resolved|excluded|negative|"
    r"absent|denied|not (?:present|found|seen|documented))\b",
    re.IGNORECASE,
)
_NEGATION_LATER = re.compile(r"\b(?:ruled out|resolved|excluded)\b", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"[.;:!?]|\bbut\b|\bhowever\b|\balthough\b|\bexcept\b", re.IGNORECASE)
_FAMILY = re.compile(
    r"\b(?:family history|father|mother|brother|sister|sibling|maternal|paternal|grandfather|"
    r"grandmother|aunt|uncle|son|daughter|parent)s?\b",
    re.IGNORECASE,
)


_NARROWER_WORDS: dict[str, tuple[str, ...]] = {
    "comorbidity": (
        "diabetes",
        "hypertension",
        "osa",
        "dyslipidemia",
        "heart_disease",
        "hypoventilation",
        "hyperlipidemia",
    ),
    "sleep_test": ("psg", "hst"),
    "medical": ("supervision", "physician", "medication"),
}


def stem(word: str) -> str:
    """Strip common English suffixes so "ordered", "orders" and "order" meet."""
    word = word.lower().removesuffix("'s")
    for suffix, replacement, minimum in (
        ("ies", "y", 5),
        ("ied", "y", 5),
        ("ing", "", 6),
        ("ed", "", 5),
        ("es", "", 6),
        ("s", "", 4),
    ):
        if len(word) >= minimum and word.endswith(suffix) and not word.endswith("ss"):
            word = word[: -len(suffix)] + replacement
            break
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


def canonical(word: str) -> str:
    """The concept key of one word (or of a phrase key, which is kept as it is)."""
    if "_" in word or " " in word:
        return word
    stemmed = stem(word)
    return _SYNONYM_KEY.get(stemmed, stemmed)


def _build_synonym_keys() -> dict[str, str]:
    keys: dict[str, str] = {}
    for key, words in _SYNONYMS.items():
        for word in words:
            keys.setdefault(stem(word), stem(key))
    return keys


_SYNONYM_KEY = _build_synonym_keys()
NARROWER: dict[str, frozenset[str]] = {
    canonical(key): frozenset(canonical(w) for w in words) for key, words in _NARROWER_WORDS.items()
}
"""Broader concept -> the narrower ones that count as a mention of it."""


@dataclass(frozen=True, slots=True)
class Token:
    """One concept key and the character span of the words it stands for."""

    key: str
    start: int
    end: int


def _raw_words(text: str) -> list[Token]:
    return [Token(stem(m.group()), m.start(), m.end()) for m in _WORD.finditer(text)]


def _phrase_table(extra: dict[str, str]) -> list[tuple[tuple[str, ...], str]]:
    table = {**_PHRASES, **extra}
    rows = [(tuple(stem(w.group()) for w in _WORD.finditer(k)), v) for k, v in table.items()]
    return sorted((row for row in rows if row[0]), key=lambda row: -len(row[0]))


_DEFAULT_PHRASES = _phrase_table({})


def concept_tokens(text: str, extra_phrases: dict[str, str] | None = None) -> list[Token]:
    """Turn text into concept keys: phrases folded longest-first, then synonyms mapped."""
    table = _phrase_table(extra_phrases) if extra_phrases else _DEFAULT_PHRASES
    words = _raw_words(text)
    tokens: list[Token] = []
    index = 0
    while index < len(words):
        for phrase, key in table:
            size = len(phrase)
            if tuple(w.key for w in words[index : index + size]) == phrase:
                tokens.append(
                    Token(canonical(key), words[index].start, words[index + size - 1].end)
                )
                index += size
                break
        else:
            word = words[index]
            tokens.append(Token(_SYNONYM_KEY.get(word.key, word.key), word.start, word.end))
            index += 1
    return tokens


def abbreviations(text: str) -> dict[str, str]:
    """Long forms defined in the text as "Long Form (ABBR)", mapped to the abbreviation.

    Policies define their own abbreviations, so learning them keeps matching general.
    """
    found: dict[str, str] = {}
    for match in re.finditer(r"\(([A-Z][A-Za-z]*(?:/[A-Z]+)?)\)", text):
        abbreviation = match.group(1)
        letters = [c.lower() for c in abbreviation if c.isalpha()]
        if not 2 <= len(letters) <= 8:
            continue
        before = text[: match.start()].split()[-8:]
        for size in range(1, len(before) + 1):
            words = before[-size:]
            joined = " ".join(words).lower()
            if joined[:1] == letters[0] and _is_subsequence(letters, joined):
                found[" ".join(words).strip(" ,;:")] = abbreviation.lower().replace("/", " ")
                break
    return found


def _is_subsequence(letters: list[str], text: str) -> bool:
    position = 0
    for letter in letters:
        position = text.find(letter, position)
        if position < 0:
            return False
        position += 1
    return True


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of a case document page, with the offsets that make it quotable."""

    doc_id: str
    page: int
    start: int
    end: int
    text: str
    label: str
    """The "Label:" that opens the sentence's line, if any ("Family history", "PMH")."""


_LABEL = re.compile(r"^\s*([A-Za-z][A-Za-z /&()\-']{0,40}):\s")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")


def split_sentences(doc_id: str, page: int, text: str) -> list[Sentence]:
    """Split a page into lines, then sentences; each remembers its line's label."""
    sentences: list[Sentence] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        label_match = _LABEL.match(line)
        label = label_match.group(1).strip() if label_match else ""
        cursor = 0
        for piece in [*_SENTENCE_END.split(line)]:
            position = line.find(piece, cursor)
            cursor = position + len(piece)
            stripped = piece.strip()
            if not stripped:
                continue
            start = offset + position + (len(piece) - len(piece.lstrip()))
            sentences.append(Sentence(doc_id, page, start, start + len(stripped), stripped, label))
        offset += len(line)
    return sentences


def is_negated(text: str, start: int, end: int) -> bool:
    """Is the mention at [start, end) negated in its clause ("denies X", "X ruled out")?"""
    clause_start = max((m.end() for m in _CLAUSE_BREAK.finditer(text, 0, start)), default=0)
    before = [stem(w.group()) for w in _WORD.finditer(text[clause_start:start])]
    if any(word in _NEGATION_BEFORE for word in before):
        return True
    clause_end = next((m.start() for m in _CLAUSE_BREAK.finditer(text, end)), len(text))
    return bool(_NEGATION_LATER.search(text[end:clause_end]) or _NEGATION_AFTER.match(text[end:]))


def is_family_context(sentence: Sentence) -> bool:
    """Does the sentence speak of a relative rather than the patient?"""
    return "family" in sentence.label.lower() or bool(_FAMILY.search(sentence.text))


# --- measurements -------------------------------------------------------------------------

_UNIT_SCALE: dict[str, tuple[str, float]] = {
    "hour": ("hours", 1.0),
    "hours": ("hours", 1.0),
    "hr": ("hours", 1.0),
    "hrs": ("hours", 1.0),
    "h": ("hours", 1.0),
    "minute": ("hours", 1 / 60),
    "minutes": ("hours", 1 / 60),
    "min": ("hours", 1 / 60),
    "mins": ("hours", 1 / 60),
    "day": ("days", 1.0),
    "days": ("days", 1.0),
    "week": ("days", 7.0),
    "weeks": ("days", 7.0),
    "month": ("days", 30.4375),
    "months": ("days", 30.4375),
    "year": ("days", 365.25),
    "years": ("days", 365.25),
}


def to_base_unit(value: float, unit: str | None) -> tuple[float, str | None]:
    """Convert durations to days and times to hours, so weeks compare with months."""
    if unit is None:
        return value, None
    scale = _UNIT_SCALE.get(unit.lower())
    return (value * scale[1], scale[0]) if scale else (value, unit.lower())


@dataclass(frozen=True, slots=True)
class Measurement:
    """A value read from a case sentence, with the span that shows it."""

    quantity: str
    value: float
    unit: str | None
    sentence: Sentence
    start: int
    """Offsets into the page text of the quoted evidence."""
    end: int
    derived: str = ""
    """How the value was computed, when it was (e.g. BMI from height and weight)."""


_NUMBER = r"(\d+(?:\.\d+)?)"
_VALUE_AFTER = re.compile(
    r"^\s*(?:\([^)]{0,40}\))?\s*(?:[:=]|\bof\b|\bwas\b|\bis\b|\bat\b)?\s*(?:an?\s+|of\s+)?"
    + _NUMBER
    + r"\s*(%|events?/h(?:ou)?r|events? per hour|/h(?:ou)?r|kg/m2|kg/m²"
    + r"|hours?|hrs?|h\b|minutes?|min\b)?",
    re.IGNORECASE,
)
_AGE = re.compile(r"\b(\d{1,3})[- ](?:years?|yrs?|y/?o)[- ]old\b|\baged?\s*:?\s*(\d{1,3})\b", re.I)
_QUALIFIER_WORDS = frozenset(
    {
        "supine",
        "rem",
        "nrem",
        "residual",
        "central",
        "nonsupine",
        "lateral",
        "prone",
        "target",
        "goal",
        "titration",
        "treated",
        "on",
        "non",
        "obstructive",
    }
)
_QUANTITY_UNITS = {
    "ahi": {None, "events/hour", "%"},
    "bmi": {None, "kg/m2"},
    "sleep_time": {"hours"},
    "lvef": {None, "%"},
    "age": {None, "years"},
}
_HEIGHT = re.compile(
    r"\b(?:height|ht)\.?\s*:?\s*(?:(\d+(?:\.\d+)?)\s*(cm|m|in|inches)\b|(\d)\s*(?:ft|')\s*(\d{1,2}(?:\.\d+)?)\s*(?:in|\")?)",
    re.IGNORECASE,
)
_WEIGHT = re.compile(
    r"\b(?:weight|wt)\.?\s*:?\s*(\d+(?:\.\d+)?)\s*(kg|lbs?|pounds)\b", re.IGNORECASE
)


def _normal_unit(raw: str | None) -> str | None:
    if raw is None:
        return None
    raw = raw.lower()
    if "/h" in raw or "per hour" in raw:
        return "events/hour"
    if raw.startswith("kg/m"):
        return "kg/m2"
    if raw == "%":
        return "%"
    return to_base_unit(1.0, raw)[1]


def read_measurements(
    sentences: Iterable[Sentence], page_text: str, quantity: str
) -> list[Measurement]:
    """Every value of `quantity` stated in the sentences (qualified sub-measures such as
    "supine AHI" or "residual AHI" are skipped: they are not the index the criterion means)."""
    found: list[Measurement] = []
    for sentence in sentences:
        found.extend(_read_in_sentence(sentence, page_text, quantity))
    if quantity == "bmi" and not found:
        found.extend(_derived_bmi(list(sentences), page_text))
    return found


_QUALIFIERS = frozenset(canonical(w) for w in _QUALIFIER_WORDS)


def _read_in_sentence(sentence: Sentence, page_text: str, quantity: str) -> list[Measurement]:
    if quantity == "age":
        return [
            Measurement(
                "age",
                float(m.group(1) or m.group(2)),
                "years",
                sentence,
                sentence.start + m.start(),
                sentence.start + m.end(),
            )
            for m in _AGE.finditer(sentence.text)
        ]
    found: list[Measurement] = []
    tokens = concept_tokens(sentence.text)
    for index, token in enumerate(tokens):
        if token.key != quantity:
            continue
        if index > 0 and tokens[index - 1].key in _QUALIFIERS:
            continue
        match = _VALUE_AFTER.match(sentence.text[token.end :])
        if match is None:
            continue
        unit = _normal_unit(match.group(2))
        value = float(match.group(1))
        if unit == "hours" and match.group(2) and match.group(2).lower().startswith("min"):
            value /= 60
        if unit not in _QUANTITY_UNITS.get(quantity, {unit}):
            continue
        start = sentence.start + token.start
        found.append(
            Measurement(
                quantity, value, unit, sentence, start, sentence.start + token.end + match.end()
            )
        )
    return found


def _derived_bmi(sentences: list[Sentence], page_text: str) -> list[Measurement]:
    """BMI from height and weight stated in one sentence: 703·lb/in² or kg/m²."""
    found: list[Measurement] = []
    for sentence in sentences:
        height, weight = _HEIGHT.search(sentence.text), _WEIGHT.search(sentence.text)
        if height is None or weight is None:
            continue
        metres = _height_m(height)
        kilograms = _weight_kg(weight)
        if metres <= 0:
            continue
        value = kilograms / (metres * metres)
        first, last = min(height.start(), weight.start()), max(height.end(), weight.end())
        how = f"{kilograms:.1f} kg / ({metres:.3f} m)² = {value:.2f}"
        found.append(
            Measurement(
                "bmi",
                value,
                "kg/m2",
                sentence,
                sentence.start + first,
                sentence.start + last,
                derived=how,
            )
        )
    return found


def _height_m(match: re.Match[str]) -> float:
    if match.group(3):
        inches = float(match.group(3)) * 12 + float(match.group(4))
        return inches * 0.0254
    value, unit = float(match.group(1)), match.group(2).lower()
    return {"cm": value / 100, "m": value}.get(unit, value * 0.0254)


def _weight_kg(match: re.Match[str]) -> float:
    value, unit = float(match.group(1)), match.group(2).lower()
    return value if unit == "kg" else value * 0.45359237


def months_between(earlier: dt.date, later: dt.date) -> float:
    """Elapsed months, as days over the mean month length."""
    return (later - earlier).days / 30.4375


# --- durations and time windows ---------------------------------------------------------------

_DURATION = re.compile(
    r"\b(?:for|x|×|lasting|over|of|past|last)\s+(?:the\s+)?(?:(?:past|last)\s+)?"
    r"(\d+(?:\.\d+)?)\s*(days?|weeks?|wks?|months?|mos?|years?|yrs?)\b(?![- ]old)",
    re.IGNORECASE,
)
_SHORT_UNITS = {"wk": "week", "wks": "weeks", "mo": "month", "mos": "months", "yr": "year"}
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def read_durations(sentences: Iterable[Sentence]) -> list[Measurement]:
    """How long something lasted ("for 5 months", "x 14 weeks"), in days."""
    found: list[Measurement] = []
    for sentence in sentences:
        for match in _DURATION.finditer(sentence.text):
            unit = match.group(2).lower()
            days, _ = to_base_unit(float(match.group(1)), _SHORT_UNITS.get(unit, unit))
            start, end = sentence.start + match.start(1), sentence.start + match.end(2)
            found.append(Measurement("duration", days, "days", sentence, start, end))
    return found


def read_recency(
    sentences: Iterable[Sentence], as_of: dt.date, document_dates: dict[str, dt.date | None]
) -> list[Measurement]:
    """How many days before `as_of` something happened: a date in the sentence, else the date
    of the document that reports it. Dates after `as_of` are ignored."""
    found: list[Measurement] = []
    for sentence in sentences:
        dated = False
        for match in _ISO_DATE.finditer(sentence.text):
            try:
                when = dt.date(*(int(part) for part in match.groups()))
            except ValueError:
                continue
            if when <= as_of:
                dated = True
                start, end = sentence.start + match.start(), sentence.start + match.end()
                days = float((as_of - when).days)
                found.append(Measurement("recency", days, "days", sentence, start, end))
        document_date = document_dates.get(sentence.doc_id)
        if not dated and document_date is not None and document_date <= as_of:
            days = float((as_of - document_date).days)
            found.append(
                Measurement(
                    "recency",
                    days,
                    "days",
                    sentence,
                    sentence.start,
                    sentence.end,
                    derived=f"reported in a document dated {document_date.isoformat()}",
                )
            )
    return found
