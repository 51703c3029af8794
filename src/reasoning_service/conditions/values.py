"""Values written in text: numbers with units, dates, "3 weeks ago", "for 14 weeks", "since May".

Pure functions over one short string (a sentence or a fact's value); every pattern is linear.
Language only (month names, number words): clinical vocabulary and unit spellings come from the
vocabulary data.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from reasoning_service.conditions.units import convert
from reasoning_service.conditions.vocabulary import Vocabulary

__all__ = [
    "Bound",
    "Measured",
    "TimePoint",
    "duration_right_after",
    "find_bounded_durations",
    "find_dates",
    "find_durations",
    "measured_near",
    "month_only",
    "parse_measured",
    "year_at_either_end",
    "year_beside",
]

_NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "eighteen": 18,
    "twenty": 20,
    "thirty": 30,
}
_NUM = r"\d+(?:[.,]\d+)?"
_NUMBER = re.compile(rf"(?<![\w.])({_NUM})(?:\s*(?:-|–|to)\s*({_NUM}))?(?![\d])")
_THRESHOLD_BEFORE = re.compile(
    r"(?:[<>≤≥]=?|\b(?:greater|less|more|fewer|higher|lower|above|below|under|over|at least|"
    r"at most|goal|target|cut-?off|threshold|up to|no more than|maximum|minimum|max|min)"
    r"(?:\s+than)?)\s*$",
    re.IGNORECASE,
)
_GLUED_WORD = re.compile(r"[a-wyz]", re.I)
"""A letter right after a number that no unit spells ("66F", "2nd"); "x" is times ("3x")."""
_ASKED = re.compile(r"\s*[:?]")
"""Right after a bound: it is a label or a question ("BMI > 40?"), not a reading."""
_NORM = re.compile(
    r"\b(?:goal|target|aim|cut-?off|threshold|criteria|criterion|required|requires|require|"
    r"indicated|indication|qualify|qualifies|eligible|eligibility|must|should|needs?|if|when|"
    r"unless|until)\b",
    re.IGNORECASE,
)
"""Shortly before a bound: it states a rule or an aim ("indicated when EF <35%"), not a
reading of the patient."""
Bound = Literal["<", "<=", ">", ">="]
_BOUNDS: dict[str, Bound] = {
    "<": "<", "<=": "<=", ">": ">", ">=": ">=", "≤": "<=", "≥": ">=", "less than": "<",
    "fewer than": "<", "lower than": "<", "below": "<", "under": "<", "greater than": ">",
    "more than": ">", "higher than": ">", "above": ">", "over": ">", "at least": ">=",
    "no less than": ">=", "at most": "<=", "no more than": "<=", "up to": "<=",
}  # fmt: skip
"""How a bound is written right before its number, and the comparison it means."""


def _either(keys: Iterable[str]) -> str:
    """Keys as regex alternatives, the longest first."""
    return "|".join(re.escape(key) for key in sorted(keys, key=len, reverse=True))


def _bound_written(words: Iterable[str]) -> str:
    """A bound written with one of `words` (keys of `_BOUNDS`): a symbol, or a phrase that
    starts a word; `_bound_of` reads which."""
    keys = list(words)
    return (
        rf"(?:(?P<symbol>{_either(k for k in keys if not k[0].isalpha())})"
        rf"|\b(?P<words>{_either(k for k in keys if k[0].isalpha())}))"
    )


def _bound_of(match: re.Match[str]) -> Bound:
    return _BOUNDS[(match.group("symbol") or match.group("words")).lower()]


_BOUND_BEFORE = re.compile(rf"{_bound_written(_BOUNDS)}\s*$", re.IGNORECASE)
"""Right before a number, what makes it a bound of the value rather than the value."""
_FILLER = re.compile(
    r"^[\s:=~(,\-]*(?:(?:of|was|is|were|are|at|by|estimated|measured|calculated|reported|"
    r"approximately|approx\.?|about|around|visually|value|score|total|index|result|"
    r"now|currently|today|recorded|documented|noted|showed|shows|revealed|with|an?|the|"
    r"ratio|level|percent(?:age)?|to date|so far|ytd|year-to-date|"
    r"this (?:calendar )?(?:year|course))[\s:=~(,\-]*){0,5}$",
    re.IGNORECASE,
)
_NAME_ASIDE = re.compile(r"[^\S\n]*\([^()\n]{1,40}\)")
"""An aside right after a name, which may say how it was measured: "AHI (4% rule, CMS):"."""
_JOINED = re.compile(
    r"[\s,]*(?:(?:x|×|for|over|daily|qd|bid|tid|per day|/day|XR|XL|SR|ER)[\s,]*){0,3}",
    re.IGNORECASE,
)
"""What joins a dose to its duration ("200 mg x 10 wk", "20 mg daily for 8 weeks")."""
_APPROXIMATE = re.compile(
    r"(?:~|≈|\b(?:about|approx\.?|approximately|around|roughly|nearly|almost|circa|ca\.))\s*$",
    re.I,
)
_PART_OF_WHOLE = re.compile(
    rf"(?<![\w.])\d+\s*(?:of|/)\s*\d+(?:\s+[A-Za-z]+){{0,2}}\s*\(\s*({_NUM})\s*%\s*\)"
)
_WORD_NUMBER = "|".join(_NUMBER_WORDS)
_TIMES_WORDS = {"once": 1, "twice": 2, "thrice": 3}
_RATE = (
    r"(?:(?P<n>\d+|" + _WORD_NUMBER + r")\s*(?:x|×|times)\s*|(?P<word>once|twice|thrice)\s*)"
    r"(?:(?:visits?|sessions?|treatments?)\s*)?"
    r"(?:(?:/|per|an?|each|every)\s*(?P<per>week|wk|month|mo)s?\b|(?P<ly>week|month)ly\b)"
    r"|(?P<plain>\d+|" + _WORD_NUMBER + r")\s*(?:(?:visits?|sessions?|treatments?)\s*)?"
    r"(?:/|per\s|each\s|every\s|a\s)\s*(?P<plain_per>week|wk|month|mo)s?\b"
)
_RATE_AT = re.compile(rf"(?<![\w.])(?:{_RATE})", re.I)
"""A frequency ("2x/week", "twice weekly", "3 visits per week", "once a month"): a number of
times per week or month, never a count by itself."""
_LENGTH = re.compile(
    r"\s*(?:,?\s*(?:x|×|for|over)|,|;?\s+duration\s*:?)\s*"
    rf"(?:the\s+next\s+)?(?P<m>\d+|{_WORD_NUMBER})\s*(?P<span>week|wk|month|mo)s?\b",
    re.I,
)
"""How long a frequency runs: "x 8 wks", "for 12 weeks", ", 12 weeks", a form's "Frequency: 2 x
per week   Duration: 12 weeks"."""
_THEN = re.compile(r"\s*[,;]?\s*(?:and\s+)?(?:then|followed\s+by)\s*", re.I)
_WEEKS_PER_MONTH = 52 / 12
_FEET_INCHES = re.compile(
    r"(\d)\s*(?:'|’|ft|feet|foot)\s*(\d{1,2}(?:\.\d+)?)\s*(?:\"|”|''|in(?:ches)?)?",
    re.IGNORECASE,
)
_MONTHS = (
    {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
    | {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
    | {"sept": 9}
)
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DATE_PATTERNS = (
    (re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)"), "ymd"),
    (re.compile(r"(?<!\d)(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?!\d)"), "mdy"),
    (re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), "Mdy"),
    (re.compile(rf"\b(\d{{1,2}})\s+({_MONTH})\.?,?\s+(\d{{4}})\b", re.I), "dMy"),
    (re.compile(rf"\b(early|mid|late)[\s-]+({_MONTH})\.?,?\s+(\d{{4}})\b", re.I), "PMy"),
    (re.compile(rf"\b({_MONTH})\.?,?\s+(\d{{4}})\b", re.I), "My"),
    (re.compile(r"(?<!\d)(\d{1,2})/(\d{4})(?!\d)"), "my"),
    (re.compile(r"(?<![\d/-])(\d{4})-(\d{1,2})(?![\d-])"), "ym"),
    (re.compile(r"\b(spring|summer|fall|autumn|winter)(?:\s+of)?,?\s+(\d{4})\b", re.I), "Sy"),
    (re.compile(r"\b(early|mid|late)[\s-]+(\d{4})\b", re.I), "Py"),
    (re.compile(r"\b(?:since|in|from|onset|began|started)\s+(\d{4})\b(?![-/])", re.I), "y"),
)
_SEASON_MIDDLE = {"winter": (1, 15), "spring": (4, 15), "summer": (7, 15), "fall": (10, 15)}
_SEASON_MIDDLE["autumn"] = _SEASON_MIDDLE["fall"]
"""Middles of the seasons (northern, meteorological); a season spans 45 days either side."""
_PART_OF_YEAR = {"early": (2, 15), "mid": (7, 1), "late": (11, 15)}
_NOT_A_YEAR_AFTER = (
    r"(?![\d./:-])(?!\s*(?:%|/|(?:mg|mcg|µg|g|kg|ml|l|kcal|cal|units?|iu|steps|lbs?|cc|mm|cm|m"
    r"|ms|msec|hrs?|h|min|sec|s|mmhg|x)\b))"
)
_YEAR_BESIDE = re.compile(rf"[\s(,]{{0,3}}((?:19[5-9]|20\d)\d){_NOT_A_YEAR_AFTER}", re.I)
_YEAR_AT_START = re.compile(rf"\s*\(?((?:19[5-9]|20\d)\d){_NOT_A_YEAR_AFTER}", re.I)
_YEAR_AT_END = re.compile(r"(?<![\d./:-])((?:19[5-9]|20\d)\d)\)?\.?\s*$")
_YEAR_BEFORE = re.compile(
    rf"(?<![\d./:-])((?:19[5-9]|20\d)\d){_NOT_A_YEAR_AFTER}[\s,]{{1,2}}$", re.I
)
_SPAN_UNITS = r"(days?|d|weeks?|wks?|months?|mos?|years?|yrs?)"
_AMOUNT = rf"({_NUM}|(?:{'|'.join(_NUMBER_WORDS)}|a|an)\b)"
"""A number or a number word; a word must end there ("and" is not "an" + "d")."""
_AGO = re.compile(rf"\b{_AMOUNT}[\s-]*{_SPAN_UNITS}\s+(?:ago|prior|earlier|before)\b", re.I)
_DURATION = re.compile(
    rf"(?:\b(?:for|x|×|lasting|over|past|last|duration(?:\s+of)?:?|persist\w*|ongoing)\s+"
    rf"(?:the\s+)?(?:past\s+|last\s+)?(?:about\s+|around\s+|approximately\s+|approx\.?\s+)?"
    rf"{_AMOUNT}\+?[\s-]*{_SPAN_UNITS}\b"
    rf"|\b{_AMOUNT}\+?[\s-]*{_SPAN_UNITS}['’]?[\s-]+(?:history|duration|of)\b)",
    re.I,
)
_NEAR_BEFORE = re.compile(r"[\d.,]+(?:\s*(?:-|–|to)\s*[\d.,]+)?(?:-|\s*)(?:[\w/%]+(?:-|\s+)){0,2}")
"""A value, then at most two words, up to a name: "12 visits", "54-year-old"; a dash set
apart by spaces parts them ("66F - Physical therapy for …")."""
_DAYS_PER = {"d": 1.0, "w": 7.0, "m": 365.25 / 12, "y": 365.25}


@dataclass(frozen=True, slots=True)
class Measured:
    """A number (or range) read from text, with the unit it was written in, if any."""

    low: float
    high: float
    unit: str | None
    start: int
    end: int
    approximate: bool = False
    """Written as an estimate ("~35", "about 35", "approximately 35")."""
    bound: Bound | None = None
    """Written as a bound, not a value: `<`, `<=`, `>` or `>=` ("EF <30%", "BMI over 40")."""

    def in_unit(self, unit: str) -> tuple[float, float] | None:
        """The value in `unit`; a unitless value is taken as already in it."""
        if self.unit is None:
            if unit == "percent" and self.high <= 1.0 and not self.approximate:
                return self.low * 100, self.high * 100
            return self.low, self.high
        low, high = convert(self.low, self.unit, unit), convert(self.high, self.unit, unit)
        if low is None or high is None:
            return None
        return low, high


@dataclass(frozen=True, slots=True)
class TimePoint:
    """When an event happened, as read from text (`start`/`end` locate the phrase)."""

    date: dt.date
    start: int
    end: int
    earliest: dt.date | None = None
    """First day of the period a month, a season or a year alone names ("in 2026": Jan 1);
    `date` is its middle. None when the day is written."""
    latest: dt.date | None = None
    """Last day of that period ("in 2026": Dec 31)."""

    @property
    def days(self) -> tuple[dt.date, dt.date]:
        """The first and last day the event may have happened on."""
        return self.earliest or self.date, self.latest or self.date

    def surely_after(self, day: dt.date) -> bool:
        """The whole period lies after `day` (a plan), not just its middle."""
        return self.days[0] > day


def _number(text: str) -> float:
    return float(text.replace(",", "."))


def _amount(text: str) -> float:
    text = text.lower()
    if text in ("a", "an"):
        return 1.0
    return float(_NUMBER_WORDS[text]) if text in _NUMBER_WORDS else _number(text)


def _unit_after(text: str, position: int, vocabulary: Vocabulary) -> tuple[str | None, int]:
    """The unit spelled right after a number, longest spelling first; (None, position) if none."""
    rest = text[position : position + 24]
    stripped = rest.lstrip(" \t-")  # "6-month", "12 weeks"
    offset = position + len(rest) - len(stripped)
    lowered = stripped.lower()
    for spelling in vocabulary.spellings_longest_first:
        if lowered.startswith(spelling):
            end = len(spelling)
            if end < len(stripped) and spelling[-1].isalpha() and stripped[end].isalpha():
                continue
            return vocabulary.unit_for(spelling), offset + end
    return None, position


_MONTH_DAY = re.compile(
    r"(?<![\w/.])(?:0[1-9]/(?:[0-2]?\d|3[01])|(?:1[0-2]|[1-9])/0[1-9])(?![\w/]|\.\d)"
)
"""A day of a month without its year, told from a fraction by its zero ("records requested
02/17", "seen 3/05"): no count."""


def parse_measured(
    text: str,
    vocabulary: Vocabulary,
    periods: bool = False,
    trends: bool = False,
    today: dt.date | None = None,
    bounds: bool = False,
) -> list[Measured]:
    """Every number or range in `text` with its unit (feet and inches become inches); with
    `bounds`, a number written as a bound too ("<30%", "more than 40"), marked as one; with
    `periods`, a span between two dates too, as days ("10/2025-01/2026": 62 to 122 days), and
    from a date to `today`, the note's date, where the text says it still runs ("150 mg since
    11/03/2025"). With `trends`, only the changes a text reports, as percent of the first
    value ("score 21 -> 20": -4.8 percent)."""
    if trends:
        return _trends(text, vocabulary)
    found: list[Measured] = []
    dates = find_dates(text, None)
    covered = [(point.start, point.end) for point in dates]
    covered += [match.span() for match in _MONTH_DAY.finditer(text)]
    if periods:
        found += _periods(text, dates)
        if today is not None:
            found += _ongoing(text, dates, today)
    for match in _PART_OF_WHOLE.finditer(text):
        # "49 of 84 nights (58%)": the share is the value, not the counts it comes from.
        share = _number(match.group(1))
        found.append(Measured(share, share, "percent", match.start(), match.end()))
        covered.append(match.span())
    totals, frequencies = _schedules(text)
    found += totals
    covered += frequencies
    for match in _FEET_INCHES.finditer(text):
        inches = int(match.group(1)) * 12 + _number(match.group(2))
        found.append(Measured(inches, inches, "inch", match.start(), match.end()))
        covered.append(match.span())
    for match in _NUMBER.finditer(text):
        if any(start <= match.start() < end for start, end in covered):
            continue
        reach = max(0, match.start() - 24)
        bound, bound_start = _bound(text[reach : match.start()]) if bounds else (None, 0)
        if bound is None and _THRESHOLD_BEFORE.search(text[reach : match.start()]):
            continue
        low = _number(match.group(1))
        ranged = match.group(2) is not None and not any(
            match.end(1) < start < match.end() for start, _ in covered
        )  # "97814 - 2x/week": a code, then a frequency, is no range
        high = _number(match.group(2)) if ranged else low
        unit, end = _unit_after(text, match.end() if ranged else match.end(1), vocabulary)
        if unit is None and _GLUED_WORD.match(text, end):
            continue  # "66F", "2nd", "10am": part of a word, no reading
        if unit is None and _in_address(text, match.start(), end):
            continue  # "77 Elm St", "Suite 200": where, not how many
        if bound is not None and (
            _ASKED.match(text, end) or _NORM.search(text, max(0, match.start() - 48), match.start())
        ):
            continue  # "Score >= 10: [x] yes", "goal weight < 90 kg": a question or a norm
        approximate = _APPROXIMATE.search(text[max(0, match.start() - 16) : match.start()])
        found.append(
            Measured(
                min(low, high),
                max(low, high),
                unit,
                match.start() if bound is None else reach + bound_start,
                end,
                approximate is not None,
                bound,
            )
        )
    return sorted(found, key=lambda m: m.start)


_STREET_AFTER = re.compile(
    r"[^\S\n]+(?:[A-Z][\w'’.-]*[^\S\n]+){1,3}"
    r"(?:St|Street|Ave|Avenue|Rd|Road|Blvd|Boulevard|Dr|Drive|Ln|Lane|Way|Ct|Court|Pl|Place"
    r"|Pkwy|Parkway|Hwy|Highway|Ter|Terrace|Cir|Circle|Sq|Square)\b"
)
_UNIT_BEFORE = re.compile(
    r"\b(?:Suite|Ste|Apt|Unit|Room|Rm|Floor|Fl|Bldg|Building|P\.?O\.?\s*Box|Box)\.?[^\S\n]*#?[^\S\n]*$",
    re.I,
)


def _in_address(text: str, start: int, end: int) -> bool:
    """Whether a number is part of an address: a house number before a street's name ("77 Elm
    St") or the number of a suite, room or box ("Suite 200")."""
    return bool(
        _STREET_AFTER.match(text, end) or _UNIT_BEFORE.search(text, max(0, start - 16), start)
    )


def _schedules(text: str) -> tuple[list[Measured], list[tuple[int, int]]]:
    """Visits a schedule adds up to ("2x/week x 4 weeks, then 1x/week x 6 weeks" is 14), and
    the spans of every frequency: a frequency is no count of its own ("2 per week" read as 2
    visits would pass a limit of 12 that 16 fails). A schedule one of whose parts has no
    length ("…, then weekly") adds up to nothing. Lengths stay durations."""
    totals: list[Measured] = []
    frequencies: list[tuple[int, int]] = []
    position = 0
    while (rate := _RATE_AT.search(text, position)) is not None:
        frequencies.append(rate.span())
        start, total, exact, end = rate.start(), 0.0, True, rate.end()
        while (length := _LENGTH.match(text, end)) is not None:
            times, whole = _times(rate, length)
            total, exact, end = total + times, exact and whole, length.end()
            then = _THEN.match(text, end)
            if then is None:
                break
            following = _RATE_AT.match(text, then.end())
            if following is None:
                total = 0.0  # "…, then weekly": a part that counts no times
                break
            rate, end = following, following.end()
            frequencies.append(rate.span())
            if _LENGTH.match(text, end) is None:
                total = 0.0  # an open-ended part: the schedule has no total
        if total:
            totals.append(Measured(total, total, "visit", start, end, not exact))
        position = end
    return totals, frequencies


def _times(rate: re.Match[str], length: re.Match[str]) -> tuple[float, bool]:
    """How many times a frequency comes to over a length, and whether exactly (weeks and
    months mixed are counted at 52/12 weeks a month)."""
    count = rate.group("n") or rate.group("plain")
    per_time = _amount(count) if count else float(_TIMES_WORDS[rate.group("word").lower()])
    per = (rate.group("per") or rate.group("plain_per") or rate.group("ly")).lower()[0]
    span = length.group("span").lower()[0]
    times = per_time * _amount(length.group("m"))
    if per == span:
        return times, True
    return (times * _WEEKS_PER_MONTH if per == "w" else times / _WEEKS_PER_MONTH), False


def _bound(before: str) -> tuple[Bound | None, int]:
    """The bound a number is written as, from the words right before it, and where those
    words start (None for a value)."""
    found = _BOUND_BEFORE.search(before)
    if found is None:
        return None, 0
    return _bound_of(found), found.start()


def measured_near(
    text: str,
    start: int,
    end: int,
    vocabulary: Vocabulary,
    periods: bool = False,
    trends: bool = False,
    today: dt.date | None = None,
    bounds: bool = False,
) -> list[Measured]:
    """Values that belong to the name at `text[start:end]`: right after it ("HbA1c 7.2%",
    "EF of 25-30 %") or, failing that, right before it ("54-year-old", "12 visits").

    Right after the name, a run of values joined by "x" or "for" belongs to it as a whole
    ("sertraline 200 mg x 10 wk": a dose and a duration); the caller takes the first one in
    the unit it wants.
    """
    values = parse_measured(text, vocabulary, periods, trends, today, bounds)
    aside = _NAME_ASIDE.match(text, end)
    if aside is not None:  # "AHI (4% hypopnea rule, CMS): 11.2": the aside qualifies the name
        past = [
            v
            for v in values
            if v.start >= aside.end() and _FILLER.match(text[aside.end() : v.start])
        ]
        if past:
            return _run_from(past[0], values, text)
    after = [
        value
        for value in values
        if value.start >= end and _FILLER.match(text[end : value.start]) is not None
    ]
    if after:
        return _run_from(after[0], values, text)
    before = [
        value
        for value in values
        if value.start < start
        and value.end <= end
        and _NEAR_BEFORE.fullmatch(text[value.start : start]) is not None
    ]
    return before[-1:]


_STEP = r"\s*+(?:\([^()]{0,24}\)\s*+)?(?:->|-->|→|=>|⇒|⟶)\s*+"
_FIRST_VALUE = r"(?:baseline|initial(?:ly)?|at\s+intake|intake|pre-?treatment|previously|was)"
"""Words that mark, in a parenthesis after a value, the value it started from."""
_TREND = re.compile(
    rf"(?<![\w.,/-])(?:from\s+({_NUM})\s+to\s+({_NUM})|({_NUM})%?((?:{_STEP}{_NUM}%?)++)"
    rf"|(\d+)/(\d+){_STEP}(\d+)/\6(?!\d)"
    rf"|({_NUM})[^\S\n]*(?:%|percent)?[^\S\n]*,?[^\S\n]*(?:down|up)[^\S\n]+from[^\S\n]+({_NUM})"
    rf"|({_NUM})[^\S\n]*(?:%|/\d+)?[^\S\n]*\([^\S\n]*{_FIRST_VALUE}[^\S\n]*:?[^\S\n]*({_NUM})"
    r"(?:%|/\d+)?[^\S\n]*\))",
    re.I,
)
"""A reported change: "21 -> 20", "20 (intake) -> 13 (wk 8) -> 8 (final)", "from 38 to 35",
"44% -> 26%", "26 percent, down from 44", "ODI 46% (baseline 44%)", or scores out of the
same whole, "NRS 7/10 -> 3/10".
Possessive steps and nothing required after them: a chain is read once, however long (no page
can stall the reader)."""
_ASIDE = re.compile(r"\([^()]{0,24}\)")


def _trends(text: str, vocabulary: Vocabulary) -> list[Measured]:
    """Changes as percent of the first value; first and last value of a chain count."""
    found = []
    for match in _TREND.finditer(text):
        unit, _ = _unit_after(text, match.end(), vocabulary)
        if unit not in (None, "percent") or text[match.end() : match.end() + 1] == "/":
            continue  # "50->100 mg" is a titration, "3->4.5/10" a part of a whole
        if match.group(1):
            first, last = match.group(1), match.group(2)
        elif match.group(5):
            first, last = match.group(5), match.group(7)
        elif match.group(8):
            first, last = match.group(9), match.group(8)  # "26 percent, down from 44"
        elif match.group(10):
            first, last = match.group(11), match.group(10)  # "ODI 46% (baseline 44%)"
        else:
            first, last = match.group(3), re.findall(_NUM, _ASIDE.sub("", match.group(4)))[-1]
        before = _number(first)
        if before:
            change = (_number(last) - before) / before * 100
            found.append(Measured(change, change, "percent", match.start(), match.end()))
    return found


_BETWEEN_DATES = re.compile(
    r"\s*(?:-|–|—|to|through|thru|until"
    r"|[,;]?\s*(?:and\s+)?(?:stopped|discontinued|ended|d/c'?d?|tapered off)(?:\s+on)?)\s*",
    re.I,
)
"""What joins the two dates of a span: "10/2025-01/2026", "started 10/20/2025, stopped 12/01"."""


def _periods(text: str, dates: list[TimePoint]) -> list[Measured]:
    """Days between two dates written as one span ("2025-12-15 to 2026-02-09"); a date that
    names only a month spans its whole month, so the days are a range."""
    spans = (
        _span(first.days, second.days, first.start, second.end)
        for first, second in pairwise(dates)
        if _BETWEEN_DATES.fullmatch(text[first.end : second.start])
    )
    return [span for span in spans if span is not None]


_SINCE = re.compile(r"\bsince\s*$", re.I)


def _ongoing(text: str, dates: list[TimePoint], today: dt.date) -> list[Measured]:
    """Days from a date that a "since" opens to `today` (a range for a month's date)."""
    spans = (
        _span(point.days, (today, today), point.start, point.end)
        for point in dates
        if _SINCE.search(text[max(0, point.start - 8) : point.start])
    )
    return [span for span in spans if span is not None]


def _span(
    first: tuple[dt.date, dt.date], second: tuple[dt.date, dt.date], start: int, end: int
) -> Measured | None:
    """Days from one period to a later one, as the fewest and the most they may be (None
    unless the second ends after the first begins)."""
    (first_low, first_high), (second_low, second_high) = first, second
    high = (second_high - first_low).days
    if high <= 0:
        return None
    return Measured(max(0, (second_low - first_high).days), high, "day", start, end)


def _run_from(first: Measured, values: list[Measured], text: str) -> list[Measured]:
    run = [first]
    for value in (v for v in values if v.start > first.start):
        if not _JOINED.fullmatch(text[run[-1].end : value.start]):
            break
        run.append(value)
    return run


def find_dates(text: str, today: dt.date | None) -> list[TimePoint]:
    """Absolute dates ("2026-01-10", "01/10/2026", "Jan 10, 2026", "March 2026") and relative
    ones ("69 days ago", "3 weeks prior", counted back from `today`, the note's date)."""
    points: list[TimePoint] = []
    taken: list[tuple[int, int]] = []
    for pattern, order in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            if any(s <= match.start() < e for s, e in taken):
                continue
            date = _to_date(match.groups(), order)
            if date is not None:
                points.append(TimePoint(date, *match.span(), *_period(date, order)))
                taken.append(match.span())
    if today is not None:
        for match in _AGO.finditer(text):
            days = _amount(match.group(1)) * _DAYS_PER[match.group(2)[0].lower()]
            points.append(TimePoint(today - dt.timedelta(days=days), match.start(), match.end()))
    return sorted(points, key=lambda p: p.start)


def find_durations(text: str) -> list[tuple[float, int, int]]:
    """Stated durations in days ("for 14 weeks", "x 4 months", "6-month history")."""
    found: list[tuple[float, int, int]] = []
    for match in _DURATION.finditer(text):
        amount, unit = (
            (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        )
        days = _amount(amount) * _DAYS_PER[unit[0].lower()]
        found.append((days, match.start(), match.end()))
    return found


_BOUNDED_DURATION = re.compile(
    rf"{_bound_written(k for k in _BOUNDS if k != 'over')}\s*{_AMOUNT}\+?[\s-]*{_SPAN_UNITS}\b",
    re.I,
)
"""A duration written as a bound (">3 months", "more than a year", "less than 6 weeks"); "over
6 months" is left out, as it is as often the length itself ("pain over the past 6 months")."""


def find_bounded_durations(text: str) -> list[tuple[float, Bound, int, int]]:
    """Durations written as bounds, in days, with the bound."""
    found: list[tuple[float, Bound, int, int]] = []
    for match in _BOUNDED_DURATION.finditer(text):
        days = _amount(match.group(3)) * _DAYS_PER[match.group(4)[0].lower()]
        found.append((days, _bound_of(match), match.start(), match.end()))
    return found


_RIGHT_AFTER = re.compile(
    rf"[\s:(,~≈x×-]{{0,4}}(?:about\s+|approximately\s+|approx\.?\s+)?"
    rf"{_AMOUNT}\+?[\s-]*{_SPAN_UNITS}\b",
    re.I,
)


def duration_right_after(text: str, position: int) -> tuple[float, int, int] | None:
    """A bare duration standing right after a name ("LBP ~10 wks", "pain 4 months"), in days."""
    match = _RIGHT_AFTER.match(text, position)
    if match is None:
        return None
    days = _amount(match.group(1)) * _DAYS_PER[match.group(2)[0].lower()]
    return days, match.start(), match.end()


def _period(date: dt.date, order: str) -> tuple[dt.date | None, dt.date | None]:
    """The first and last day of what a date names when it names no day (None, None)."""
    if order == "y":
        return dt.date(date.year, 1, 1), dt.date(date.year, 12, 31)
    if order in ("My", "my", "ym"):
        return _days_of(date.year, date.month)
    if order in ("Sy", "Py"):
        return date - dt.timedelta(days=45), date + dt.timedelta(days=45)
    if order == "PMy":  # the part of the month whose middle `date` is
        part = next(p for p, (first, last) in _PART_OF_MONTH.items() if first <= date.day <= last)
        return _days_of(date.year, date.month, part)
    return None, None


def _days_of(year: int, month: int, part: str = "") -> tuple[dt.date, dt.date]:
    """The first and last day of a month, or of its early, mid or late part."""
    last = calendar.monthrange(year, month)[1]
    first_day, last_day = _PART_OF_MONTH.get(part, (1, last))
    return dt.date(year, month, first_day), dt.date(year, month, min(last_day, last))


def _to_date(groups: tuple[str | None, ...], order: str) -> dt.date | None:
    try:
        match order:
            case "ymd":
                return dt.date(int(groups[0]), int(groups[1]), int(groups[2]))
            case "mdy":
                year = int(groups[2])
                year = year + 2000 if year < 100 else year
                return dt.date(year, int(groups[0]), int(groups[1]))
            case "Mdy":
                return dt.date(int(groups[2]), _MONTHS[groups[0].lower()], int(groups[1]))
            case "dMy":
                return dt.date(int(groups[2]), _MONTHS[groups[1].lower()], int(groups[0]))
            case "PMy":
                day = _PART_OF_MONTH[groups[0].lower()][0] + 4  # _period widens it to the part
                return dt.date(int(groups[2]), _MONTHS[groups[1].lower()], day)
            case "My":
                return dt.date(int(groups[1]), _MONTHS[groups[0].lower()], 15)
            case "my":
                return dt.date(int(groups[1]), int(groups[0]), 15)
            case "ym":
                return dt.date(int(groups[0]), int(groups[1]), 15)
            case "y":
                year = int(groups[0])
                return dt.date(year, 7, 1) if 1900 <= year <= 2100 else None
            case "Sy":
                return dt.date(int(groups[1]), *_SEASON_MIDDLE[groups[0].lower()])
            case "Py":
                return dt.date(int(groups[1]), *_PART_OF_YEAR[groups[0].lower()])
    except (ValueError, KeyError, TypeError):
        return None
    return None


_BARE_MONTH = re.compile(
    rf"\b(?:since|in|from|(mid|early|late))(?:[\s-]+(mid|early|late))?[\s-]+({_MONTH})\b"
    r"(?!\.?,?\s*\d)",
    re.I,
)
_PART_OF_MONTH = {"early": (1, 10), "mid": (11, 20), "late": (21, 31)}


def year_at_either_end(text: str) -> list[TimePoint]:
    """A year that opens or closes a short text such as a fact's value ("2017 inferior STEMI",
    "inferior STEMI (2017)"), as a one-item list (empty without one)."""
    found = _YEAR_AT_START.match(text) or _YEAR_AT_END.search(text)
    return [] if found is None else [_year_point(found)]


def year_beside(text: str, start: int, end: int) -> TimePoint | None:
    """A year written right after or right before a name, with nothing between: "inferior
    STEMI 2017", "2017 STEMI" (not "STEMI 2000 mg", nor a number inside a date)."""
    found = _YEAR_BESIDE.match(text, end) or _YEAR_BEFORE.search(text, max(0, start - 8), start)
    return None if found is None else _year_point(found)


def _year_point(found: re.Match[str]) -> TimePoint:
    """The whole year a match's first group names, dated at its middle."""
    middle = dt.date(int(found.group(1)), 7, 1)
    return TimePoint(middle, *found.span(1), *_period(middle, "y"))


def month_only(text: str, today: dt.date) -> list[TimePoint]:
    """A bare month ("since March", "mid-December") as its latest occurrence before `today`:
    the period it names (all of December; the 11th to the 20th for "mid-December"), since any
    of its days may be the one meant."""
    points: list[TimePoint] = []
    for match in _BARE_MONTH.finditer(text):
        month = _MONTHS[match.group(3).lower()]
        part = (match.group(2) or match.group(1) or "").lower()
        year = today.year if month <= today.month else today.year - 1
        earliest, latest = _days_of(year, month, part)
        middle = earliest + (latest - earliest) / 2
        points.append(TimePoint(middle, match.start(3), match.end(3), earliest, latest))
    return points
