"""Fixtures of the scale tests: a second benchmark folder holding one long text."""

from __future__ import annotations

import json

import pytest

LONG_TEXT = " ".join(
    f"Chapter {i} tells how the ferry crossed the river at dawn. The crew counted {i} crates."
    for i in range(40)
)


@pytest.fixture(scope="module")
def book_set(tmp_path_factory):
    """A second benchmark folder holding one long text (cut into pieces) and no gold."""
    folder = tmp_path_factory.mktemp("book-set")
    (folder / "corpus.jsonl").write_text(
        json.dumps({"id": "book", "title": "Ferry log", "text": LONG_TEXT}) + "\n"
    )
    (folder / "questions.jsonl").write_text(
        json.dumps({"id": "q1", "question": "What did the ferry carry?"}) + "\n"
    )
    return folder


@pytest.fixture(scope="module")
def book_text() -> str:
    """The long text of :func:`book_set`."""
    return LONG_TEXT
