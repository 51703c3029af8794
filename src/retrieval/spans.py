"""Split a node's text into sentence-level spans with exact character offsets.

A span is a sentence, a list item or a short line, located by `(char_start, char_end)` so that
`text[char_start:char_end]` is the span verbatim: citations must quote the policy exactly.
Blocks are runs of non-blank lines, and each list item starts a new block; wrapped lines (as in
PDF text) stay in one span. Inside a block, a sentence ends at `.`, `!` or `?` followed by
whitespace and a character that is not lowercase, unless the word before it is a known
abbreviation ("e.g.", "Dr.") or a single letter; leading list markers ("-", "1.", "a.", "(iv)")
are left out of the span.
"""

import re
from typing import NamedTuple

_ABBREVIATIONS = frozenset(
    {
        "e.g", "i.e", "etc", "vs", "viz", "cf", "al", "approx", "incl", "dept", "fig", "no",
        "nos", "vol", "pp", "p", "dr", "mr", "mrs", "ms", "prof", "st", "jr", "sr", "inc",
        "ltd", "co", "corp", "u.s", "u.k", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
        "sep", "sept", "oct", "nov", "dec", "pub", "ref",
    }
)  # fmt: skip
_LIST_MARKER = re.compile(
    r"[ \t]*(?:[-*+•]|\(?(?:\d{1,3}|[a-zA-Z]|[ivxlcdm]{1,5}|[IVXLCDM]{1,5})[.)])[ \t]+"
)
_BOUNDARY = re.compile(r"[.!?][\"'”’)\]]*(?=\s)")
_WORD = re.compile(r"\w", re.UNICODE)


class TextSpan(NamedTuple):
    """Half-open character range `[start, end)` of one span inside its text."""

    start: int
    end: int


def split_spans(text: str) -> list[TextSpan]:
    """Return the sentence-level spans of `text`, in order, trimmed of whitespace and markers."""
    spans: list[TextSpan] = []
    for block_start, block_end in _blocks(text):
        start = _skip_marker(text, block_start, block_end)
        for end in _sentence_ends(text, start, block_end):
            _append_trimmed(spans, text, start, end)
            start = end
        _append_trimmed(spans, text, start, block_end)
    return spans


def _blocks(text: str) -> list[tuple[int, int]]:
    """Group lines into blocks: blank lines separate them and list items start new ones."""
    blocks: list[tuple[int, int]] = []
    start: int | None = None
    offset = 0
    for line in text.splitlines(keepends=True):
        line_end = offset + len(line)
        if not line.strip():
            if start is not None:
                blocks.append((start, offset))
            start = None
        elif start is None:
            start = offset
        elif _LIST_MARKER.match(line):
            blocks.append((start, offset))
            start = offset
        offset = line_end
    if start is not None:
        blocks.append((start, offset))
    return blocks


def _skip_marker(text: str, start: int, end: int) -> int:
    """Skip list markers, nested ones too ("- a. ")."""
    while match := _LIST_MARKER.match(text, start, end):
        start = match.end()
    return start


def _sentence_ends(text: str, start: int, end: int) -> list[int]:
    """Offsets just past each sentence-ending punctuation mark inside `[start, end)`."""
    ends: list[int] = []
    for match in _BOUNDARY.finditer(text, start, end):
        if _is_sentence_end(text, match.start(), match.end(), end):
            ends.append(match.end())
    return ends


def _is_sentence_end(text: str, mark: int, after: int, end: int) -> bool:
    word_start = mark
    while word_start > 0 and not text[word_start - 1].isspace() and text[word_start - 1] != "(":
        word_start -= 1
    word = text[word_start:mark].lower()
    if text[mark] == "." and (word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())):
        return False
    following = text[after:end].lstrip()
    return bool(following) and not following[0].islower()


def _append_trimmed(spans: list[TextSpan], text: str, start: int, end: int) -> None:
    """Trim whitespace off `[start, end)` and keep it if it holds any word character."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if _WORD.search(text, start, end):
        spans.append(TextSpan(start, end))
