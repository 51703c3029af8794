"""LLM-free node summaries: what tree search sees in place of a section's text."""

from retrieval.spans import split_spans

MAX_SUMMARY_CHARS = 200
"""Summaries longer than this are cut at a word boundary and end with an ellipsis."""


def summarize(text: str, child_titles: list[str]) -> str:
    """Return the first sentence of `text` (capped), or the child titles when `text` is empty.

    Tree search shows summaries instead of full text, so they must be short yet say what the
    section is about; a heading-only section is best described by what it contains.
    """
    spans = split_spans(text)
    if not spans:
        return _cap("; ".join(child_titles))
    first = spans[0]
    return _cap(" ".join(text[first.start : first.end].split()))


def _cap(sentence: str) -> str:
    if len(sentence) <= MAX_SUMMARY_CHARS:
        return sentence
    cut = sentence[: MAX_SUMMARY_CHARS - 1].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"
