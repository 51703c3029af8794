"""Node text splits into sentence-level spans whose offsets slice the text exactly."""

from pathlib import Path

import pytest

from retrieval import build_tree_from_markdown, walk
from retrieval.query import MAX_QUERY_TOKENS, to_match_expression, to_query_tokens
from retrieval.spans import split_spans
from testdata import EXAMPLES

POLICIES = EXAMPLES / "policies"


def _texts(text: str) -> list[str]:
    return [text[span.start : span.end] for span in split_spans(text)]


def test_sentences_split_at_sentence_ends_only():
    text = "Apnea is a cessation. Hypopnea is a reduction! Is it covered? Yes."

    assert _texts(text) == [
        "Apnea is a cessation.",
        "Hypopnea is a reduction!",
        "Is it covered?",
        "Yes.",
    ]


@pytest.mark.parametrize(
    "sentence",
    [
        "Symptoms, e.g. daytime sleepiness, are documented.",
        "Symptoms, i.e. Daytime sleepiness, are documented.",
        "Ordered by Dr. Smith on the same day.",
        "Signed by J. Smith, the treating physician.",
        "See Pub. No. 100-03 for details.",
        "At least 10 seconds etc. with the 4% desaturation.",
    ],
)
def test_abbreviations_and_initials_do_not_end_a_sentence(sentence: str):
    assert _texts(sentence) == [sentence]


def test_list_items_are_spans_without_their_markers():
    text = (
        "A positive diagnosis must include:\n"
        "   - a. attended PSG performed in a sleep laboratory; or\n"
        "   - b. unattended HST with a Type II device.\n"
        "1. First numbered item.\n"
        "(iv) Roman item"
    )

    assert _texts(text) == [
        "A positive diagnosis must include:",
        "attended PSG performed in a sleep laboratory; or",
        "unattended HST with a Type II device.",
        "First numbered item.",
        "Roman item",
    ]


def test_wrapped_lines_stay_in_one_sentence_and_blank_lines_separate_blocks():
    text = "The sleep test must have been\nordered by the physician.\n\nHeading Like Line\n"

    assert _texts(text) == [
        "The sleep test must have been\nordered by the physician.",
        "Heading Like Line",
    ]


@pytest.mark.parametrize("path", sorted(POLICIES.glob("*.md")), ids=lambda path: path.stem)
def test_spans_of_real_policies_slice_node_text_exactly_and_are_never_junk(path: Path):
    for node in walk(build_tree_from_markdown(path.read_text())):
        for span in split_spans(node.text):
            piece = node.text[span.start : span.end]
            assert piece == piece.strip() and piece
            assert any(char.isalnum() for char in piece)
            assert len(piece) >= 3, piece


def test_query_tokens_are_lowercased_distinct_words_without_stopwords():
    assert to_query_tokens("Is the AHI >= 15 events/hour? AHI!") == ["ahi", "15", "events", "hour"]
    assert len(to_query_tokens(" ".join(f"w{n}" for n in range(100)))) == MAX_QUERY_TOKENS


def test_match_expression_quotes_every_token_and_is_none_when_nothing_is_left():
    assert to_match_expression('PSG "OR" NEAR(x') == '"psg" OR "near" OR "x"'
    assert to_match_expression("the of and") is None
    assert to_match_expression("  ") is None
