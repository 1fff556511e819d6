"""The real embedded stack (MiniLM, SmolLM2) end to end."""

from __future__ import annotations

import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.cue import MultiPartiteIndex

DOCS = [
    Document(
        id_="g", text="Green\nGreen is an album by Steve Hillage.", metadata={"title": "Green"}
    ),
    Document(
        id_="h",
        text="Steve Hillage\nSteve Hillage is an English guitarist. He was born in Chingford.",
        metadata={"title": "Steve Hillage"},
    ),
    Document(id_="p", text="Paris\nParis is the capital of France.", metadata={"title": "Paris"}),
]


@pytest.mark.embedded
def test_embedded_minilm_and_smollm2_end_to_end(minilm):
    from llama_index_graphrag_ext.core.defaults import embedded_llm

    llm = embedded_llm(max_new_tokens=16)
    # alpha = 1 with the embedded LLM: extraction falls back to sentences, counted
    index = MultiPartiteIndex.from_documents(
        DOCS, transformations=[PassageParser()], embed_model=minilm, llm=llm, alpha=1.0
    )
    assert index.stats()["extraction"]["chunks_fallback"] == 3
    engine = index.as_query_engine(llm=llm, similarity_top_k=2)
    response = engine.query("Where was Steve Hillage born?")
    assert str(response).strip()
    assert response.source_nodes[0].node.ref_doc_id == "h"
