"""No page can stall the evaluator: reading and checking a case grows linearly with its text.

The ratio of two sizes is measured in the test's own run, in CPU time of this process (other
processes on a busy machine do not count; no absolute time).
"""

from __future__ import annotations

import time

from reasoning_service.conditions.atoms import evaluate_atom
from reasoning_service.models.conditions import FindingAtom, QuantityAtom, TimeWindowAtom

from .conftest import make_case

ATOMS = [
    FindingAtom(kind="finding", id="stroke", label="stroke", concept="stroke"),
    QuantityAtom(
        kind="quantity",
        id="ef",
        label="EF",
        concept="ejection fraction",
        aliases=["EF"],
        comparator="<=",
        value=35,
        unit="percent",
    ),
    TimeWindowAtom(
        kind="time_window",
        id="mi",
        label="MI",
        concept="myocardial infarction",
        aliases=["MI"],
        relation="within",
        amount=40,
        unit="days",
    ),
]


def _seconds(page: str, read, atoms=ATOMS) -> float:
    started = time.process_time()
    reading = read(make_case(page))
    for atom in atoms:
        evaluate_atom(atom, reading, 0.7)
    return time.process_time() - started


def test_an_unpunctuated_megabyte_page_costs_about_ten_times_a_tenth_of_it(read):
    unit = "patient reports no stroke and ejection fraction was normal after the MI "
    small = (unit * (100_000 // len(unit) + 1))[:100_000]
    large = (unit * (1_000_000 // len(unit) + 1))[:1_000_000]
    _seconds(small, read)  # warm-up: pipeline and patterns
    # The best of two runs of each: a busy machine slows a run, it never speeds one up.
    small_s = min(_seconds(small, read) for _ in range(2))
    large_s = min(_seconds(large, read) for _ in range(2))
    ratio = large_s / small_s
    # Linear work gives about 10; a quadratic scan would give about 100.
    assert ratio < 30, f"1 MB took {ratio:.1f}× the time of 100 KB: not linear"


def test_a_megabyte_of_arrows_is_read_in_linear_time(read):
    """A trend chain that never closes ("1->1->…->1/") is read once, not once per number."""
    trend = QuantityAtom(
        kind="quantity",
        id="change",
        label="change",
        concept="score change",
        aliases=["score"],
        comparator=">",
        value=-25,
        unit="percent",
        measure="relative_change",
        read_in="sentence",
    )
    small, large = "score " + "1 -> " * 20_000 + "1/", "score " + "1 -> " * 200_000 + "1/"
    _seconds(small, read, [trend])
    ratio = min(_seconds(large, read, [trend]) for _ in range(2)) / min(
        _seconds(small, read, [trend]) for _ in range(2)
    )
    assert ratio < 30, f"10× the arrows took {ratio:.1f}× the time: not linear"


def test_words_a_refusal_could_read_two_ways_cost_no_more_in_long_sentences(read):
    """A sentence "ECT in the and the in the and the …" never reaches a refusal: one four times
    as long, in a page of the same size, is read in about the same time, not exponentially
    more."""
    ect = FindingAtom(kind="finding", id="ect", label="ECT", concept="ECT")

    def page(units: int, sentences: int) -> str:
        return " ".join("ECT" + " in the and the" * units + " x." for _ in range(sentences))

    short, long = page(3, 120), page(12, 30)
    _seconds(short, read, [ect])
    ratio = min(_seconds(long, read, [ect]) for _ in range(2)) / min(
        _seconds(short, read, [ect]) for _ in range(2)
    )
    assert ratio < 30, f"longer sentences took {ratio:.1f}× the time: not linear"
