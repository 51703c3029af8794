"""The deterministic controller: the offline baseline and the fallback when the LLM fails.

Steps for one criterion (each recorded in the reasoning trace):

1. read the criterion (`criterion_reading`): search terms, the situation it is restricted to,
   an "If …" precondition, numeric constraints, and the qualitative concepts left over;
2. cite the policy: the node holding `criterion.quote` verbatim, else retrieval search + span
   tightening, else a lexical scan of the tree; only verified citations are kept;
3. read the case (`clinical_text`): sentences of every document page with negation and family
   history marked, measurements (with unit conversion and BMI from height and weight), and facts
   whose field names share the criterion's concepts. Document text wins over facts;
4. decide, safety first: `not_applicable` when the case is not in the criterion's situation;
   numeric constraints compared exactly, values that straddle a threshold -> `uncertain`;
   qualitative concepts matched in affirmed text -> `met`, only in negated text -> `not_met`,
   partially -> `uncertain`, nowhere -> `missing_info`. A `met` without a verified case quote is
   never returned.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reasoning_service.conditions.clinical_text import (
    NARROWER,
    Measurement,
    Sentence,
    concept_tokens,
    is_family_context,
    is_negated,
    read_durations,
    read_measurements,
    read_recency,
    split_sentences,
)
from reasoning_service.conditions.criterion_reading import (
    DURATION,
    RECENCY,
    Constraint,
    CriterionReading,
    Situation,
    read_criterion,
)
from reasoning_service.models import (
    CaseBundle,
    CaseEvidence,
    CriterionResult,
    CriterionStatus,
    Policy,
    PolicyCitation,
    ReasonCode,
    ReasoningStep,
    StepKind,
    Usage,
)
from reasoning_service.models.task import CriterionTask
from reasoning_service.tools.citations import (
    find_quote,
    verify_case_evidence,
    verify_policy_citation,
)
from retrieval.spans import split_spans
from retrieval.tree import walk

if TYPE_CHECKING:
    from retrieval.service import RetrievalService

__all__ = ["HeuristicController"]

_MET_COVERAGE = 0.6
"""Share of the criterion's concept weight a document must show for `met`."""
_SENTENCE_COVERAGE = 0.3
"""…and one sentence must carry at least this much of it on its own (cohesion)."""
_PARTIAL_COVERAGE = 0.5
"""Below `_MET_COVERAGE` but at least this much: evidence exists but is vague -> `uncertain`."""
_ALTERNATIVE_COVERAGE = 0.67
_TRUSTED_FACT = 0.8
"""Facts below this extractor confidence are not used as evidence on their own."""
_SCREENING_LABEL = re.compile(r"review|screen|rule out|risk|workup|\bros\b", re.I)
_RENEWAL_CASE = re.compile(
    r"continued coverage|continuation|renewal|retreatment|re-treatment|additional sessions|"
    r"recertification|subsequent",
    re.IGNORECASE,
)
_REQUEST_FIELD = re.compile(r"request|procedure|service|device|order", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Mention:
    """One case sentence read for the concepts it affirms and the ones it negates."""

    sentence: Sentence
    affirmed: frozenset[str]
    negated: frozenset[str]


@dataclass(slots=True)
class _Verdict:
    status: CriterionStatus
    confidence: float
    rationale: str
    evidence: list[CaseEvidence] = field(default_factory=list)
    reason_code: ReasonCode | None = None


@dataclass(slots=True)
class _Trace:
    """The reasoning trace being built, and the tool calls it counts."""

    steps: list[ReasoningStep] = field(default_factory=list)
    tool_calls: int = 0

    def add(
        self,
        kind: StepKind,
        content: str,
        *,
        tool: str | None = None,
        arguments: dict[str, object] | None = None,
    ) -> None:
        if kind is StepKind.TOOL_CALL:
            self.tool_calls += 1
        self.steps.append(
            ReasoningStep(
                index=len(self.steps),
                kind=kind,
                tool=tool,
                arguments=arguments,
                content=content[:500],
            )
        )


class HeuristicController:
    """Decides criteria with rules over the criterion text and the case; no LLM, no network."""

    name = "heuristic"

    def __init__(self, retrieval: RetrievalService | None = None) -> None:
        self.retrieval = retrieval

    async def evaluate(self, task: CriterionTask) -> CriterionResult:
        """Decide one criterion (see the module docstring for the steps)."""
        started = time.perf_counter()
        trace = _Trace()
        policy_text = "\n".join(node.text for node in walk(task.policy.tree))
        reading = read_criterion(task.criterion.text, policy_text=policy_text)
        trace.add(StepKind.THOUGHT, "search terms: " + ", ".join(reading.terms[:20]))
        citations = await self._cite_policy(task, reading, trace)
        case = _CaseView.read(task.case, reading.extra_phrases)
        trace.add(
            StepKind.TOOL_CALL,
            "read case documents and facts",
            tool="facts_get",
            arguments={"terms": reading.terms[:20]},
        )
        trace.add(
            StepKind.OBSERVATION,
            f"{len(case.sentences)} sentences in {len(task.case.documents)} documents, "
            f"{len(task.case.facts)} facts",
        )
        verdict = _decide(reading, case)
        evidence = _verified(task.case, verdict.evidence)
        if verdict.status is CriterionStatus.MET and not evidence:
            verdict = _Verdict(
                CriterionStatus.UNCERTAIN,
                0.4,
                verdict.rationale + " No case quote could be verified, so not met.",
                reason_code=ReasonCode.INVALID_CITATION,
            )
        trace.add(StepKind.DECISION, f"{verdict.status.value}: {verdict.rationale}")
        latency_ms = (time.perf_counter() - started) * 1000
        return CriterionResult(
            criterion_id=task.criterion.criterion_id,
            status=verdict.status,
            confidence=round(verdict.confidence, 3),
            rationale=verdict.rationale,
            policy_citations=citations,
            case_evidence=evidence,
            reason_code=verdict.reason_code,
            reasoning_trace=trace.steps,
            controller=self.name,
            usage=Usage(tool_calls=trace.tool_calls, latency_ms=round(latency_ms, 3)),
        )

    async def _cite_policy(
        self, task: CriterionTask, reading: CriterionReading, trace: _Trace
    ) -> list[PolicyCitation]:
        """The governing policy text: the criterion's own quote first, then retrieval."""
        policy, quote = task.policy, task.criterion.quote
        if quote:
            for node in walk(policy.tree):
                if find_quote(node.text, quote) is not None:
                    cited = _verify_policy(policy, node.node_id, quote)
                    if cited:
                        trace.add(
                            StepKind.OBSERVATION, f"criterion quote found in node {node.node_id}"
                        )
                        return cited
        query = " ".join(reading.terms[:12]) or task.criterion.text
        if self.retrieval is not None:
            trace.add(
                StepKind.TOOL_CALL,
                "search policy nodes",
                tool="pi_search",
                arguments={"query": query},
            )
            hits = await self.retrieval.search_nodes(policy.policy_id, query, limit=3)
            for hit in hits:
                trace.add(
                    StepKind.TOOL_CALL,
                    f"tighten spans in node {hit.node_id}",
                    tool="spans_tighten",
                    arguments={"node_id": hit.node_id, "query": query},
                )
                spans = await self.retrieval.spans_tighten(
                    policy.policy_id, hit.node_id, query, limit=1
                )
                for span in spans:
                    cited = _verify_policy(policy, span.node_id, span.text)
                    if cited:
                        return cited
        return _lexical_policy_citation(policy, query)


def _verify_policy(policy: Policy, node_id: str, quote: str) -> list[PolicyCitation]:
    citation = PolicyCitation(policy_id=policy.policy_id, node_id=node_id, quote=quote)
    verified = verify_policy_citation(policy, citation)
    return [verified] if verified else []


def _lexical_policy_citation(policy: Policy, query: str) -> list[PolicyCitation]:
    """Without retrieval: the policy span sharing the most concept keys with the query."""
    wanted = {t.key for t in concept_tokens(query)}
    best: tuple[int, str, str] | None = None
    for node in walk(policy.tree):
        for span in split_spans(node.text):
            text = node.text[span.start : span.end]
            score = len(wanted & {t.key for t in concept_tokens(text)})
            if score and (best is None or score > best[0]):
                best = (score, node.node_id, text)
    return _verify_policy(policy, best[1], best[2]) if best else []


def _verified(case: CaseBundle, evidence: Iterable[CaseEvidence]) -> list[CaseEvidence]:
    """Keep only evidence found verbatim in the case; drop duplicates."""
    kept: list[CaseEvidence] = []
    seen: set[tuple[str | None, int | None, str]] = set()
    for item in evidence:
        located = verify_case_evidence(case, item)
        if located is None:
            continue
        key = (located.doc_id, located.page, located.quote)
        if key not in seen:
            seen.add(key)
            kept.append(located)
    return kept


# --- the case, read ---------------------------------------------------------------------------


@dataclass(slots=True)
class _CaseView:
    """A case bundle read once: sentences with stance, titles, facts."""

    case: CaseBundle
    sentences: list[Sentence]
    mentions: list[_Mention]
    titles: dict[str, frozenset[str]]
    phrases: dict[str, str]

    @classmethod
    def read(cls, case: CaseBundle, phrases: dict[str, str]) -> _CaseView:
        sentences = [
            sentence
            for document in case.documents
            for number, page in enumerate(document.pages, start=1)
            for sentence in split_sentences(document.doc_id, number, page)
        ]
        mentions = [_read_mention(s, phrases) for s in sentences]
        titles = {
            d.doc_id: frozenset(t.key for t in concept_tokens(d.title, phrases))
            for d in case.documents
        }
        return cls(case, sentences, mentions, titles, phrases)

    def page_text(self, sentence: Sentence) -> str:
        document = self.case.document(sentence.doc_id)
        return document.pages[sentence.page - 1] if document else ""

    def quote(self, sentence: Sentence) -> CaseEvidence:
        return CaseEvidence(doc_id=sentence.doc_id, page=sentence.page, quote=sentence.text)

    def sentence_containing(self, doc_id: str, quote: str) -> Sentence | None:
        for sentence in self.sentences:
            if sentence.doc_id == doc_id and find_quote(sentence.text, quote) is not None:
                return sentence
        for sentence in self.sentences:
            if sentence.doc_id == doc_id and find_quote(quote, sentence.text) is not None:
                return sentence
        return None


def _read_mention(sentence: Sentence, phrases: dict[str, str]) -> _Mention:
    """Sort a sentence's concept keys into affirmed and negated; relatives' history is neither."""
    if is_family_context(sentence):
        return _Mention(sentence, frozenset(), frozenset())
    tokens = concept_tokens(sentence.text, phrases)
    label_end = len(sentence.label) + 1 if sentence.label else 0
    content_negated = bool(sentence.label) and _opens_negated(sentence.text[label_end:])
    label_neutral = _SCREENING_LABEL.search(sentence.label) is not None or content_negated
    affirmed: set[str] = set()
    negated: set[str] = set()
    for token in tokens:
        if token.start < label_end:
            if content_negated:
                negated.add(token.key)
            elif not label_neutral:
                affirmed.add(token.key)
        elif is_negated(sentence.text, token.start, token.end):
            negated.add(token.key)
        else:
            affirmed.add(token.key)
    return _Mention(sentence, frozenset(affirmed), frozenset(negated))


def _opens_negated(content: str) -> bool:
    return bool(re.match(r"\s*(?:no|none|denies|negative|not)\b", content, re.IGNORECASE))


def _has(keys: frozenset[str] | set[str], concept: str) -> bool:
    return concept in keys or bool(NARROWER.get(concept, frozenset()) & keys)


def _coverage(concepts: dict[str, float], keys: frozenset[str] | set[str]) -> float:
    total = sum(concepts.values())
    if not total:
        return 0.0
    return sum(w for c, w in concepts.items() if _has(keys, c)) / total


# --- deciding ---------------------------------------------------------------------------------


def _decide(reading: CriterionReading, case: _CaseView) -> _Verdict:
    """Apply the rules in order of precedence: applicability, counts, request, numbers, words."""
    if reading.situation is not None:
        verdict = _judge_situation(reading.situation, case)
        if verdict is not None:
            return verdict
    if reading.condition is not None:
        verdict = _judge_condition(reading, case)
        if verdict is not None:
            return verdict
    if reading.uncountable:
        return _Verdict(
            CriterionStatus.UNCERTAIN,
            0.4,
            "The criterion needs a count the record does not state directly; "
            "a reviewer must compute it.",
            _concept_evidence(reading, case),
        )
    if reading.about_request:
        return _judge_request(reading, case)
    if reading.constraints:
        numeric = _judge_constraints(reading.constraints, case)
        if numeric.status is not CriterionStatus.MET or not reading.concepts:
            return numeric
        rest = _judge_words(reading, case)
        return _both(numeric, rest)
    return _judge_words(reading, case)


def _case_situation(case: _CaseView) -> tuple[Situation, list[CaseEvidence]]:
    """Initial request or renewal, from the request and request-type facts."""
    texts = [case.case.request.service]
    evidence: list[CaseEvidence] = []
    for fact in case.case.facts:
        if _REQUEST_FIELD.search(fact.field) and isinstance(fact.value, str):
            texts.append(fact.value)
            if fact.source is not None:
                evidence.append(
                    CaseEvidence(
                        doc_id=fact.source.doc_id,
                        page=fact.source.page,
                        field=fact.field,
                        quote=fact.source.quote,
                    )
                )
    renewal = any(_RENEWAL_CASE.search(text) for text in texts)
    return (Situation.RENEWAL if renewal else Situation.INITIAL), evidence


def _judge_situation(situation: Situation, case: _CaseView) -> _Verdict | None:
    actual, evidence = _case_situation(case)
    if actual is situation:
        return None
    return _Verdict(
        CriterionStatus.NOT_APPLICABLE,
        0.85,
        f"The criterion applies to a {situation.value} request; this request is "
        f"{actual.value} ({case.case.request.service or 'see request facts'}).",
        evidence,
    )


def _judge_condition(reading: CriterionReading, case: _CaseView) -> _Verdict | None:
    """An "If …" precondition: not holding -> not applicable; unknown -> missing or uncertain."""
    condition = reading.condition
    assert condition is not None
    if condition.constraints:
        numeric = _judge_constraints(condition.constraints, case)
        if numeric.status is CriterionStatus.NOT_MET:
            return _Verdict(
                CriterionStatus.NOT_APPLICABLE,
                0.85,
                "The criterion's precondition does not hold: " + numeric.rationale,
                numeric.evidence,
            )
        return None if numeric.status is CriterionStatus.MET else numeric
    found = _judge_words(condition, case, lenient=True)
    if found.status is CriterionStatus.MET:
        return None
    return _Verdict(
        CriterionStatus.NOT_APPLICABLE,
        0.75,
        "The criterion applies only in a situation the record does not show "
        f"({', '.join(list(condition.concepts)[:6])}).",
        found.evidence,
    )


def _both(first: _Verdict, second: _Verdict) -> _Verdict:
    """All-of: the weaker part decides; evidence and rationale add up."""
    order = [
        CriterionStatus.NOT_MET,
        CriterionStatus.UNCERTAIN,
        CriterionStatus.MISSING_INFO,
        CriterionStatus.MET,
    ]
    weaker = min((first, second), key=lambda v: order.index(v.status))
    return _Verdict(
        weaker.status,
        min(first.confidence, second.confidence),
        f"{first.rationale} {second.rationale}",
        first.evidence + second.evidence,
        weaker.reason_code,
    )


# numbers


def _judge_constraints(constraints: list[Constraint], case: _CaseView) -> _Verdict:
    verdicts = [_judge_constraint(c, case) for c in constraints]
    result = verdicts[0]
    for verdict in verdicts[1:]:
        result = _both(result, verdict)
    return result


def _judge_constraint(constraint: Constraint, case: _CaseView) -> _Verdict:
    values = (
        _timed_measurements(constraint, case)
        if constraint.quantity in {DURATION, RECENCY}
        else _measurements(constraint.quantity, case)
    )
    name = (
        constraint.quantity.replace("_", " ").upper()
        if len(constraint.quantity) <= 4
        else (constraint.quantity.replace("_", " "))
    )
    if not values:
        return _Verdict(
            CriterionStatus.MISSING_INFO,
            0.7,
            f"No {name} value found in the record for '{constraint.phrase}'.",
        )
    evidence = [
        CaseEvidence(
            doc_id=m.sentence.doc_id,
            page=m.sentence.page,
            quote=case.page_text(m.sentence)[m.start : m.end],
        )
        for m in values
    ]
    described = "; ".join(_describe(m) for m in values)
    outcomes = {constraint.holds(m.value) for m in values}
    if outcomes == {True}:
        return _Verdict(
            CriterionStatus.MET, 0.9, f"{name} {described} meets '{constraint.phrase}'.", evidence
        )
    if outcomes == {False}:
        return _Verdict(
            CriterionStatus.NOT_MET,
            0.85,
            f"{name} {described} does not meet '{constraint.phrase}'.",
            evidence,
        )
    return _Verdict(
        CriterionStatus.UNCERTAIN,
        0.5,
        f"Conflicting {name} values ({described}) fall on both sides of '{constraint.phrase}'.",
        evidence,
        ReasonCode.CONFLICTING_EVIDENCE,
    )


def _timed_measurements(constraint: Constraint, case: _CaseView) -> list[Measurement]:
    """Durations or time windows, only from sentences that affirm what the constraint is about:
    "follow up in 2 weeks" must not answer "back pain lasting 12 weeks"."""
    subject = set(constraint.subject)
    sentences = [
        mention.sentence
        for mention in case.mentions
        if not is_family_context(mention.sentence) and subject & mention.affirmed
    ]
    if constraint.quantity == DURATION:
        return read_durations(sentences)
    dates = {d.doc_id: d.date for d in case.case.documents}
    return read_recency(sentences, case.case.reference_date, dates)


def _describe(measurement: Measurement) -> str:
    where = f"{measurement.sentence.doc_id} p{measurement.sentence.page}"
    if measurement.quantity in {DURATION, RECENCY}:
        how = f", {measurement.derived}" if measurement.derived else ""
        ago = " ago" if measurement.quantity == RECENCY else ""
        return f"{measurement.value:g} days{ago} ({where}{how})"
    value = f"{measurement.value:g}"
    if measurement.derived:
        return f"{measurement.value:.2f} computed as {measurement.derived} ({where})"
    return f"{value} ({where})"


def _measurements(quantity: str, case: _CaseView) -> list[Measurement]:
    """Values from the documents; facts only when the documents state none (facts can be wrong)."""
    found: list[Measurement] = []
    for document in case.case.documents:
        for number, page in enumerate(document.pages, start=1):
            sentences = [
                s for s in case.sentences if s.doc_id == document.doc_id and s.page == number
            ]
            sentences = [s for s in sentences if not is_family_context(s)]
            found.extend(read_measurements(sentences, page, quantity))
    unique: dict[tuple[str, int, float], Measurement] = {}
    for m in found:
        unique.setdefault((m.sentence.doc_id, m.sentence.page, round(m.value, 2)), m)
    if unique:
        return list(unique.values())
    return _fact_measurements(quantity, case)


def _fact_measurements(quantity: str, case: _CaseView) -> list[Measurement]:
    found: list[Measurement] = []
    for fact in case.case.facts:
        keys = {t.key for t in concept_tokens(fact.field.replace(".", " ").replace("_", " "))}
        if quantity not in keys or fact.source is None or fact.confidence < _TRUSTED_FACT:
            continue
        if not isinstance(fact.value, int | float) or isinstance(fact.value, bool):
            continue
        sentence = case.sentence_containing(fact.source.doc_id, fact.source.quote)
        if sentence is None or f"{fact.value:g}" not in sentence.text:
            continue
        found.append(
            Measurement(
                quantity, float(fact.value), fact.unit, sentence, sentence.start, sentence.end
            )
        )
    return found


# the requested procedure


def _judge_request(reading: CriterionReading, case: _CaseView) -> _Verdict:
    """Is the requested procedure one of the criterion's listed alternatives?"""
    alternatives = reading.alternatives
    request_texts, evidence = _request_description(case)
    keys = frozenset(
        k for text in request_texts for k in (t.key for t in concept_tokens(text, case.phrases))
    )
    if not keys or not alternatives:
        return _judge_words(reading, case)
    for alternative in alternatives:
        if all(_has(keys, k) for k in alternative):
            return _Verdict(
                CriterionStatus.MET,
                0.85,
                f"The requested '{request_texts[0]}' matches the listed '{' '.join(alternative)}'.",
                evidence,
            )
    return _Verdict(
        CriterionStatus.NOT_MET,
        0.8,
        f"The requested '{request_texts[0]}' is none of the listed procedures.",
        evidence,
    )


def _request_description(case: _CaseView) -> tuple[list[str], list[CaseEvidence]]:
    texts = [case.case.request.service] if case.case.request.service else []
    evidence: list[CaseEvidence] = []
    for fact in case.case.facts:
        if not re.search(r"procedure|service|device", fact.field, re.IGNORECASE):
            continue
        texts.append(str(fact.value))
        if fact.source is not None:
            texts.append(fact.source.quote)
            evidence.append(
                CaseEvidence(
                    doc_id=fact.source.doc_id,
                    page=fact.source.page,
                    field=fact.field,
                    quote=fact.source.quote,
                )
            )
    return texts, evidence


# words


def _judge_words(reading: CriterionReading, case: _CaseView, *, lenient: bool = False) -> _Verdict:
    if reading.alternatives:
        return _judge_alternatives(reading, case)
    return _judge_concepts(reading, case, lenient=lenient)


def _judge_alternatives(reading: CriterionReading, case: _CaseView) -> _Verdict:
    """Any-of: one alternative affirmed in one sentence is enough; all denied -> not met."""
    affirmed: list[tuple[list[str], _Mention]] = []
    denied: list[tuple[list[str], _Mention]] = []
    for alternative in reading.alternatives:
        weights = dict.fromkeys(alternative, 1.0)
        for mention in case.mentions:
            if _coverage(weights, mention.affirmed) >= _ALTERNATIVE_COVERAGE:
                affirmed.append((alternative, mention))
            elif _coverage(weights, mention.negated | mention.affirmed) >= _ALTERNATIVE_COVERAGE:
                denied.append((alternative, mention))
    if affirmed:
        names = sorted({" ".join(a) for a, _ in affirmed})
        return _Verdict(
            CriterionStatus.MET,
            0.8,
            f"The record affirms: {', '.join(names)}.",
            [case.quote(m.sentence) for _, m in affirmed[:3]],
        )
    if denied:
        names = sorted({" ".join(a) for a, _ in denied})
        return _Verdict(
            CriterionStatus.NOT_MET,
            0.7,
            f"The record mentions only to deny or rule out: {', '.join(names)}.",
            [case.quote(m.sentence) for _, m in denied[:3]],
        )
    concepts = _judge_concepts(reading, case)
    if concepts.status is CriterionStatus.MET:
        concepts.status, concepts.confidence = CriterionStatus.UNCERTAIN, 0.45
    return concepts


def _judge_concepts(
    reading: CriterionReading, case: _CaseView, *, lenient: bool = False
) -> _Verdict:
    """Single concept: the best document must affirm most of its weight, one sentence a part."""
    concepts = reading.concepts
    if not concepts:
        return _Verdict(CriterionStatus.MISSING_INFO, 0.5, "Nothing checkable in the criterion.")
    best_doc, best_cover, best_sentence, chosen = "", 0.0, 0.0, list[_Mention]()
    denied_cover, denied_mentions = 0.0, list[_Mention]()
    for document in case.case.documents:
        mentions = [m for m in case.mentions if m.sentence.doc_id == document.doc_id]
        mentions += _fact_mentions(reading, case, document.doc_id)
        keys = set(case.titles.get(document.doc_id, frozenset()))
        for mention in mentions:
            keys |= mention.affirmed
        cover = _coverage(concepts, keys)
        sentence_cover = max((_coverage(concepts, m.affirmed) for m in mentions), default=0.0)
        if (cover, sentence_cover) > (best_cover, best_sentence):
            best_doc, best_cover, best_sentence = document.doc_id, cover, sentence_cover
            chosen = _covering(concepts, mentions)
        negated = set().union(*(m.negated for m in mentions)) if mentions else set()
        only_denied = negated - keys
        if _coverage(concepts, only_denied) > denied_cover:
            denied_cover = _coverage(concepts, only_denied)
            denied_mentions = [m for m in mentions if m.negated & only_denied]
    evidence = [case.quote(m.sentence) for m in chosen]
    needed = 0.5 if lenient else _MET_COVERAGE
    if reading.absence:
        return _judge_absence(
            best_cover, denied_cover, evidence, [case.quote(m.sentence) for m in denied_mentions]
        )
    if (
        best_cover >= needed
        and best_sentence >= _SENTENCE_COVERAGE
        and _few_missing(concepts, chosen)
    ):
        return _Verdict(
            CriterionStatus.MET,
            min(0.9, 0.5 + best_cover / 2),
            f"{best_doc} documents {_named(concepts, chosen)} (coverage {best_cover:.2f}).",
            evidence,
        )
    if denied_cover >= _PARTIAL_COVERAGE and best_cover < _PARTIAL_COVERAGE:
        return _Verdict(
            CriterionStatus.NOT_MET,
            0.7,
            f"The record denies or rules out {_named(concepts, denied_mentions, True)}.",
            [case.quote(m.sentence) for m in denied_mentions[:3]],
        )
    if best_cover >= _PARTIAL_COVERAGE:
        return _Verdict(
            CriterionStatus.UNCERTAIN,
            0.45,
            f"{best_doc} touches the criterion only in part "
            f"({_named(concepts, chosen)}; coverage {best_cover:.2f}).",
            evidence,
        )
    return _Verdict(
        CriterionStatus.MISSING_INFO,
        0.65,
        "No document in the bundle addresses the criterion "
        f"(best coverage {best_cover:.2f}); request the documentation.",
    )


def _few_missing(concepts: dict[str, float], chosen: list[_Mention]) -> bool:
    """`met` may lack at most one strong concept in five: the predicate ("unsuccessful",
    "medical") is usually among the few words of a criterion, and missing it is the unsafe case."""
    strong = [c for c, w in concepts.items() if w >= 1.0]
    affirmed = frozenset().union(*(m.affirmed for m in chosen)) if chosen else frozenset()
    missing = [c for c in strong if not _has(affirmed, c)]
    return len(missing) <= len(strong) // 5


def _judge_absence(
    present: float, denied: float, evidence: list[CaseEvidence], denied_evidence: list[CaseEvidence]
) -> _Verdict:
    """ "Does not have X": denied in the record -> met, affirmed -> not met, silent -> missing."""
    if present >= _MET_COVERAGE:
        return _Verdict(
            CriterionStatus.NOT_MET, 0.7, "The record affirms what must be absent.", evidence
        )
    if denied >= _MET_COVERAGE:
        return _Verdict(
            CriterionStatus.MET, 0.7, "The record states the condition is absent.", denied_evidence
        )
    return _Verdict(CriterionStatus.MISSING_INFO, 0.6, "The record is silent on the condition.")


def _fact_mentions(reading: CriterionReading, case: _CaseView, doc_id: str) -> list[_Mention]:
    """Facts whose field names share the criterion's concepts, read through their source sentence.

    The sentence, not the fact value, decides the stance: an extractor that dropped a negation
    or read a relative's history as the patient's is overruled by the text it quoted.
    """
    found: list[_Mention] = []
    for fact in case.case.facts:
        if fact.source is None or fact.source.doc_id != doc_id or fact.confidence < _TRUSTED_FACT:
            continue
        keys = frozenset(
            t.key for t in concept_tokens(fact.field.replace(".", " ").replace("_", " "))
        )
        if not any(_has(keys, c) for c in reading.concepts) or fact.value in (None, "", []):
            continue
        sentence = case.sentence_containing(doc_id, fact.source.quote)
        if sentence is None or is_family_context(sentence):
            continue
        source = _read_mention(sentence, case.phrases)
        if source.negated and not source.affirmed:
            continue
        stance = (frozenset(), keys) if fact.value is False else (keys, frozenset())
        found.append(_Mention(sentence, stance[0], stance[1]))
    return found


def _covering(concepts: dict[str, float], mentions: list[_Mention]) -> list[_Mention]:
    """Up to three sentences that together affirm the most concept weight, greedily."""
    chosen: list[_Mention] = []
    covered: set[str] = set()
    for _ in range(3):
        best, gain = None, 0.0
        for mention in mentions:
            new = {c for c in concepts if _has(mention.affirmed, c)} - covered
            weight = sum(concepts[c] for c in new)
            if weight > gain:
                best, gain = mention, weight
        if best is None:
            break
        chosen.append(best)
        covered |= {c for c in concepts if _has(best.affirmed, c)}
    return chosen


def _named(concepts: dict[str, float], mentions: list[_Mention], negated: bool = False) -> str:
    keys: set[str] = set()
    for mention in mentions:
        keys |= mention.negated if negated else mention.affirmed
    names = [c for c in concepts if _has(keys, c)]
    return ", ".join(names) or "nothing specific"


def _concept_evidence(reading: CriterionReading, case: _CaseView) -> list[CaseEvidence]:
    ranked = sorted(case.mentions, key=lambda m: -_coverage(reading.concepts, m.affirmed))
    return [
        case.quote(m.sentence) for m in ranked[:2] if _coverage(reading.concepts, m.affirmed) > 0
    ]
