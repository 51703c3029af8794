"""Citation verification: a quote counts only if it is found in what it cites.

A policy quote must appear in the text of the cited tree node; a case quote in the cited
document page (or any page of the cited document), or in the cited fact's value or source quote.
Matching forgives only what text extraction changes: runs of whitespace, curly quotes and dashes.
Offsets always point into the original text.

Found is not enough for the model's decisions: `check_case_quote` also asks that a case quote be
long enough to show something, not an instruction planted in the case, not the policy's own
text, not from a document dated after the case's `as_of`, and about the criterion's concept
(`CitationRules`, `INSTRUCTION_PATTERNS`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reasoning_service.models import CaseBundle, CaseEvidence, Criterion, Policy, PolicyCitation
from retrieval.tree import find_node, walk

_TRANSLATION = str.maketrans(
    {"’": "'", "‘": "'", "“": '"', "”": '"', "–": "-", "—": "-", "\u00a0": " "}
)
_SPACE = re.compile(r"\s+")


def _normalise(text: str) -> tuple[str, list[int]]:
    """Collapse whitespace and unify punctuation; return the text and each char's source offset."""
    chars: list[str] = []
    offsets: list[int] = []
    previous_space = False
    for index, char in enumerate(text.translate(_TRANSLATION)):
        if char.isspace():
            if previous_space:
                continue
            char, previous_space = " ", True
        else:
            previous_space = False
        chars.append(char)
        offsets.append(index)
    return "".join(chars), offsets


def find_quote(haystack: str, quote: str) -> tuple[int, int] | None:
    """Return the (start, end) offsets of `quote` in `haystack`, or None if it is not there."""
    quote = quote.strip()
    if not quote:
        return None
    start = haystack.find(quote)
    if start >= 0:
        return start, start + len(quote)
    norm_haystack, offsets = _normalise(haystack)
    norm_quote = _SPACE.sub(" ", quote.translate(_TRANSLATION)).strip()
    start = norm_haystack.lower().find(norm_quote.lower())
    if start < 0:
        return None
    return offsets[start], offsets[start + len(norm_quote) - 1] + 1


def verify_policy_citation(policy: Policy, citation: PolicyCitation) -> PolicyCitation | None:
    """Return the citation with offsets and node metadata filled in, or None if unverifiable."""
    if citation.policy_id != policy.policy_id:
        return None
    node = find_node(policy.tree, citation.node_id)
    if node is None:
        return None
    span = find_quote(node.text, citation.quote)
    if span is None:
        return None
    pages = (
        list(range(node.start_index, (node.end_index or node.start_index) + 1))
        if node.start_index
        else []
    )
    return citation.model_copy(
        update={
            "quote": node.text[span[0] : span[1]],
            "section_title": node.title,
            "pages": pages,
            "line_num": node.line_num,
            "char_start": span[0],
            "char_end": span[1],
        }
    )


def verify_case_evidence(
    case: CaseBundle, evidence: CaseEvidence, *, request_fields: bool = True
) -> CaseEvidence | None:
    """Return the evidence located in the case (offsets, doc and page filled), or None.

    `request_fields=False` leaves out the request body's own fields (`request.service`,
    `patient.age` …, see `CaseBundle.request_facts`): what the caller asserts is not evidence
    the model may cite; extracted facts and document text are.
    """
    if evidence.field is not None:
        located = _locate_in_fact(case, evidence, request_fields=request_fields)
        if located is not None:
            return located
    if evidence.doc_id is not None:
        return _locate_in_document(case, evidence.doc_id, evidence.page, evidence)
    return None


def _locate_in_document(
    case: CaseBundle, doc_id: str, page: int | None, evidence: CaseEvidence
) -> CaseEvidence | None:
    document = case.document(doc_id)
    if document is None:
        return None
    candidates = [page] if page is not None else range(1, len(document.pages) + 1)
    for number in candidates:
        if not 1 <= number <= len(document.pages):
            continue
        text = document.pages[number - 1]
        span = find_quote(text, evidence.quote)
        if span is not None:
            return evidence.model_copy(
                update={
                    "doc_id": doc_id,
                    "page": number,
                    "quote": text[span[0] : span[1]],
                    "char_start": span[0],
                    "char_end": span[1],
                }
            )
    return None


def _locate_in_fact(
    case: CaseBundle, evidence: CaseEvidence, *, request_fields: bool
) -> CaseEvidence | None:
    facts = [*case.facts, *case.request_facts()] if request_fields else case.facts
    for fact in facts:
        if fact.field != evidence.field:
            continue
        if fact.source is not None and find_quote(fact.source.quote, evidence.quote) is not None:
            in_document = _locate_in_document(case, fact.source.doc_id, fact.source.page, evidence)
            return in_document or evidence.model_copy(update={"doc_id": fact.source.doc_id})
        if find_quote(str(fact.value), evidence.quote) is not None:
            return evidence.model_copy(update={"doc_id": None, "page": None})
    return None


# --- what a case quote must be to count as evidence ------------------------------------------

