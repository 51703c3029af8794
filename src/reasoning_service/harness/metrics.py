"""Scores of criterion results against gold labels: pure functions over (example, result) pairs.

Definitions (every rate is 0.0 when its denominator is empty; the counts say so):

- **status accuracy**: share of examples whose predicted status equals the gold status.
- **per-status precision / recall / F1**: one-vs-rest for each status; **macro-F1** averages F1
  over the statuses that occur in the gold labels or the predictions.
- **unsafe-met rate**: among examples whose gold status is `not_met` or `missing_info`, the
  share predicted `met` (the only error that can turn into a wrong approval).
- **citation accuracy**: per example, the mean of the parts that apply (a part applies when the
  gold has something to cite), then averaged over examples where at least one part applies:
  - policy part (1 or 0): some policy citation *matches* the gold policy quote;
  - case part (an F1): precision = share of cited case quotes that match some gold case quote,
    recall = share of gold case quotes matched by some cited quote. For TrialGPT examples
    (`gold_sentence_ids` set) a cited quote matches when it falls in a gold sentence of the note.
  Two quotes *match* when, after lowercasing and collapsing punctuation and whitespace, one is a
  substring of the other and the shorter has at least a fifth of the longer's tokens (so neither
  one word nor a whole section counts), or when their token-set Jaccard is at least 0.5.
- **reasoning coherence** (no LLM): per example, the mean of the checks that apply:
  1. the rationale says something (at least five words);
  2. a decisive status (`met`, `not_met`) cites case evidence;
  3. the rationale mentions each cited case quote: a content token (a number, or a word of four
     or more letters) of the quote or the fact's field name appears in the rationale; the
     share of cited quotes mentioned;
  4. the trace does not contradict the status: no `decision` step and no `finish` call names
     another status (skipped when the final status is `uncertain`, an abstention overriding a
     decision on purpose);
  5. numbers agree with a threshold: when the cited policy text holds exactly one comparison
     ("≥ 35", "greater than or equal to 15 events", "at least 6 months" …) and the cited case
     quotes hold exactly one number of the same unit (the word after the number), a `met` or
     `not_met` status must agree with comparing the two.
- **calibration**: expected calibration error over 10 equal-width confidence bins
  (ECE = Σ n_b/N · |accuracy_b − mean confidence_b|), with the confidence read as the chance the
  predicted status is correct; every result counts, abstentions too. The score uses 1 − ECE.
- **abstention rate**: share of results with status `uncertain`.
- **cost**: mean tokens (in, out, total), LLM calls, tool calls and latency per example.
- **composite** = 0.4·citation accuracy + 0.3·reasoning coherence + 0.2·(1 − ECE)
  + 0.1·status accuracy (DESIGN.md, "Offline prompt optimisation").

`example_score` applies the same weights to one example (with 1 − |confidence − correct| for
calibration), and `feedback_for` says in words what an example got wrong; GEPA uses both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from pydantic import BaseModel, Field

from reasoning_service.harness.datasets import LabeledExample, note_sentences
from reasoning_service.models import CriterionResult, CriterionStatus, StepKind

__all__ = [
    "COMPOSITE_WEIGHTS",
    "CalibrationBin",
    "CitationScore",
    "CostMetrics",
    "EvalMetrics",
    "Pair",
    "StatusScores",
    "citation_accuracy",
    "citation_score",
    "coherence_checks",
    "compute_metrics",
    "confusion_matrix",
    "cost_metrics",
    "example_score",
    "expected_calibration_error",
    "feedback_for",
    "macro_f1",
    "per_status_scores",
    "quotes_match",
    "reasoning_coherence",
    "reliability_table",
    "status_accuracy",
    "unsafe_met_rate",
]

Pair = tuple[LabeledExample, CriterionResult]
"""A gold example and the result the service gave for it."""

COMPOSITE_WEIGHTS = {"citation": 0.4, "coherence": 0.3, "calibration": 0.2, "status": 0.1}
"""The seed's weights (DESIGN.md, "Offline prompt optimisation")."""

STATUSES: tuple[CriterionStatus, ...] = tuple(CriterionStatus)
UNSAFE_GOLD = frozenset({CriterionStatus.NOT_MET, CriterionStatus.MISSING_INFO})
DECISIVE = frozenset({CriterionStatus.MET, CriterionStatus.NOT_MET})
N_BINS = 10
MIN_CONTAINED_SHARE = 0.2
MIN_JACCARD = 0.5

