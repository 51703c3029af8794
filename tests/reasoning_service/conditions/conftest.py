"""Builders for small cases and atoms: each test states the case text it judges."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from reasoning_service.conditions.case_reading import CaseReading, ContextReader
from reasoning_service.conditions.vocabulary import Vocabulary, load_vocabulary
from reasoning_service.models import CaseBundle

VOCABULARY_FILE = Path(__file__).resolve().parents[3] / "vocabulary" / "clinical-synonyms.json"


@pytest.fixture(scope="session")
def vocabulary() -> Vocabulary:
    return load_vocabulary(VOCABULARY_FILE)


@pytest.fixture(scope="session")
def context(vocabulary: Vocabulary) -> ContextReader:
    return ContextReader(vocabulary)


def make_case(
    *pages: str,
    facts: list[dict[str, Any]] | None = None,
    as_of: str = "2026-03-01",
    doc_date: str = "2026-02-20",
    doc_title: str = "Clinic note",
    **extra: Any,
) -> CaseBundle:
    """A case with one document whose pages are `pages`."""
    return CaseBundle.model_validate(
        {
            "case_id": "t-1",
            "as_of": as_of,
            "facts": facts or [],
            "documents": [
                {"doc_id": "note-1", "title": doc_title, "date": doc_date, "pages": list(pages)}
            ]
            if pages
            else [],
            **extra,
        }
    )


def quoted_fact(field: str, value: Any, quote: str, **extra: Any) -> dict[str, Any]:
    """A fact an extractor read from `quote` on the first page of `make_case`'s document."""
    source = {"doc_id": "note-1", "page": 1, "quote": quote}
    return {"field": field, "value": value, **extra, "source": source}


@pytest.fixture
def read(vocabulary: Vocabulary, context: ContextReader):
    def _read(case: CaseBundle) -> CaseReading:
        return CaseReading.read(case, vocabulary, context)

    return _read


def date(text: str) -> dt.date:
    return dt.date.fromisoformat(text)
