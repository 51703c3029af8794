"""Build a policy tree from a PDF, without any LLM.

Steps:
1. Open the PDF with pypdf and extract each page's text (`TreeBuildError` if it cannot be read,
   is encrypted with a password, has no pages or no extractable text).
2. Find section starts: the outline (bookmarks) if there is one, nested as bookmarked; else
   heading-like lines (numbered "A."/"1.", ALL CAPS, or Title Case after a sentence end); else
   one section per page, titled "Page N".
3. Locate each section's title in the text, so a section's `text` runs from after its title to
   the next section's title even when they share a page; text before the first section becomes a
   "Preamble" node.
4. Pages are real 1-based page numbers: `start_index` is the page of the title and `end_index`
   the last page before the next section that is not a subsection (PageIndex's convention: a
   parent's range covers its children). A next section starting at the very top of a page does
   not pull that page into the range.
"""

import bisect
import io
import re
from dataclasses import dataclass

from pypdf import PdfReader
from pypdf.errors import PyPdfError
from pypdf.generic import Destination

from retrieval.errors import TreeBuildError
from retrieval.markdown import PREAMBLE_TITLE
from retrieval.summary import summarize
from retrieval.tree import TreeNode, check_node_count

_MAX_HEADING_CHARS = 80
_NUMBERED_HEADING = re.compile(r"^(?:[A-Z]|[IVX]{1,5}|\d{1,2}(?:\.\d{1,2})*)[.)]\s+[A-Z(]")
_SENTENCE_END = re.compile(r"[.!?:;,]$")


@dataclass(frozen=True)
class _Document:
    """All page texts joined by newlines, with the offset where each page starts."""

    text: str
    page_starts: list[int]

    def page_of(self, offset: int) -> int:
        """1-based page number holding `offset` (a page's trailing newline belongs to it)."""
        return bisect.bisect_right(self.page_starts, offset)

    def page_span(self, page: int) -> tuple[int, int]:
        """Offsets `[start, end)` of 1-based `page`."""
        end = self.page_starts[page] - 1 if page < len(self.page_starts) else len(self.text)
        return self.page_starts[page - 1], end


@dataclass
class _Entry:
    """One section start: its title, nesting depth and where its title and body begin."""

    title: str
    depth: int
    start: int
    body_start: int


def build_tree_from_pdf(data: bytes) -> list[TreeNode]:
    """Return the root nodes of a PDF's section tree (see the module docstring)."""
    reader = _open(data)
    document = _extract(reader)
    entries = (
        _outline_entries(reader, document) or _layout_entries(document) or _page_entries(document)
    )
    return _to_tree(_with_preamble(entries, document), document)