_TRANSLATION = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "–": "-", "—": "-"})
_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
_STATUS_WORD = re.compile(r"\b(not_met|missing_info|not_applicable|uncertain|met)\b")
_SPACED_STATUS = re.compile(r"\b(not met|missing info|not applicable)\b")


def _join_words(match: re.Match[str]) -> str:
    return match.group(1).replace(" ", "_")


# --- status ---------------------------------------------------------------------------------


def _rate(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def status_accuracy(pairs: Sequence[Pair]) -> float:
    """Share of examples whose predicted status is the gold status."""
    return _rate(sum(r.status == e.gold_status for e, r in pairs), len(pairs))


class StatusScores(BaseModel):
    """One-vs-rest scores of one status."""

    status: CriterionStatus
    precision: float
    recall: float
    f1: float
    support: int
    """Examples with this gold status."""
    predicted: int
    """Results with this status."""


def per_status_scores(pairs: Sequence[Pair]) -> list[StatusScores]:
    """Precision, recall and F1 of every status, in `CriterionStatus` order."""
    scores = []
    for status in STATUSES:
        tp = sum(e.gold_status == status and r.status == status for e, r in pairs)
        support = sum(e.gold_status == status for e, _ in pairs)
        predicted = sum(r.status == status for _, r in pairs)
        precision, recall = _rate(tp, predicted), _rate(tp, support)
        f1 = _rate(2 * precision * recall, precision + recall)
        scores.append(
            StatusScores(
                status=status,
                precision=precision,
                recall=recall,
                f1=f1,
                support=support,
                predicted=predicted,
            )
        )
    return scores


def macro_f1(pairs: Sequence[Pair]) -> float:
    """Mean F1 over the statuses present in the gold labels or the predictions."""
    present = [s for s in per_status_scores(pairs) if s.support or s.predicted]
    return _rate(sum(s.f1 for s in present), len(present))


def confusion_matrix(pairs: Sequence[Pair]) -> dict[str, dict[str, int]]:
    """Counts as matrix[gold][predicted], every status on both axes."""
    matrix = {g.value: {p.value: 0 for p in STATUSES} for g in STATUSES}
    for example, result in pairs:
        matrix[example.gold_status.value][result.status.value] += 1
    return matrix


def unsafe_met_rate(pairs: Sequence[Pair]) -> tuple[float, int, int]:
    """(rate, unsafe count, denominator): `met` predicted where gold is not_met or missing_info.

    The denominator is the number of examples whose gold status is not_met or missing_info.
    """
    at_risk = [r for e, r in pairs if e.gold_status in UNSAFE_GOLD]
    unsafe = sum(r.status == CriterionStatus.MET for r in at_risk)
    return _rate(unsafe, len(at_risk)), unsafe, len(at_risk)


# --- citations ------------------------------------------------------------------------------


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.translate(_TRANSLATION).lower())


def quotes_match(cited: str, gold: str) -> bool:
    """Whether a cited quote is the gold quote, give or take (see the module docstring).

    Containment is checked on the normalised text, so a quote cut mid-word still counts.
    """
    a, b = _tokens(cited), _tokens(gold)
    if not a or not b:
        return False
    shorter, longer = sorted((a, b), key=len)
    contained = " ".join(shorter) in " ".join(longer)
    if contained and len(shorter) >= MIN_CONTAINED_SHARE * len(longer):
        return True
    set_a, set_b = set(a), set(b)
    return len(set_a & set_b) / len(set_a | set_b) >= MIN_JACCARD


def _sentences_of(example: LabeledExample, quote: str) -> set[int]:
    """Ids of the note sentences a (TrialGPT) quote falls in or spans."""
    found: set[int] = set()
    for document in example.case.documents:
        for page in document.pages:
            for sentence_id, sentence in note_sentences(page).items():
                if quotes_match(quote, sentence) or _contains(quote, sentence):
                    found.add(sentence_id)
    return found


def _contains(outer: str, inner: str) -> bool:
    """A quote spanning several sentences contains each of them whole."""
    inner_tokens = _tokens(inner)
    return bool(inner_tokens) and " ".join(inner_tokens) in " ".join(_tokens(outer))


