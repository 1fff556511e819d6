"""A chunk longer than the embedder's window gets its best window's cosine where
QCG-RAG uses a chunk's own cosine (``chunk_weight``, ``fill``;
qcg/retriever.py, core/windows.py), and the layer keeps the windows through
inserts, deletes and persistence (qcg/graph.py)."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex, QueryLayer, QueryPair
from tests.long_documents import DOCS, assert_only_the_log_has_windows, evidence_by_document


def _unit(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture(scope="module")
def index(minilm):
    return QueryCentricGraphIndex.from_documents(
        DOCS, embed_model=minilm, transformations=[PassageParser()], config="default"
    )


def _chunk_cosines(index, **kw):
    return evidence_by_document(index.as_retriever(similarity_top_k=4, **kw))


def test_the_layer_keeps_the_long_chunk_s_windows(index):
    assert_only_the_log_has_windows(index, index.layer.chunk_windows, index.layer.chunks.index)


def test_best_window_is_the_long_chunk_s_own_cosine(index):
    best, pooled = _chunk_cosines(index), _chunk_cosines(index, long_chunks="pooled")
    assert set(best) == set(pooled)
    for doc in set(best) - {"log"}:
        assert best[doc]["chunk_cosine"] == pytest.approx(pooled[doc]["chunk_cosine"], abs=1e-4)
    assert best["log"]["chunk_cosine"] > pooled["log"]["chunk_cosine"] + 0.1
    with pytest.raises(ValueError, match="long_chunks"):
        index.as_retriever(long_chunks="mean")


def test_windows_follow_their_chunk_through_inserts_and_deletes():
    # Chunk codes: a (short), b (two windows), c (three windows).
    pairs = [QueryPair(c, 0, c) for c in "abc"]
    matrix = np.stack([_unit(1, 0, 0), _unit(0, 1, 0), _unit(0, 0, 1)])
    wins = {"b": np.stack([_unit(1, 1, 0), _unit(0, 1, 1)]), "c": np.eye(3, dtype=np.float32)}
    whole = QueryLayer.build(pairs, matrix, 1, chunk_vectors={}, chunk_windows=wins)
    step = QueryLayer.build(pairs[:2], matrix[:2], 1, chunk_vectors={}, chunk_windows=wins)
    step = step.added(pairs[2:], matrix[2:], {}, {"c": wins["c"]})
    for layer in (whole, step):
        assert layer.chunk_windows.owner.tolist() == [1, 1, 2, 2, 2]
    # Dropping b renumbers c (code 1 now) and keeps its windows; dropping both leaves none.
    left = whole.without_chunks(["b"])
    assert left.chunks == ("a", "c") and left.chunk_windows.owner.tolist() == [1, 1, 1]
    np.testing.assert_array_equal(left.chunk_windows.matrix, wins["c"])
    assert whole.without_chunks(["b", "c"]).chunk_windows is None


def test_windows_persist(index, minilm, tmp_path):
    index.persist(tmp_path / "qcg")
    loaded = QueryCentricGraphIndex.load(tmp_path / "qcg", embed_model=minilm)
    np.testing.assert_array_equal(loaded.layer.chunk_windows.owner, index.layer.chunk_windows.owner)
    assert _chunk_cosines(loaded) == _chunk_cosines(index)


@pytest.mark.parametrize("spec", [{"sentence_vectors": "late"}, {"sentence_alpha": 0.5}])
def test_every_sentence_vector_path_keeps_the_windows(index, minilm, spec):
    # One-pass ("late") vectors and the Doc2Query-- filter on sentences embed the
    # chunks inside the generator: the windows still reach the layer.
    other = QueryCentricGraphIndex.from_documents(
        DOCS,
        embed_model=minilm,
        transformations=[PassageParser()],
        config="default",
        **spec,
    )
    mine, theirs = other.layer.chunk_windows, index.layer.chunk_windows
    np.testing.assert_array_equal(mine.owner, theirs.owner)
    np.testing.assert_allclose(mine.matrix, theirs.matrix, atol=1e-5)
