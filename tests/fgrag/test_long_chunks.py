"""A chunk longer than the embedder's window gets its best window's similarity in
FG-RAG's LLM-free chunk ranking (fgrag/retriever.py, core/windows.py): a long
chunk the expansion reached is not ranked by the average of all it says."""

from __future__ import annotations

import pytest

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.fgrag import FGRAGIndex
from tests.long_documents import DOCS, assert_only_the_log_has_windows, evidence_by_document


@pytest.fixture(scope="module")
def index(minilm):
    return FGRAGIndex.from_documents(DOCS, embed_model=minilm, transformations=[PassageParser()])


def _ranked(index, **kw):
    return evidence_by_document(index.as_retriever(similarity_top_k=4, fill="similarity", **kw))


def test_the_long_chunk_keeps_its_windows(index):
    assert_only_the_log_has_windows(index, index.chunk_windows(), index.chunk_vectors.row_of)
    assert index.stats()["chunk_windows"] == len(index.chunk_windows())


def test_best_window_is_the_long_chunk_s_similarity(index):
    best, pooled = _ranked(index), _ranked(index, long_chunks="pooled")
    assert best["log"]["source"] == "expansion"  # the expansion reached it
    for doc in set(best) & set(pooled) - {"log"}:
        assert best[doc]["similarity"] == pytest.approx(pooled[doc]["similarity"], abs=1e-6)
    assert best["log"]["similarity"] > pooled["log"]["similarity"] + 0.1
    assert list(best).index("log") < list(pooled).index("log")
    with pytest.raises(ValueError, match="long_chunks"):
        index.as_retriever(long_chunks="mean")


def test_windows_persist_and_leave_with_their_chunk(index, minilm, tmp_path):
    index.persist(tmp_path / "fg")
    loaded = FGRAGIndex.load(tmp_path / "fg", embed_model=minilm)
    assert loaded._windows.ids == index._windows.ids
    assert _ranked(loaded) == _ranked(index)
    # Deleting the long document drops its windows with it.
    loaded.delete_ref_doc("log")
    assert len(loaded._windows) == 0 and loaded.chunk_windows() is None
    assert loaded.build_stats["chunk_windows"] == loaded.stats()["chunk_windows"] == 0