class CitationScore(NamedTuple):
    """Citation parts of one example; a part is None when the gold has nothing to cite."""

    policy: float | None
    case: float | None
    missed_gold_quotes: list[str]
    unmatched_cited_quotes: list[str]

    @property
    def score(self) -> float | None:
        parts = [p for p in (self.policy, self.case) if p is not None]
        return sum(parts) / len(parts) if parts else None


def citation_score(example: LabeledExample, result: CriterionResult) -> CitationScore:
    """Policy hit (0/1) and case-quote F1 of one example (see the module docstring)."""
    policy = None
    if example.gold_policy_quote.strip():
        policy = float(
            any(quotes_match(c.quote, example.gold_policy_quote) for c in result.policy_citations)
        )
    cited = [e.quote for e in result.case_evidence if e.quote.strip()]
    if example.gold_sentence_ids is not None:
        return _sentence_citation(example, cited, policy)
    gold = [q for q in example.gold_case_quotes if q.strip()]
    if not gold:
        return CitationScore(policy, None, [], [])
    matched_cited = [c for c in cited if any(quotes_match(c, g) for g in gold)]
    missed = [g for g in gold if not any(quotes_match(c, g) for c in cited)]
    case = _f1(_rate(len(matched_cited), len(cited)), _rate(len(gold) - len(missed), len(gold)))
    return CitationScore(policy, case, missed, [c for c in cited if c not in matched_cited])


def _sentence_citation(
    example: LabeledExample, cited: list[str], policy: float | None
) -> CitationScore:
    gold_ids = set(example.gold_sentence_ids or [])
    if not gold_ids:
        return CitationScore(policy, None, [], [])
    hit_ids: set[int] = set()
    unmatched: list[str] = []
    for quote in cited:
        ids = _sentences_of(example, quote) & gold_ids
        hit_ids |= ids
        if not ids:
            unmatched.append(quote)
    precision = _rate(len(cited) - len(unmatched), len(cited))
    recall = _rate(len(hit_ids), len(gold_ids))
    sentences = {
        i: s for d in example.case.documents for p in d.pages for i, s in note_sentences(p).items()
    }
    missed = [f"{i}. {sentences.get(i, '')}" for i in sorted(gold_ids - hit_ids)]
    return CitationScore(policy, _f1(precision, recall), missed, unmatched)


def _f1(precision: float, recall: float) -> float:
    return _rate(2 * precision * recall, precision + recall)


def citation_accuracy(pairs: Sequence[Pair]) -> tuple[float, float, float]:
    """(citation accuracy, policy-citation accuracy, case-citation F1), each over applicable."""
    scores = [citation_score(e, r) for e, r in pairs]
    overall = [s.score for s in scores if s.score is not None]
    policy = [s.policy for s in scores if s.policy is not None]
    case = [s.case for s in scores if s.case is not None]
    return (
        _rate(sum(overall), len(overall)),
        _rate(sum(policy), len(policy)),
        _rate(sum(case), len(case)),
    )


# --- reasoning coherence ----------------------------------------------------------------------

_OPERATORS: tuple[tuple[str, str], ...] = (
    (r"greater than or equal to|at least|no less than|not less than|≥|>=|=>", "ge"),
    (r"less than or equal to|at most|no more than|not more than|≤|<=|=<", "le"),
    (r"greater than|more than|above|over|exceeds?|>", "gt"),
    (r"less than|fewer than|below|under|<", "lt"),
)
_NUMBER = r"(\d+(?:\.\d+)?)\s*([a-zA-Z%/]*)"
_THRESHOLDS = [
    (re.compile(rf"(?<![A-Za-z])(?:{words})\s*{_NUMBER}", re.IGNORECASE), op)
    for words, op in _OPERATORS
]
_CASE_NUMBER = re.compile(rf"(?<![\w.]){_NUMBER}")


class Threshold(NamedTuple):
    op: str
    value: float
    unit: str


def _thresholds(text: str) -> list[Threshold]:
    """Comparisons written in policy text; an earlier (longer) operator wins a span."""
    found: list[tuple[int, Threshold]] = []
    taken: set[int] = set()
    for pattern, op in _THRESHOLDS:
        for match in pattern.finditer(text):
            if match.start(1) in taken:
                continue
            taken.add(match.start(1))
            found.append(
                (match.start(), Threshold(op, float(match.group(1)), _unit(match.group(2))))
            )
    return [t for _, t in sorted(found)]


