"""Build a policy tree from Markdown headings, without any LLM.

Each ATX heading (`#` … `######`) becomes a node nested under the nearest shallower heading.
A node's `text` is its own body: the lines between its heading and the next heading of any
level, verbatim apart from leading/trailing blank lines, because criteria cite it word for word.
Text before the first heading becomes a "Preamble" node so nothing is lost. Lines inside fenced
code blocks are never headings.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from retrieval.summary import summarize
from retrieval.tree import TreeNode, check_node_count

PREAMBLE_TITLE = "Preamble"
"""Title of the node holding text that comes before the first heading."""

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass
class _Section:
    """A heading and its body lines while the document is being scanned."""

    level: int
    title: str
    line_num: int
    body: list[str] = field(default_factory=list)
    children: list["_Section"] = field(default_factory=list)


def build_tree_from_markdown(text: str) -> list[TreeNode]:
    """Return the root nodes of the heading tree of a Markdown document."""
    sections = _scan(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    check_node_count(len(sections))
    roots = _nest(sections)
    counter = iter(range(10_000))
    return [_to_node(section, counter) for section in roots]


def _scan(lines: list[str]) -> list[_Section]:
    """Split the document into flat sections, one per heading (plus a preamble if needed)."""
    preamble = _Section(level=0, title=PREAMBLE_TITLE, line_num=1)
    sections = [preamble]
    fence: str | None = None
    for number, line in enumerate(lines, start=1):
        fence_match = _FENCE.match(line)
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
        heading = None if fence is not None or fence_match else _HEADING.match(line)
        if heading:
            title = _CLOSING_HASHES.sub("", heading.group(2) or "").strip()
            sections.append(_Section(level=len(heading.group(1)), title=title, line_num=number))
        else:
            sections[-1].body.append(line)
    has_preamble = any(line.strip() for line in preamble.body)
    return sections if has_preamble else sections[1:]


def _nest(sections: list[_Section]) -> list[_Section]:
    """Nest flat sections by heading level; a preamble (level 0) stays a root leaf."""
    roots: list[_Section] = []
    stack: list[_Section] = []
    for section in sections:
        if section.level == 0:
            roots.append(section)
            continue
        while stack and stack[-1].level >= section.level:
            stack.pop()
        (stack[-1].children if stack else roots).append(section)
        stack.append(section)
    return roots


def _to_node(section: _Section, counter: Iterator[int]) -> TreeNode:
    node_id = f"{next(counter):04d}"
    body = _strip_blank_lines(section.body)
    children = [_to_node(child, counter) for child in section.children]
    return TreeNode(
        title=section.title,
        node_id=node_id,
        line_num=section.line_num,
        summary=summarize(body, [child.title for child in children]),
        text=body,
        nodes=children,
    )


def _strip_blank_lines(lines: list[str]) -> str:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[start:end])