def _open(data: bytes) -> PdfReader:
    if not data:
        raise TreeBuildError("PDF is empty (0 bytes)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise TreeBuildError("PDF is encrypted with a password; supply a decrypted copy")
        page_count = len(reader.pages)
    except TreeBuildError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise TreeBuildError(f"PDF could not be read: {exc}") from exc
    if page_count == 0:
        raise TreeBuildError("PDF has no pages")
    return reader


def _extract(reader: PdfReader) -> _Document:
    texts: list[str] = []
    for number, page in enumerate(reader.pages, start=1):
        try:
            texts.append(page.extract_text() or "")
        except (PyPdfError, ValueError, KeyError, TypeError) as exc:
            raise TreeBuildError(f"text of PDF page {number} could not be extracted") from exc
    if not any(text.strip() for text in texts):
        raise TreeBuildError("PDF has no extractable text (a scan needs OCR first)")
    starts = [0]
    for text in texts[:-1]:
        starts.append(starts[-1] + len(text) + 1)
    return _Document(text="\n".join(texts), page_starts=starts)


def _outline_entries(reader: PdfReader, document: _Document) -> list[_Entry]:
    """Section starts from the PDF outline, in outline order, with their titles located."""
    try:
        outline = reader.outline
    except (PyPdfError, ValueError, KeyError, TypeError):
        return []  # a broken outline is no outline: the layout fallback still finds sections
    bookmarks: list[tuple[str, int, int]] = []
    _flatten_outline(reader, outline, 0, bookmarks)
    entries: list[_Entry] = []
    floor = 0
    for title, depth, page in bookmarks:
        page_start, page_end = document.page_span(page)
        start, body_start = _locate_title(document.text, title, max(floor, page_start), page_end)
        if start == body_start:
            start = body_start = max(floor, page_start)
        entries.append(_Entry(title=title, depth=depth, start=start, body_start=body_start))
        floor = body_start
    return entries


def _flatten_outline(
    reader: PdfReader, items: list, depth: int, out: list[tuple[str, int, int]]
) -> None:
    """Append (title, depth, 1-based page) for each bookmark; pypdf nests children as lists."""
    for item in items:
        if isinstance(item, list):
            _flatten_outline(reader, item, depth + 1, out)
        elif isinstance(item, Destination):
            page_index = reader.get_destination_page_number(item)
            if page_index is not None and page_index >= 0:
                out.append((str(item.title or "").strip(), depth, page_index + 1))


def _locate_title(text: str, title: str, lo: int, hi: int) -> tuple[int, int]:
    """Offsets of `title` in `text[lo:hi]`, preferring a line start; `(lo, lo)` if absent."""
    words = [re.escape(word) for word in title.split()]
    if not words:
        return lo, lo
    pattern = r"\s*".join(words)
    for candidate in (rf"(?m)^[ \t]*{pattern}", pattern):
        match = re.compile(candidate, re.IGNORECASE).search(text, lo, hi)
        if match:
            return match.start(), match.end()
    return lo, lo


def _layout_entries(document: _Document) -> list[_Entry]:
    """Heading-like lines, each a root section."""
    entries: list[_Entry] = []
    page_starts = set(document.page_starts)
    previous = ""
    offset = 0
    for line in document.text.splitlines(keepends=True):
        stripped = line.strip()
        at_page_start = offset in page_starts
        if stripped and _is_heading_line(stripped, previous, at_page_start):
            start = offset + line.index(stripped)
            entries.append(_Entry(stripped, 0, start, start + len(stripped)))
        if stripped:
            previous = stripped
        offset += len(line)
    return entries


def _is_heading_line(line: str, previous: str, at_page_start: bool) -> bool:
    """A short line that is numbered, ALL CAPS, or Title Case right after a sentence ended."""
    if len(line) > _MAX_HEADING_CHARS or line.endswith((".", ",", ";")):
        return False
    letters = [char for char in line if char.isalpha()]
    if len(letters) < 2:
        return False
    if _NUMBERED_HEADING.match(line) or (len(letters) >= 4 and line.upper() == line):
        return True
    long_words = [word for word in line.split() if len(word) > 3 and word[0].isalpha()]
    is_title_case = bool(long_words) and all(word[0].isupper() for word in long_words)
    after_break = at_page_start or not previous or bool(_SENTENCE_END.search(previous))
    return is_title_case and after_break and not line.endswith(":")


def _page_entries(document: _Document) -> list[_Entry]:
    """One section per page: the last resort when nothing looks like a heading."""
    return [
        _Entry(title=f"Page {page}", depth=0, start=start, body_start=start)
        for page, start in enumerate(document.page_starts, start=1)
    ]


def _with_preamble(entries: list[_Entry], document: _Document) -> list[_Entry]:
    """Prepend a preamble section when text precedes the first section, so nothing is lost."""
    first = entries[0].start
    if not document.text[:first].strip():
        return entries
    return [_Entry(PREAMBLE_TITLE, 0, 0, 0), *entries]


def _to_tree(entries: list[_Entry], document: _Document) -> list[TreeNode]:
    """Nest entries by depth, giving ids in entry (depth-first) order and page ranges."""
    check_node_count(len(entries))
    roots: list[TreeNode] = []
    stack: list[tuple[int, TreeNode]] = []
    for index, entry in enumerate(entries):
        node = _to_node(index, entries, document)
        while stack and stack[-1][0] >= entry.depth:
            stack.pop()
        (stack[-1][1].nodes if stack else roots).append(node)
        stack.append((entry.depth, node))
    for node in roots:
        _fill_summaries(node)
    return roots


def _to_node(index: int, entries: list[_Entry], document: _Document) -> TreeNode:
    entry = entries[index]
    following = entries[index + 1 :]
    own_end = following[0].start if following else len(document.text)
    section_end = next(
        (later.start for later in following if later.depth <= entry.depth), len(document.text)
    )
    start_page = document.page_of(entry.start)
    return TreeNode(
        title=entry.title or f"Page {start_page}",
        node_id=f"{index:04d}",
        start_index=start_page,
        end_index=max(start_page, document.page_of(max(section_end - 1, 0))),
        text=document.text[entry.body_start : max(own_end, entry.body_start)].strip(),
    )


def _fill_summaries(node: TreeNode) -> None:
    """Summaries need the children, so they are set once the tree is nested."""
    for child in node.nodes:
        _fill_summaries(child)
    node.summary = summarize(node.text, [child.title for child in node.nodes])