def _unit(word: str) -> str:
    return word.lower().strip("/").split("/")[0]


def _compare(value: float, threshold: Threshold) -> bool:
    return {
        "ge": value >= threshold.value,
        "le": value <= threshold.value,
        "gt": value > threshold.value,
        "lt": value < threshold.value,
    }[threshold.op]


def _numeric_check(result: CriterionResult) -> float | None:
    """1/0 when one threshold and one same-unit case number are cited; None otherwise."""
    if result.status not in DECISIVE:
        return None
    thresholds = [t for c in result.policy_citations for t in _thresholds(c.quote)]
    if len(thresholds) != 1:
        return None
    threshold = thresholds[0]
    numbers = {
        (float(m.group(1)), _unit(m.group(2)))
        for e in result.case_evidence
        for m in _CASE_NUMBER.finditer(e.quote)
    }
    if threshold.unit:
        numbers = {n for n in numbers if n[1] == threshold.unit}
    if len(numbers) != 1:
        return None
    ((value, _),) = numbers
    expected = CriterionStatus.MET if _compare(value, threshold) else CriterionStatus.NOT_MET
    return float(result.status == expected)


def _content_tokens(text: str) -> set[str]:
    return {t for t in _tokens(text) if t[0].isdigit() or len(t) >= 4}


def _mentions_evidence(result: CriterionResult) -> float | None:
    if not result.case_evidence:
        return None
    rationale = set(_tokens(result.rationale))
    mentioned = sum(
        bool(_content_tokens(f"{e.quote} {e.field or ''}") & rationale)
        for e in result.case_evidence
    )
    return mentioned / len(result.case_evidence)


def _trace_statuses(result: CriterionResult) -> list[str]:
    """Statuses named by decision steps and `finish` calls of the trace."""
    named: list[str] = []
    for step in result.reasoning_trace:
        if step.kind == StepKind.DECISION:
            named += _STATUS_WORD.findall(_SPACED_STATUS.sub(_join_words, step.content.lower()))
        if step.kind == StepKind.TOOL_CALL and step.tool == "finish" and step.arguments:
            named.append(str(step.arguments.get("status", "")).lower())
    return [s for s in named if s]


def _trace_check(result: CriterionResult) -> float | None:
    if result.status == CriterionStatus.UNCERTAIN:
        return None
    named = _trace_statuses(result)
    if not named:
        return None
    return float(all(s == result.status.value for s in named))


def coherence_checks(result: CriterionResult) -> dict[str, float]:
    """The coherence checks that apply to one result, by name, each in [0, 1]."""
    checks: dict[str, float | None] = {
        "rationale_present": float(len(result.rationale.split()) >= 5),
        "decision_has_evidence": (
            float(bool(result.case_evidence)) if result.status in DECISIVE else None
        ),
        "rationale_mentions_evidence": _mentions_evidence(result),
        "trace_agrees_with_status": _trace_check(result),
        "numbers_agree_with_threshold": _numeric_check(result),
    }
    return {name: value for name, value in checks.items() if value is not None}


def _coherence(result: CriterionResult) -> float:
    checks = coherence_checks(result)
    return sum(checks.values()) / len(checks)


def reasoning_coherence(pairs: Sequence[Pair]) -> float:
    """Mean per-example coherence (see the module docstring)."""
    return _rate(sum(_coherence(r) for _, r in pairs), len(pairs))


# --- calibration ----------------------------------------------------------------------------


class CalibrationBin(BaseModel):
    """One confidence bin of the reliability table."""

    lower: float
    upper: float
    count: int
    mean_confidence: float
    accuracy: float


def reliability_table(pairs: Sequence[Pair], n_bins: int = N_BINS) -> list[CalibrationBin]:
    """Equal-width confidence bins with the accuracy inside each; 1.0 falls in the last."""
    members: list[list[tuple[float, bool]]] = [[] for _ in range(n_bins)]
    for example, result in pairs:
        index = min(int(result.confidence * n_bins), n_bins - 1)
        members[index].append((result.confidence, result.status == example.gold_status))
    return [
        CalibrationBin(
            lower=i / n_bins,
            upper=(i + 1) / n_bins,
            count=len(b),
            mean_confidence=_rate(sum(c for c, _ in b), len(b)),
            accuracy=_rate(sum(ok for _, ok in b), len(b)),
        )
        for i, b in enumerate(members)
    ]


