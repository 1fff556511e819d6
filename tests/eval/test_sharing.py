"""Measuring what shared embeddings and parses save: both ways, one table."""

from __future__ import annotations

import pytest
from llama_index.core import Document

from llama_index_graphrag_ext.eval.sharing import format_sharing, measure_sharing

DOCS = [
    Document(id_="curie", text="Marie Curie studied radioactivity in Paris. She won in 1911."),
    Document(id_="sorbonne", text="Pierre Curie taught physics at the Sorbonne in Paris."),
    Document(id_="bees", text="Beekeepers in Ohio sell raw honey. Candle makers buy beeswax."),
]


def test_measure_sharing_reports_both_ways(bow_embed):
    # CUE-RAG with the parser's sentences parses as ChainRAG does: one pass serves both.
    methods = ["cue", "chainrag"]
    options = {"sentence_splitter": "model"}
    result = measure_sharing(DOCS, methods, embed_model=bow_embed, options=options)
    assert set(result["separate"]) == set(result["shared"]) == set(methods)
    assert result["shared_stats"]["parse_hits"] == len(DOCS)
    assert result["separate_total"] == pytest.approx(sum(result["separate"].values()), abs=0.05)
    table = format_sharing(result)
    assert table.count("\n") == 4 and "**total**" in table