INSTRUCTION_PATTERNS: tuple[str, ...] = (
    # telling the reader to drop its rules: "ignore the policy", "disregard previous instructions"
    r"\b(ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,60}"
    r"\b(instructions?|polic(y|ies)|rules?|criteri(a|on)|guidelines?|prompts?|previous|prior|"
    r"above|system)\b",
    # dictating the verdict: "mark all criteria met", "approve this request"
    r"\b(mark|flag|set|classify|deem)\b[^.!?\n]{0,60}\b(met|satisfied|fulfilled|approved?)\b",
    r"\b(approve|authori[sz]e)\b[^.!?\n]{0,40}\b(request|claim|case|authori[sz]ation|"
    r"criteri(a|on)|order)\b",
    r"\ball\s+(the\s+)?criteri(a|on)\s+(are|is|as|be|were)\s+(met|satisfied)\b",
    r"\b(respond|answer|reply|output|return)\b[^.!?\n]{0,30}\b(met|approved?)\b",
    # addressing the model: "you are an AI", "note to the reviewer", "SYSTEM: …"
    r"\b(you\s+are|you're|act\s+as)\s+(an?\s+|the\s+)?(ai|assistant|language\s+model|llm|"
    r"chatbot|reviewer|system)\b",
    r"\b(note|message|instructions?)\s+(to|for)\s+(the\s+|any\s+)?([\w/-]+\s+){0,2}?"
    r"(ai|automated|assistant|model|llm|reviewers?|system|bot)\b",
    r"^\s*(system|assistant|ai|reviewer)\s*:",
)
"""Sentences that address a reviewer, an AI or the system instead of describing the patient.

General imperatives only (never words of one policy): a case quote inside such a line is text
that tries to steer the decision, and DESIGN.md says case text is data, never instructions."""

_INSTRUCTIONS = tuple(re.compile(p, re.IGNORECASE | re.MULTILINE) for p in INSTRUCTION_PATTERNS)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORD_TEXT = """
    a about above after again all also an and any are as at be because been before being
    below between both but by can could did do does each few for from had has have having how
    if in into is it its may more most must no nor not of off on once only or other our out over
    same shall should so some such than that the their them then there these they this those
    through to too under until up very was we were what when where which while who why will
    with would"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_GENERIC_TEXT = """
    patient patients beneficiary beneficiaries applicable applies apply documented documentation
    document record recorded report reported required requires criterion criteria policy
"""
_GENERIC_WORDS = frozenset(_GENERIC_TEXT.split())
"""Words that criteria and clinical notes all share and that name no concept: sharing "patient"
or "documented" with a criterion does not make a quote about it."""


@dataclass(frozen=True)
class CitationRules:
    """What a verified case quote must also be before a decision may stand on it."""

    min_words: int = 3
    """Words (letters or digits) a case quote needs, one of them with a letter: "e" or "18"
    shows nothing."""


def is_instruction_like(text: str) -> bool:
    """True when `text` reads as an order to a reviewer, an AI or the system (see patterns)."""
    return any(pattern.search(text) for pattern in _INSTRUCTIONS)


def concept_words(criterion: Criterion) -> frozenset[str]:
    """Word keys of what the criterion is about: its text, and its atoms' concepts and aliases."""
    names = [criterion.text]
    if criterion.conditions is not None:
        for atom in criterion.conditions.atoms():
            names.extend(atom.names)
    return frozenset(key for name in names for key in _word_keys(name))


def check_case_quote(
    case: CaseBundle,
    policy: Policy,
    criterion: Criterion,
    evidence: CaseEvidence,
    rules: CitationRules,
) -> str | None:
    """Why a *located* case quote cannot be evidence for `criterion`, or None when it can.

    In order: too short; inside an instruction-like line; a quote of the policy itself (text
    pasted from the policy shows nothing about the patient); from a document dated after the
    case's `as_of` (the relevant date range: the record as it stood on the evaluation date);
    not mentioning the criterion's concept (no content word shared with `concept_words`).
    """
    quote = evidence.quote
    words = _WORD.findall(quote)
    if len(words) < rules.min_words or not any(c.isalpha() for c in quote):
        return f"is too short to be evidence (quote at least {rules.min_words} words)"
    if is_instruction_like(quote) or is_instruction_like(_line_of(case, evidence)):
        return "is an instruction inside the case text, not clinical evidence"
    if any(find_quote(node.text, quote) is not None for node in walk(policy.tree)):
        return "is policy text, not evidence about the patient"
    document = case.document(evidence.doc_id) if evidence.doc_id else None
    if document is not None and document.date is not None and document.date > case.reference_date:
        return (
            f"is from {document.doc_id}, dated {document.date.isoformat()}, after the case's "
            f"as_of date {case.reference_date.isoformat()}"
        )
    if not _word_keys(quote) & concept_words(criterion):
        return "does not mention what the criterion is about"
    return None


def _word_keys(text: str) -> set[str]:
    """Content words, crudely stemmed: plural `s` dropped, long words cut to six letters, so
    "hours"/"hour" and "educated"/"education" meet. Pure numbers never count."""
    keys = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOPWORDS or word in _GENERIC_WORDS or word.isdigit() or len(word) < 2:
            continue
        if len(word) > 3 and word.endswith("s"):
            word = word[:-1]
        keys.add(word[:6])
    return keys


def _line_of(case: CaseBundle, evidence: CaseEvidence) -> str:
    """The whole line(s) of the page around a located quote (empty when it has no page)."""
    document = case.document(evidence.doc_id) if evidence.doc_id else None
    if document is None or evidence.page is None or evidence.char_start is None:
        return ""
    text = document.pages[evidence.page - 1]
    start = text.rfind("\n", 0, evidence.char_start) + 1
    end = text.find("\n", evidence.char_end or evidence.char_start)
    return text[start : end if end >= 0 else len(text)]