def expected_calibration_error(pairs: Sequence[Pair], n_bins: int = N_BINS) -> float:
    """Σ over bins of (share of examples) · |accuracy − mean confidence|."""
    total = len(pairs)
    return (
        sum(
            b.count / total * abs(b.accuracy - b.mean_confidence)
            for b in reliability_table(pairs, n_bins)
        )
        if total
        else 0.0
    )


def abstention_rate(pairs: Sequence[Pair]) -> float:
    """Share of results that abstained (`uncertain`)."""
    return _rate(sum(r.status == CriterionStatus.UNCERTAIN for _, r in pairs), len(pairs))


# --- cost -----------------------------------------------------------------------------------


class CostMetrics(BaseModel):
    """Mean cost per example, from each result's `usage`."""

    mean_input_tokens: float = 0.0
    mean_output_tokens: float = 0.0
    mean_total_tokens: float = 0.0
    mean_llm_calls: float = 0.0
    mean_tool_calls: float = 0.0
    mean_latency_ms: float = 0.0


def cost_metrics(results: Sequence[CriterionResult]) -> CostMetrics:
    """Mean tokens, calls and latency per result."""
    n = len(results)
    return CostMetrics(
        mean_input_tokens=_rate(sum(r.usage.input_tokens for r in results), n),
        mean_output_tokens=_rate(sum(r.usage.output_tokens for r in results), n),
        mean_total_tokens=_rate(sum(r.usage.total_tokens for r in results), n),
        mean_llm_calls=_rate(sum(r.usage.llm_calls for r in results), n),
        mean_tool_calls=_rate(sum(r.usage.tool_calls for r in results), n),
        mean_latency_ms=_rate(sum(r.usage.latency_ms for r in results), n),
    )


# --- all together ---------------------------------------------------------------------------


class EvalMetrics(BaseModel):
    """Every metric of one run (definitions in the module docstring)."""

    n: int = 0
    composite: float = 0.0
    citation_accuracy: float = 0.0
    policy_citation_accuracy: float = 0.0
    case_citation_f1: float = 0.0
    reasoning_coherence: float = 0.0
    ece: float = 0.0
    calibration: float = 0.0
    """1 − ECE."""
    status_accuracy: float = 0.0
    macro_f1: float = 0.0
    unsafe_met_rate: float = 0.0
    unsafe_met: int = 0
    unsafe_met_denominator: int = 0
    """Examples whose gold status is not_met or missing_info."""
    abstention_rate: float = 0.0
    per_status: list[StatusScores] = Field(default_factory=list)
    confusion: dict[str, dict[str, int]] = Field(default_factory=dict)
    """matrix[gold][predicted]."""
    reliability: list[CalibrationBin] = Field(default_factory=list)
    cost: CostMetrics = Field(default_factory=CostMetrics)


def compute_metrics(pairs: Sequence[Pair]) -> EvalMetrics:
    """All metrics of a run, composite included."""
    citation, policy, case = citation_accuracy(pairs)
    coherence = reasoning_coherence(pairs)
    ece = expected_calibration_error(pairs)
    accuracy = status_accuracy(pairs)
    unsafe_rate, unsafe, at_risk = unsafe_met_rate(pairs)
    w = COMPOSITE_WEIGHTS
    return EvalMetrics(
        n=len(pairs),
        composite=(
            w["citation"] * citation
            + w["coherence"] * coherence
            + w["calibration"] * (1 - ece)
            + w["status"] * accuracy
        )
        if pairs
        else 0.0,
        citation_accuracy=citation,
        policy_citation_accuracy=policy,
        case_citation_f1=case,
        reasoning_coherence=coherence,
        ece=ece,
        calibration=1 - ece,
        status_accuracy=accuracy,
        macro_f1=macro_f1(pairs),
        unsafe_met_rate=unsafe_rate,
        unsafe_met=unsafe,
        unsafe_met_denominator=at_risk,
        abstention_rate=abstention_rate(pairs),
        per_status=per_status_scores(pairs),
        confusion=confusion_matrix(pairs),
        reliability=reliability_table(pairs),
        cost=cost_metrics([r for _, r in pairs]),
    )


