"""Each metric on hand-made cases where it can go wrong."""

from typing import Any

import pytest

from reasoning_service.harness.datasets import LabeledExample
from reasoning_service.harness.metrics import (
    citation_accuracy,
    citation_score,
    coherence_checks,
    compute_metrics,
    confusion_matrix,
    example_score,
    expected_calibration_error,
    feedback_for,
    macro_f1,
    per_status_scores,
    quotes_match,
    reliability_table,
    status_accuracy,
    unsafe_met_rate,
)
from reasoning_service.models import (
    CaseBundle,
    CaseEvidence,
    CriterionResult,
    CriterionStatus,
    Document,
    PolicyCitation,
    ReasoningStep,
    StepKind,
    Usage,
)

S = CriterionStatus
GOLD_POLICY = "AHI or RDI greater than or equal to 15 events per hour, or"
GOLD_CASE = "AHI: 18 events/hour"


def make_example(
    gold: CriterionStatus | str = CriterionStatus.MET, example_id: str = "ex", **update: Any
) -> LabeledExample:
    fields: dict[str, Any] = {
        "example_id": example_id,
        "case": CaseBundle(
            case_id="c1",
            documents=[Document(doc_id="psg", pages=[f"Study.\n{GOLD_CASE}\nSpO2 nadir 84%."])],
        ),
        "policy_id": "P",
        "criterion_id": "P/C1",
        "gold_status": gold,
        "gold_policy_quote": GOLD_POLICY,
        "gold_case_quotes": [GOLD_CASE],
        **update,
    }
    return LabeledExample.model_validate(fields)


def make_result(
    status: CriterionStatus | str = CriterionStatus.MET,
    confidence: float = 0.9,
    *,
    policy_quotes: tuple[str, ...] = (GOLD_POLICY,),
    case_quotes: tuple[str, ...] = (GOLD_CASE,),
    rationale: str = "The AHI of 18 events per hour meets the threshold of 15.",
    **update: Any,
) -> CriterionResult:
    fields: dict[str, Any] = {
        "criterion_id": "P/C1",
        "status": status,
        "confidence": confidence,
        "rationale": rationale,
        "policy_citations": [
            PolicyCitation(policy_id="P", node_id="0001", quote=q) for q in policy_quotes
        ],
        "case_evidence": [CaseEvidence(doc_id="psg", quote=q) for q in case_quotes],
        "controller": "heuristic",
        **update,
    }
    return CriterionResult.model_validate(fields)


def _pairs(*golds_and_preds: tuple[str, str], confidence: float = 0.9) -> list:
    return [
        (make_example(gold, example_id=str(i)), make_result(pred, confidence))
        for i, (gold, pred) in enumerate(golds_and_preds)
    ]


def test_status_accuracy_and_confusion_matrix() -> None:
    pairs = _pairs(("met", "met"), ("met", "not_met"), ("not_met", "not_met"), ("met", "met"))
    assert status_accuracy(pairs) == 0.75
    matrix = confusion_matrix(pairs)
    assert matrix["met"]["met"] == 2 and matrix["met"]["not_met"] == 1
    assert matrix["uncertain"] == {s.value: 0 for s in S}
    assert status_accuracy([]) == 0.0


def test_per_status_scores_and_macro_f1_known_value() -> None:
    # gold: met, met, not_met, missing_info; predicted: met, not_met, not_met, met
    pairs = _pairs(
        ("met", "met"), ("met", "not_met"), ("not_met", "not_met"), ("missing_info", "met")
    )
    scores = {s.status: s for s in per_status_scores(pairs)}
    assert scores[S.MET].precision == 0.5 and scores[S.MET].recall == 0.5
    assert scores[S.NOT_MET].precision == 0.5 and scores[S.NOT_MET].recall == 1.0
    assert scores[S.NOT_MET].f1 == pytest.approx(2 / 3)
    assert scores[S.MISSING_INFO].f1 == 0.0
    # present statuses: met (0.5), not_met (2/3), missing_info (0); uncertain/n.a. are absent
    assert macro_f1(pairs) == pytest.approx((0.5 + 2 / 3 + 0.0) / 3)


