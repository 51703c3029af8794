"""Citation verification: a quote counts only if it is found in what it cites.

A policy quote must appear in the text of the cited tree node; a case quote in the cited
document page (or any page of the cited document), or in the cited fact's value or source quote.
Matching forgives only what text extraction changes: runs of whitespace, curly quotes and dashes.
Offsets always point into the original text.
"""

from __future__ import annotations

import re

from reasoning_service.models import CaseBundle, CaseEvidence, Policy, PolicyCitation
from retrieval.tree import find_node

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


def verify_case_evidence(case: CaseBundle, evidence: CaseEvidence) -> CaseEvidence | None:
    """Return the evidence located in the case (offsets, doc and page filled), or None."""
    if evidence.field is not None:
        located = _locate_in_fact(case, evidence)
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


def _locate_in_fact(case: CaseBundle, evidence: CaseEvidence) -> CaseEvidence | None:
    for fact in [*case.facts, *case.request_facts()]:
        if fact.field != evidence.field:
            continue
        if fact.source is not None and find_quote(fact.source.quote, evidence.quote) is not None:
            in_document = _locate_in_document(case, fact.source.doc_id, fact.source.page, evidence)
            return in_document or evidence.model_copy(update={"doc_id": fact.source.doc_id})
        if find_quote(str(fact.value), evidence.quote) is not None:
            return evidence.model_copy(update={"doc_id": None, "page": None})
    return None
