"""Citation verification: a quote counts only where it is found, with offsets into the source."""

from __future__ import annotations

from reasoning_service.models import CaseEvidence, PolicyCitation
from reasoning_service.tools.citations import (
    find_quote,
    verify_case_evidence,
    verify_policy_citation,
)
from retrieval import walk

AHI_QUOTE = "AHI or RDI greater than or equal to 15 events per hour, or"


def test_find_quote_forgives_whitespace_curly_quotes_and_dashes_only():
    text = "The beneficiary’s  treating\nphysician — and no one else."
    start, end = find_quote(text, "beneficiary's treating physician - and")
    assert text[start:end] == "beneficiary’s  treating\nphysician — and"
    assert find_quote(text, "beneficiaries treating physician") is None


def test_a_policy_quote_verifies_only_in_the_node_it_cites(cpap_policy):
    node = next(n for n in walk(cpap_policy.tree) if AHI_QUOTE in n.text)
    other = next(n for n in walk(cpap_policy.tree) if AHI_QUOTE not in n.text)
    cited = PolicyCitation(policy_id=cpap_policy.policy_id, node_id=node.node_id, quote=AHI_QUOTE)
    verified = verify_policy_citation(cpap_policy, cited)
    assert verified is not None
    assert verified.char_start is not None and verified.char_end is not None
    assert node.text[verified.char_start : verified.char_end] == AHI_QUOTE
    misplaced = cited.model_copy(update={"node_id": other.node_id})
    assert verify_policy_citation(cpap_policy, misplaced) is None


def test_a_case_quote_verifies_in_its_document_or_fact(cpap_case):
    in_document = CaseEvidence(doc_id="psg-1", page=2, quote="AHI: 18 events/hour")
    assert verify_case_evidence(cpap_case, in_document) is not None
    in_fact = CaseEvidence(field="sleep_study.ahi", quote="AHI: 18 events/hour")
    assert verify_case_evidence(cpap_case, in_fact) is not None
    invented = CaseEvidence(doc_id="psg-1", page=2, quote="AHI: 32 events/hour")
    assert verify_case_evidence(cpap_case, invented) is None
    wrong_document = CaseEvidence(doc_id="dme-1", quote="AHI: 18 events/hour")
    assert verify_case_evidence(cpap_case, wrong_document) is None
