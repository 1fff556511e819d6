"""One ``similarity_top_k`` for every retriever: the number of passages returned, validated
the same way, and one error for an empty query."""

from __future__ import annotations

import logging

import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.nodes import EmptyQueryError, PassageParser
from llama_index_graphrag_ext.specs import SPECS

METHODS = ["dense", "bm25", "li-hybrid", "qcg", "cue", "chainrag", "fgrag", "lprag"]


@pytest.fixture(scope="module")
def indexes():
    from support import BagOfWordsEmbedding

    logging.disable(logging.WARNING)
    try:
        docs = [
            Document(text=f"Passage {i} about topic {i % 3} named Alpha{i}.") for i in range(12)
        ]
        nodes = PassageParser().get_nodes_from_documents(docs)
        out = {}
        for name in METHODS:
            index_class = SPECS[name].index_class()
            extra = {"epochs": 2} if name == "lprag" else {}
            out[name] = index_class(nodes, embed_model=BagOfWordsEmbedding(), **extra)
        return out
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.parametrize("name", METHODS)
def test_similarity_top_k_is_the_number_of_passages_for_every_method(indexes, name):
    index = indexes[name]
    for asked, returned in ((3, 3), (10**9, 12), (2.0, 2), ("3", 3)):
        hits = index.as_retriever(similarity_top_k=asked).retrieve("Alpha3 topic")
        assert len(hits) == returned, (name, asked)
    for bad in (0, -1, 2.5, True, "three"):
        with pytest.raises(ValueError, match="similarity_top_k must be a whole number >= 1"):
            index.as_retriever(similarity_top_k=bad).retrieve("Alpha3 topic")
    for empty in ("", "   "):
        with pytest.raises(EmptyQueryError):
            index.as_retriever().retrieve(empty)
