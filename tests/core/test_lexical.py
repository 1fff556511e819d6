"""The lexical channel: BM25 tables, the reciprocal-rank fusion, and every method using it."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.lexical import RRF_K, LexicalTable, fuse
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.specs import SPECS

GRAPH_METHODS = ["qcg", "cue", "chainrag", "lprag", "fgrag"]


def test_bm25_table_scores_rows_by_the_query_words_they_hold():
    table = LexicalTable(["the river Vltava flows north", "a quiet lake", "Vltava Vltava bridge"])
    scores = table.scores("Where does the Vltava flow?")
    assert scores[1] == 0 and scores[0] > 0 and scores[2] > 0
    rows, values = table.top("Vltava bridge", 5)
    assert rows.tolist() == [2, 0]  # rows without a query word are not returned
    assert values[0] > values[1] > 0
    assert table.top("unknown words only", 5)[0].size == 0
    empty = LexicalTable([])
    assert len(empty) == 0 and empty.top("anything", 3)[0].size == 0


def test_fusion_is_weighted_reciprocal_rank():
    rows, scores = fuse([10, 11, 12], [12, 13], 0.5)
    expected = {
        10: 1 / (RRF_K + 1),
        11: 1 / (RRF_K + 2),
        12: 1 / (RRF_K + 3) + 0.5 / (RRF_K + 1),
        13: 0.5 / (RRF_K + 2),
    }
    assert rows.tolist() == sorted(expected, key=lambda r: -expected[r])
    assert np.allclose(scores, [expected[r] for r in rows.tolist()])
    # weight 0: the method's own order, untouched; ties keep it too
    assert fuse([3, 1, 2], [2, 1], 0.0)[0].tolist() == [3, 1, 2]
    assert fuse([5, 6], [6, 5], 1.0)[0].tolist() == [5, 6]


def _filler(i: int) -> str:
    return f"Report {i}: the committee met in the hall and discussed budget item {i}."


@pytest.fixture(scope="module")
def blind_indexes():
    """Every graph method over a corpus an embedder cannot tell apart (every vector equal)."""
    logging.disable(logging.WARNING)
    try:
        docs = [Document(text=_filler(i), doc_id=f"d{i}") for i in range(14)]
        docs.insert(9, Document(text="Zubrowka Mendl baked the cake in Lutz.", doc_id="gold"))
        nodes = PassageParser().get_nodes_from_documents(docs)
        out = {}
        for name in GRAPH_METHODS:
            index_class = SPECS[name].index_class()
            extra = {"epochs": 2} if name == "lprag" else {}
            out[name] = index_class(nodes, embed_model=MockEmbedding(embed_dim=8), **extra)
        return out
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.parametrize("name", GRAPH_METHODS)
def test_a_rare_name_finds_its_passage_through_bm25_in_every_method(blind_indexes, name):
    index = blind_indexes[name]
    assert index.config.flat()["bm25_weight"] > 0  # on in the default preset
    question = "Who is Zubrowka Mendl?"
    top = index.as_retriever(similarity_top_k=3).retrieve(question)
    ids = [r.node.ref_doc_id or r.node.node_id for r in top]
    assert "gold" in ids, (name, ids)
    gold = top[ids.index("gold")]
    assert gold.node.metadata["evidence"]["bm25_rank"] == 1
    assert [r.score for r in top] == sorted((r.score for r in top), reverse=True)
    # weight 1: BM25's first passage heads the list whatever the blind vectors say
    first = index.as_retriever(similarity_top_k=3, bm25_weight=1.0).retrieve(question)[0]
    assert (first.node.ref_doc_id or first.node.node_id) == "gold", name


@pytest.mark.parametrize("name", GRAPH_METHODS)
def test_the_paper_presets_keep_bm25_off(name):
    config = SPECS[name].config.preset("paper")
    assert config.flat()["bm25_weight"] == 0


def test_bm25_follows_inserts_and_deletes():
    index_class = SPECS["chainrag"].index_class()
    nodes = PassageParser().get_nodes_from_documents(
        [Document(text=_filler(i), doc_id=f"d{i}") for i in range(6)]
    )
    index = index_class(nodes, embed_model=MockEmbedding(embed_dim=8))
    retriever = index.as_retriever(similarity_top_k=2, bm25_weight=1.0)
    question = "What did Quillfeather sign?"
    assert all(
        r.node.metadata["evidence"].get("bm25_rank") is None for r in retriever.retrieve(question)
    )
    index.insert(Document(text="Quillfeather signed the treaty at dawn.", doc_id="new"))
    found = retriever.retrieve(question)
    assert found[0].node.ref_doc_id == "new"
    index.delete_ref_doc("new")
    assert all(r.node.ref_doc_id != "new" for r in retriever.retrieve(question))
