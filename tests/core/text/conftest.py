"""Fixtures of the language-tool tests."""

from __future__ import annotations

import pytest

from llama_index_graphrag_ext.core.text import has_ner, load_spacy


@pytest.fixture(scope="module")
def nlp():
    """The default pipeline, loaded once; skips NER tests where no model is installed."""
    pipeline = load_spacy()
    if not has_ner(pipeline):
        pytest.skip("no spaCy English model with NER installed")
    return pipeline