def test_unsafe_met_counts_only_gold_not_met_or_missing_info() -> None:
    pairs = _pairs(
        ("not_met", "met"),  # unsafe
        ("missing_info", "met"),  # unsafe
        ("missing_info", "missing_info"),
        ("not_met", "uncertain"),
        ("not_applicable", "met"),  # wrong but not unsafe
        ("uncertain", "met"),  # wrong but not unsafe
        ("met", "met"),
    )
    rate, unsafe, denominator = unsafe_met_rate(pairs)
    assert (unsafe, denominator) == (2, 4)
    assert rate == 0.5
    assert unsafe_met_rate(_pairs(("met", "met"))) == (0.0, 0, 0)


def test_ece_is_zero_when_perfectly_calibrated() -> None:
    # confidence 0.75 and three in four right: perfectly calibrated
    pairs = [
        (make_example("met", example_id=str(i)), make_result(pred, 0.75))
        for i, pred in enumerate(["met", "met", "met", "not_met"])
    ]
    assert expected_calibration_error(pairs) == pytest.approx(0.0)


def test_ece_of_overconfident_results() -> None:
    # confidence 1.0 but only half right: ECE 0.5; confidence 0.9 always wrong: 0.9
    half = _pairs(("met", "met"), ("met", "not_met"), confidence=1.0)
    assert expected_calibration_error(half) == pytest.approx(0.5)
    wrong = _pairs(("met", "not_met"), ("not_met", "met"), confidence=0.9)
    assert expected_calibration_error(wrong) == pytest.approx(0.9)


def test_reliability_table_bins() -> None:
    low = (make_example("met", example_id="low"), make_result("not_met", 0.05))
    pairs = [*_pairs(("met", "met"), confidence=1.0), low]
    bins = reliability_table(pairs)
    assert len(bins) == 10
    assert bins[9].count == 1 and bins[9].accuracy == 1.0  # 1.0 falls in the last bin
    assert bins[0].count == 1 and bins[0].mean_confidence == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("cited", "gold", "expected"),
    [
        ("AHI: 18 events/hour", "AHI: 18 events/hour", True),
        ("ahi 18  events / hour", "AHI: 18 events/hour", True),  # punctuation and case
        ("AHI or RDI greater than or equal to 15 events per hour", GOLD_POLICY, True),
        ("AHI", GOLD_POLICY, False),  # one word of a long quote
        (
            GOLD_CASE + " " + " ".join(f"word{i}" for i in range(30)),
            GOLD_CASE,
            False,
        ),  # a whole section
        ("AHI: 18 events/hour (moderate)", GOLD_CASE, True),  # Jaccard ≥ 0.5
        ("", GOLD_CASE, False),
    ],
)
def test_quotes_match(cited: str, gold: str, expected: bool) -> None:
    assert quotes_match(cited, gold) is expected


def test_citation_score_policy_and_case_parts() -> None:
    example = make_example()
    assert citation_score(example, make_result()).score == 1.0
    wrong_policy = citation_score(example, make_result(policy_quotes=("Something else.",)))
    assert wrong_policy.policy == 0.0 and wrong_policy.case == 1.0 and wrong_policy.score == 0.5
    padded = citation_score(example, make_result(case_quotes=(GOLD_CASE, "SpO2 nadir 84%.")))
    assert padded.case == pytest.approx(2 * 0.5 * 1.0 / 1.5)  # precision 1/2, recall 1
    assert padded.unmatched_cited_quotes == ["SpO2 nadir 84%."]
    missed = citation_score(example, make_result(case_quotes=()))
    assert missed.case == 0.0 and missed.missed_gold_quotes == [GOLD_CASE]


def test_citation_accuracy_skips_examples_with_nothing_to_cite() -> None:
    silent = make_example(
        "missing_info", example_id="silent", gold_policy_quote="", gold_case_quotes=[]
    )
    pairs = [
        (silent, make_result("missing_info", case_quotes=())),
        (make_example(), make_result(policy_quotes=())),
    ]
    overall, policy, case = citation_accuracy(pairs)
    assert (overall, policy, case) == (0.5, 0.0, 1.0)


