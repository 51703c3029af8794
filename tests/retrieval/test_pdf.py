"""PDF policies become trees with real page numbers, from bookmarks or, failing that, layout."""

from collections.abc import Callable

import pytest
from fpdf import FPDF

from retrieval import TreeBuildError, TreeNode, build_tree_from_pdf, walk
from retrieval.markdown import PREAMBLE_TITLE

Writer = Callable[[str], None]


def _pdf(build: Callable[[FPDF, Writer], None]) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)

    def write(text: str) -> None:
        pdf.multi_cell(0, 8, text, new_x="LMARGIN", new_y="NEXT")

    build(pdf, write)
    return bytes(pdf.output())


def _heading(pdf: FPDF, write: Writer, title: str, level: int = 0) -> None:
    pdf.start_section(title, level=level)
    write(title)


def _bookmarked(pdf: FPDF, write: Writer) -> None:
    """Page 1: cover, A, A.1 (continues on page 2); page 3: B and C share the page."""
    pdf.add_page()
    write("Cover text of the policy.")
    _heading(pdf, write, "A. General")
    write("General body. It has two sentences.")
    _heading(pdf, write, "1. Details", level=1)
    write("Details start on page one.")
    pdf.add_page()
    write("Details continue on page two.")
    pdf.add_page()
    _heading(pdf, write, "B. Covered Indications")
    write("Covered body on page three.")
    _heading(pdf, write, "C. Non-Covered Indications")
    write("Non-covered body also on page three.")


def _shape(tree: list[TreeNode]) -> list[tuple[str, str, int | None, int | None]]:
    return [(n.node_id, n.title, n.start_index, n.end_index) for n in walk(tree)]


def test_bookmarks_give_nested_nodes_with_inclusive_page_ranges():
    tree = build_tree_from_pdf(_pdf(_bookmarked))

    assert _shape(tree) == [
        ("0000", PREAMBLE_TITLE, 1, 1),
        ("0001", "A. General", 1, 2),
        ("0002", "1. Details", 1, 2),
        ("0003", "B. Covered Indications", 3, 3),
        ("0004", "C. Non-Covered Indications", 3, 3),
    ]
    assert [child.title for child in tree[1].nodes] == ["1. Details"]


def test_node_text_runs_from_its_title_to_the_next_title_even_on_a_shared_page():
    nodes = {node.title: node for node in walk(build_tree_from_pdf(_pdf(_bookmarked)))}

    assert nodes[PREAMBLE_TITLE].text == "Cover text of the policy."
    assert nodes["A. General"].text == "General body. It has two sentences."
    assert "Details start on page one." in nodes["1. Details"].text
    assert "Details continue on page two." in nodes["1. Details"].text
    assert nodes["B. Covered Indications"].text == "Covered body on page three."
    assert nodes["C. Non-Covered Indications"].text == "Non-covered body also on page three."
    assert nodes["A. General"].summary == "General body."


def test_without_bookmarks_heading_like_lines_start_sections_on_their_pages():
    def build(pdf: FPDF, write: Writer) -> None:
        pdf.add_page()
        write("A. GENERAL")
        write("Body of the general section. It ends here.")
        pdf.add_page()
        write("COVERED INDICATIONS")
        write("The service is covered when the criteria are met.")
        write("Coverage Limitations")
        write("It is not covered otherwise.")

    tree = build_tree_from_pdf(_pdf(build))

    assert _shape(tree) == [
        ("0000", "A. GENERAL", 1, 1),
        ("0001", "COVERED INDICATIONS", 2, 2),
        ("0002", "Coverage Limitations", 2, 2),
    ]
    assert tree[2].text == "It is not covered otherwise."


def test_without_bookmarks_or_headings_there_is_one_node_per_page():
    def build(pdf: FPDF, write: Writer) -> None:
        for number in (1, 2):
            pdf.add_page()
            write(f"plain lower-case text on page {number}, nothing like a heading.")

    tree = build_tree_from_pdf(_pdf(build))

    assert _shape(tree) == [("0000", "Page 1", 1, 1), ("0001", "Page 2", 2, 2)]
    assert "page 2" in tree[1].text


def test_sections_that_start_at_the_top_of_a_page_do_not_extend_the_previous_range():
    def build(pdf: FPDF, write: Writer) -> None:
        pdf.add_page()
        _heading(pdf, write, "First Section")
        write("one")
        pdf.add_page()
        write("two")
        pdf.add_page()
        _heading(pdf, write, "Second Section")
        write("three")

    assert _shape(build_tree_from_pdf(_pdf(build))) == [
        ("0000", "First Section", 1, 2),
        ("0001", "Second Section", 3, 3),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"this is not a PDF at all", "could not be read"),
    ],
)
def test_unreadable_input_raises_tree_build_error(data: bytes, message: str):
    with pytest.raises(TreeBuildError, match=message):
        build_tree_from_pdf(data)


def test_pdf_without_text_raises_tree_build_error():
    data = _pdf(lambda pdf, write: pdf.add_page())

    with pytest.raises(TreeBuildError, match="no extractable text"):
        build_tree_from_pdf(data)


def test_password_protected_pdf_raises_tree_build_error():
    def build(pdf: FPDF, write: Writer) -> None:
        pdf.set_encryption(owner_password="owner", user_password="secret")
        pdf.add_page()
        write("Secret policy.")

    with pytest.raises(TreeBuildError, match="encrypted"):
        build_tree_from_pdf(_pdf(build))


def test_tree_build_error_is_a_value_error():
    assert issubclass(TreeBuildError, ValueError)