def example_score(example: LabeledExample, result: CriterionResult) -> float:
    """The composite for one example, in [0, 1]; what GEPA maximises per example.

    Calibration of a single example is 1 − |confidence − correct|. An example with nothing to
    cite scores its citation part as 1, so it is not penalised for the gold's silence.
    """
    correct = float(result.status == example.gold_status)
    citation = citation_score(example, result).score
    w = COMPOSITE_WEIGHTS
    return (
        w["citation"] * (1.0 if citation is None else citation)
        + w["coherence"] * _coherence(result)
        + w["calibration"] * (1 - abs(result.confidence - correct))
        + w["status"] * correct
    )


# --- feedback -------------------------------------------------------------------------------

DEFAULT_EXPECTED_TOOLS: tuple[str, ...] = ("pi_search", "facts_get", "spans_tighten", "finish")
_CHECK_ADVICE = {
    "rationale_present": "The rationale is too short to explain the decision.",
    "decision_has_evidence": "A met/not_met decision was given without citing any case evidence.",
    "rationale_mentions_evidence": "The rationale does not mention some of the cited evidence.",
    "trace_agrees_with_status": "A decision step or finish call in the trace names a different "
    "status than the final one.",
    "numbers_agree_with_threshold": "The status contradicts the cited number and the policy "
    "threshold.",
}


def feedback_for(
    example: LabeledExample,
    result: CriterionResult,
    *,
    expected_tools: Sequence[str] = DEFAULT_EXPECTED_TOOLS,
) -> str:
    """What this result got wrong, in words, for a prompt optimiser to learn from.

    Contains gold quotes from the case: use it on evaluation data only, never log it.
    """
    lines = [_status_feedback(example, result)]
    lines += _citation_feedback(example, result)
    lines += [_CHECK_ADVICE[name] for name, v in coherence_checks(result).items() if v < 1.0]
    lines += _tool_feedback(result, expected_tools)
    if result.reason_code is not None:
        lines.append(f"The result carries reason_code={result.reason_code.value}.")
    return "\n".join(lines)


def _status_feedback(example: LabeledExample, result: CriterionResult) -> str:
    gold, predicted = example.gold_status, result.status
    why = f" Labeler's note: {example.note}." if example.note else ""
    if predicted == gold:
        calibration = " but with low confidence" if result.confidence < 0.5 else ""
        return f"Status correct: {gold.value} (confidence {result.confidence:.2f}){calibration}."
    unsafe = (
        " UNSAFE: a met where the gold is " + gold.value + " could approve wrongly."
        if predicted == CriterionStatus.MET and gold in UNSAFE_GOLD
        else ""
    )
    return (
        f"Status wrong: predicted {predicted.value} with confidence {result.confidence:.2f}, "
        f"gold is {gold.value}.{unsafe}{why}"
    )


def _citation_feedback(example: LabeledExample, result: CriterionResult) -> list[str]:
    score = citation_score(example, result)
    lines: list[str] = []
    if score.policy == 0.0:
        cited = "; ".join(repr(c.quote) for c in result.policy_citations) or "nothing"
        lines.append(
            f"Policy citation missed the governing text {example.gold_policy_quote!r} "
            f"(cited: {cited})."
        )
    if score.missed_gold_quotes:
        lines.append(
            "Case evidence missed: " + "; ".join(repr(q) for q in score.missed_gold_quotes)
        )
    if score.unmatched_cited_quotes:
        lines.append(
            "Cited case quotes that are not the evidence: "
            + "; ".join(repr(q) for q in score.unmatched_cited_quotes)
        )
    return lines


def _tool_feedback(result: CriterionResult, expected_tools: Sequence[str]) -> list[str]:
    """Tools never called and tool calls that failed; only for traces that use tools."""
    calls = [s for s in result.reasoning_trace if s.kind == StepKind.TOOL_CALL]
    if not calls and result.controller != "react":
        return []
    called = {s.tool for s in calls}
    lines = []
    never = [t for t in expected_tools if t not in called]
    if never:
        lines.append("Tools never called: " + ", ".join(never) + ".")
    failed = [s for s in result.reasoning_trace if s.is_error]
    if failed:
        lines.append(
            f"{len(failed)} step(s) failed: "
            + "; ".join(f"{s.tool or s.kind.value}: {s.content[:120]}" for s in failed)
        )
    return lines
