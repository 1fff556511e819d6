"""FG-RAG end to end with the real embedded models (MiniLM, spaCy, SmolLM2)."""

from __future__ import annotations

import pytest
from llama_index.core import Document

from llama_index_graphrag_ext.core.defaults import embedded_llm
from llama_index_graphrag_ext.fgrag import CooccurrenceExtractor, FGRAGIndex, FGRAGQueryEngine

pytestmark = pytest.mark.embedded

CORPUS = [
    "Beekeepers in Ohio sell raw honey at farmers markets and to local grocery stores.",
    "Beeswax from the hive is bought by candle makers. Royal jelly is sold online.",
]


def test_end_to_end_with_embedded_llm(minilm) -> None:
    llm = embedded_llm(max_new_tokens=48)
    index = FGRAGIndex.from_documents(
        [Document(text=t) for t in CORPUS],
        config="paper",
        include_noun_chunks=True,
        llm=llm,
        embed_model=minilm,
    )
    (extractor,) = index.kg_extractors
    assert isinstance(extractor, CooccurrenceExtractor)  # SmolLM2 cannot write tuples
    assert extractor.include_noun_chunks
    assert index.llm_steps.record("extraction").tier == "llm-free"
    assert index.stats()["entities"] >= 4
    engine = index.as_query_engine(max_query_entities=1, max_questions=2, max_context_tokens=200)
    assert isinstance(engine, FGRAGQueryEngine)
    response = engine.query("How do beekeepers sell honey?")
    assert str(response).strip()
    units = response.metadata["fgrag"]
    assert units and units[-1]["entity"] == "How do beekeepers sell honey?"
    assert all(u["summary"] for u in units)
    usage = response.metadata["usage"]
    assert usage["calls"] == 1 + 2 * len(units) + 1 and usage["total_tokens"] > 0
    assert response.source_nodes