def test_trialgpt_citation_falls_in_gold_sentence() -> None:
    note = "0. A 60-year-old man.\n1. HbA1c is 8.1% today.\n2. He smokes daily."
    example = make_example(
        case=CaseBundle(case_id="t", documents=[Document(doc_id="note", pages=[note])]),
        gold_sentence_ids=[1],
        gold_case_quotes=["HbA1c is 8.1% today."],
    )
    inside = citation_score(example, make_result(case_quotes=("HbA1c is 8.1%",)))
    assert inside.case == 1.0
    elsewhere = citation_score(example, make_result(case_quotes=("He smokes daily.",)))
    assert elsewhere.case == 0.0 and elsewhere.missed_gold_quotes == ["1. HbA1c is 8.1% today."]


def test_coherence_trace_contradiction() -> None:
    contradicting = make_result(
        "met",
        reasoning_trace=[
            ReasoningStep(index=0, kind=StepKind.DECISION, content="Decision: not met."),
            ReasoningStep(
                index=1, kind=StepKind.TOOL_CALL, tool="finish", arguments={"status": "met"}
            ),
        ],
    )
    assert coherence_checks(contradicting)["trace_agrees_with_status"] == 0.0
    agreeing = make_result(
        "not_met",
        reasoning_trace=[ReasoningStep(index=0, kind=StepKind.DECISION, content="status=not_met")],
        rationale="AHI 18 is above the 5 to 14 band for this branch.",
        policy_quotes=("between 5 and 14",),
    )
    assert coherence_checks(agreeing)["trace_agrees_with_status"] == 1.0
    abstained = make_result("uncertain", reasoning_trace=contradicting.reasoning_trace)
    assert "trace_agrees_with_status" not in coherence_checks(abstained)


def test_coherence_numbers_against_threshold() -> None:
    assert coherence_checks(make_result("met"))["numbers_agree_with_threshold"] == 1.0
    assert coherence_checks(make_result("not_met"))["numbers_agree_with_threshold"] == 0.0
    other_unit = make_result("not_met", case_quotes=("Slept 18 hours",))
    assert "numbers_agree_with_threshold" not in coherence_checks(other_unit)


def test_coherence_evidence_checks() -> None:
    no_evidence = coherence_checks(make_result("met", case_quotes=(), rationale="ok"))
    assert no_evidence["decision_has_evidence"] == 0.0
    assert no_evidence["rationale_present"] == 0.0
    unmentioned = coherence_checks(make_result(rationale="The criterion is clearly satisfied."))
    assert unmentioned["rationale_mentions_evidence"] == 0.0
    assert coherence_checks(make_result())["rationale_mentions_evidence"] == 1.0


def test_composite_uses_the_seed_weights() -> None:
    pairs = [(make_example(), make_result("met", 1.0, usage=Usage(input_tokens=10, llm_calls=2)))]
    metrics = compute_metrics(pairs)
    assert metrics.citation_accuracy == 1.0 and metrics.status_accuracy == 1.0
    assert metrics.ece == 0.0
    expected = 0.4 * 1.0 + 0.3 * metrics.reasoning_coherence + 0.2 * 1.0 + 0.1 * 1.0
    assert metrics.composite == pytest.approx(expected)
    assert metrics.cost.mean_llm_calls == 2.0 and metrics.cost.mean_total_tokens == 10.0
    assert example_score(*pairs[0]) == pytest.approx(expected)


def test_feedback_describes_what_went_wrong() -> None:
    example = make_example("not_met", note="AHI below threshold")
    result = make_result(
        "met",
        policy_quotes=("Other text entirely.",),
        case_quotes=(),
        controller="react",
        reasoning_trace=[
            ReasoningStep(
                index=0, kind=StepKind.TOOL_CALL, tool="pi_search", arguments={"query": "AHI"}
            )
        ],
    )
    text = feedback_for(example, result)
    assert "predicted met" in text and "gold is not_met" in text and "UNSAFE" in text
    assert "Policy citation missed" in text and GOLD_POLICY in text
    assert "Case evidence missed" in text and GOLD_CASE in text
    assert "Tools never called: facts_get, spans_tighten, finish." in text
    assert "pi_search" not in text.split("Tools never called:")[1]


def test_feedback_for_a_correct_heuristic_result_is_short() -> None:
    text = feedback_for(make_example(), make_result())
    assert text.startswith("Status correct: met")
    assert "Tools never called" not in text
