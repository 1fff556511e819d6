"""The LLM-free chunk ranking: reached chunks are never lost, fills are counted."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from llama_index.core import Document

from llama_index_graphrag_ext.core.nodes import EVIDENCE_KEY, PassageParser
from llama_index_graphrag_ext.core.persist import MANIFEST, IndexFormatError
from llama_index_graphrag_ext.fgrag import FGRAGIndex
from llama_index_graphrag_ext.fgrag.expansion import Description, Expansion
from llama_index_graphrag_ext.fgrag.ranking import UnderfilledError, rank_reached

DOCS = [
    Document(id_="curie", text="Marie Curie studied radioactivity in Paris with Pierre Curie."),
    Document(id_="sorbonne", text="Pierre Curie taught physics at the Sorbonne in Paris."),
    Document(id_="nile", text="The Nile flows through Egypt and Sudan into the Mediterranean."),
    Document(id_="amazon", text="The Amazon rainforest covers much of Brazil and Peru."),
]


@pytest.fixture
def index(bow_embed) -> FGRAGIndex:
    return FGRAGIndex.from_documents(DOCS, embed_model=bow_embed, transformations=[PassageParser()])


def _hits(chunk: str, n: int, seed: float = 0.9) -> list[Description]:
    return [
        Description(f"{chunk} text {i}", "entity", f"e{i}", chunk, 0, seed, "weak")
        for i in range(n)
    ]


def test_bm25_fuses_with_the_reached_ranking_and_may_add_a_chunk() -> None:
    exp = Expansion("q", hits=[*_hits("hub1", 9), *_hits("hub2", 8)])
    sims = {"hub1": 0.1, "hub2": 0.2, "named": 0.05}

    def similarity(ids):
        return np.array([sims[c] for c in ids])

    ranked, counts = rank_reached(
        [exp], 2, similarity, None, lexical=["named", "hub2"], bm25_weight=1.0
    )
    # reached: hub2 (0.2 + 0.3 x 8/9), hub1 (0.1 + 0.3); BM25: named, hub2. Fused:
    # hub2 1/3 + 1/4, named 1/3 (BM25 alone), hub1 1/4
    assert [r.chunk_id for r in ranked] == ["hub2", "named"]
    assert ranked[0].bm25_rank == 2 and ranked[1].bm25_rank == 1
    ranked, counts = rank_reached(
        [exp], 3, similarity, None, lexical=["named", "hub2"], bm25_weight=1.0
    )
    assert [r.chunk_id for r in ranked] == ["hub2", "named", "hub1"]
    named = ranked[1]
    assert named.source == "bm25" and named.similarity == pytest.approx(0.05)
    assert counts["lexical"] == 1 and counts["returned_reached"] == 2
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)
    off, _ = rank_reached([exp], 3, similarity, None, lexical=["named"], bm25_weight=0.0)
    assert [r.chunk_id for r in off] == ["hub2", "hub1"]


def test_a_reached_chunk_the_question_matches_is_within_k() -> None:
    # Three hub chunks gathered many descriptions; "gold" one, but it is the
    # chunk nearest the question. Evidence alone ranks it fourth, below k=2.
    exp = Expansion("q", hits=[*_hits("hub1", 9), *_hits("hub2", 8), *_hits("hub3", 7)])
    exp.hits += _hits("gold", 1)
    sims = {"hub1": 0.1, "hub2": 0.2, "hub3": 0.15, "gold": 0.8}

    def similarity(ids):
        return np.array([sims[c] for c in ids])

    evidence, _ = rank_reached([exp], 2, similarity, None, ranking="evidence")
    assert [r.chunk_id for r in evidence] == ["hub1", "hub2"]
    combined, counts = rank_reached([exp], 2, similarity, None, evidence_weight=0.3)
    assert [r.chunk_id for r in combined] == ["gold", "hub2"]  # 0.8 + 0.3/9, 0.2 + 0.3*8/9
    assert counts == {
        "reached": 4,
        "returned_reached": 2,
        "filled": 0,
        "without_vector": 0,
        "lexical": 0,
    }
    assert combined[0].evidence == pytest.approx(1 / 9)
    assert combined[1].evidence == pytest.approx(8 / 9)


def test_fewer_reached_than_k_all_returned_then_filled_and_counted(
    index: FGRAGIndex, caplog
) -> None:
    retriever = index.as_retriever(similarity_top_k=4, top_n=1, strong_top_n=1, fill="similarity")
    exps = retriever.expand("Pierre Curie", ["Pierre Curie"])
    reached = {d.chunk_id for e in exps for d in e.hits}
    assert len(reached) == 2  # the Nile and Amazon chunks share no entity with the Curies
    with caplog.at_level(logging.WARNING):
        results = retriever.rank_chunks(exps, "Pierre Curie")
    ids = [r.node.node_id for r in results]
    assert len(ids) == 4 and reached <= set(ids[: len(reached)])
    sources = [r.node.metadata[EVIDENCE_KEY]["source"] for r in results]
    assert sources == ["expansion"] * len(reached) + ["similarity-fill"] * (4 - len(reached))
    assert retriever.stats["queries"] == 1
    assert retriever.stats["reached_chunks"] == len(reached)
    assert retriever.stats["returned_filled"] == 4 - len(reached)
    assert retriever.stats["queries_filled"] == retriever.stats["queries_under_k"] == 1
    assert "filled by chunk similarity" in caplog.text
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)


def test_fill_none_and_raise(index: FGRAGIndex) -> None:
    exps = index.as_retriever(top_n=1, strong_top_n=1).expand("Nile", ["Nile"])
    reached = {d.chunk_id for e in exps for d in e.hits}
    assert len(reached) == 1
    retriever = index.as_retriever(similarity_top_k=4, fill="none")  # the paper's scope
    none = retriever.rank_chunks(exps, "Nile")
    assert {r.node.node_id for r in none} == reached
    assert retriever.stats["queries_under_k"] == 1 and retriever.stats["returned_filled"] == 0
    with pytest.raises(UnderfilledError):
        index.as_retriever(similarity_top_k=4, fill="raise").rank_chunks(exps, "Nile")
    with pytest.raises(ValueError):
        index.as_retriever(chunk_ranking="cosine")


def test_chunk_vectors_persist_and_follow_deletes(index: FGRAGIndex, bow_embed, tmp_path) -> None:
    assert len(index.chunk_vectors) == 4
    index.persist(tmp_path / "idx")
    loaded = FGRAGIndex.load(tmp_path / "idx", embed_model=bow_embed)
    assert loaded.chunk_vectors.ids == index.chunk_vectors.ids
    assert "chunks_embedded_on_load" not in loaded.build_stats
    loaded.delete_ref_doc("nile")
    assert len(loaded.chunk_vectors) == 3
    got = [n.node.ref_doc_id for n in loaded.as_retriever(similarity_top_k=4).retrieve("Nile")]
    assert "nile" not in got


def test_an_index_of_the_previous_format_is_refused(index: FGRAGIndex, bow_embed, tmp_path) -> None:
    index.persist(tmp_path / "idx")
    manifest = tmp_path / "idx" / MANIFEST
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "format_version": 2}))
    with pytest.raises(IndexFormatError, match="Rebuild the index"):
        FGRAGIndex.load(tmp_path / "idx", embed_model=bow_embed)
