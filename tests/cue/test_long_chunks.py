"""A chunk longer than the embedder's window is scored by its best window
(cue/scoring.py, core/windows.py): what Q-Iter's paths found in the middle of a
long, many-topic document is not averaged away by its pooled vector."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.cue import MultiPartiteIndex
from tests.long_documents import DOCS, QUESTION, assert_only_the_log_has_windows


@pytest.fixture(scope="module")
def index(minilm):
    return MultiPartiteIndex.from_documents(
        DOCS,
        embed_model=minilm,
        transformations=[PassageParser()],
        unit_vectors="late",
        entity_vectors="late",
    )


def _scores(index, **kw):
    # Q-Iter's own scores: the best window's cosine, without BM25's fused ranks
    results = index.as_retriever(similarity_top_k=4, bm25_weight=0, **kw).retrieve(QUESTION)
    return {r.node.ref_doc_id: r.score for r in results}


def test_the_long_chunk_keeps_its_windows_from_the_one_pass(index, minilm):
    assert_only_the_log_has_windows(index, index.view().chunk_windows, index._chunks.row_of)


def test_best_window_lifts_the_long_chunk_the_paths_reached(index):
    best, pooled = _scores(index), _scores(index, long_chunks="pooled")
    # Pooled, the log ranks below a short passage that only names the town; by its
    # best window, it ranks first.
    assert next(iter(pooled)) == "town" and next(iter(best)) == "log"
    # Short chunks are scored as before; the log gains what its pooled vector lost.
    for doc in set(best) & set(pooled) - {"log"}:
        assert best[doc] == pytest.approx(pooled[doc], abs=1e-6)
    assert best["log"] > pooled["log"] + 0.1
    with pytest.raises(ValueError, match="long_chunks"):
        index.as_retriever(long_chunks="mean")


def test_separate_vectors_embed_the_windows_and_agree_with_the_one_pass(index, minilm):
    separate = MultiPartiteIndex.from_documents(
        DOCS,
        embed_model=minilm,
        transformations=[PassageParser()],
        unit_vectors="separate",
        entity_vectors="separate",
    )
    a, b = index._windows, separate._windows
    assert a.ids == b.ids
    np.testing.assert_allclose(a.matrix, b.matrix, atol=1e-5)


def test_windows_persist_and_leave_with_their_chunk(index, minilm, tmp_path):
    index.persist(tmp_path / "cue")
    loaded = MultiPartiteIndex.load(tmp_path / "cue", embed_model=minilm)
    assert loaded._windows.ids == index._windows.ids
    assert _scores(loaded) == pytest.approx(_scores(index))
    # Deleting the long document drops its windows with it.
    loaded.delete_ref_doc("log")
    assert len(loaded._windows) == 0 and loaded.view().chunk_windows is None
