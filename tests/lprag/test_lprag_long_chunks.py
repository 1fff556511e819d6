"""A chunk longer than the embedder's window gets its best window's cosine in
LP-RAG's scores (lprag/retriever.py, core/windows.py), where the decoder reads
it and in the fused ranking's cosine term: neither averages away any more what
a long, many-topic document says once."""

from __future__ import annotations

import pytest

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex
from tests.long_documents import DOCS, assert_only_the_log_has_windows, evidence_by_document

SMALL = {"hidden": 32, "epochs": 10, "lr": 0.01, "threads": 1, "k": 2, "M": 2}


@pytest.fixture(scope="module")
def index(minilm):
    return ChunkQueryLinkIndex.from_documents(
        DOCS, embed_model=minilm, transformations=[PassageParser()], config="pseudo",
        **SMALL,
    )  # fmt: skip


def _ranked(index, **kw):
    retriever = index.as_retriever(similarity_top_k=4, cosine_prior="standardized", **kw)
    return evidence_by_document(retriever)


def test_the_long_chunk_keeps_its_windows(index):
    assert_only_the_log_has_windows(index, index._snapshot.windows, index._chunks.row_of)


def test_best_window_cosine_lifts_the_long_chunk(index):
    best, pooled = _ranked(index), _ranked(index, long_chunks="pooled")
    # The short chunks' cosines and logits are unchanged; the log's cosine is its best
    # window's, the highest of all where its pooled vector's was below two short
    # chunks'. Its logit gains the decoder's cosine scale times the difference.
    for doc in set(best) - {"log"}:
        assert best[doc]["cosine"] == pytest.approx(pooled[doc]["cosine"], abs=1e-6)
        assert best[doc]["link_logit"] == pytest.approx(pooled[doc]["link_logit"], abs=1e-5)
    assert max(best, key=lambda d: best[d]["cosine"]) == "log"
    assert best["log"]["cosine"] > pooled["log"]["cosine"] + 0.1
    assert sorted(pooled, key=lambda d: -pooled[d]["cosine"]).index("log") == 2
    gain = index._models[0].cos_scale.item() * (best["log"]["cosine"] - pooled["log"]["cosine"])
    assert best["log"]["link_logit"] - pooled["log"]["link_logit"] == pytest.approx(gain, abs=1e-4)
    assert best["log"]["ranking_score"] > pooled["log"]["ranking_score"] + 1.0
    assert best["log"]["long_chunks"] == "best-window"
    with pytest.raises(ValueError, match="long_chunks"):
        index.as_retriever(long_chunks="mean")


def test_windows_persist_and_leave_with_their_chunk(index, minilm, tmp_path):
    index.persist(tmp_path / "lp")
    loaded = ChunkQueryLinkIndex.load(tmp_path / "lp", embed_model=minilm)
    assert loaded._windows.ids == index._windows.ids
    assert _ranked(loaded) == _ranked(index)
    # Deleting the long document drops its windows with it.
    loaded.delete_ref_doc("log")
    assert len(loaded._windows) == 0 and loaded._snapshot.windows is None
    assert loaded.build_stats["chunk_windows"] == 0


@pytest.fixture(scope="module")
def runs_index(minilm):
    return ChunkQueryLinkIndex.from_documents(
        DOCS, embed_model=minilm, transformations=[PassageParser()], config="pseudo",
        long_chunks="best-sentences", **SMALL,
    )  # fmt: skip


def test_best_sentences_scores_the_long_chunk_by_its_best_run(runs_index, index):
    # The log's windows are now its runs of whole sentences (at most 60 words each),
    # and only the log has them; the index says so, and keeps saying so after a reload.
    assert runs_index.window_unit == "sentences" and index.window_unit == "windows"
    assert_only_the_log_has_windows(
        runs_index, runs_index._snapshot.windows, runs_index._chunks.row_of
    )
    assert len(runs_index._windows) > len(index._windows)
    runs, windows = _ranked(runs_index), _ranked(index)
    # The run that names the lighthouse is closer to the question than any window holding it.
    assert runs["log"]["cosine"] > windows["log"]["cosine"] + 0.05
    assert runs["log"]["long_chunks"] == "best-sentences" and runs["log"]["rank"] == 1
    for doc in set(runs) - {"log"}:  # a short chunk's cosine is its own, as before
        assert runs[doc]["cosine"] == pytest.approx(windows[doc]["cosine"], abs=1e-6)


def test_a_window_unit_the_index_was_not_built_with_is_one_clear_error(runs_index, index):
    with pytest.raises(ValueError, match="holds its long chunks' sentences"):
        runs_index.as_retriever(long_chunks="best-window")
    with pytest.raises(ValueError, match="holds its long chunks' windows"):
        index.as_retriever(long_chunks="best-sentences")
    # The pooled vector is there either way.
    assert _ranked(runs_index, long_chunks="pooled") == _ranked(index, long_chunks="pooled")


def test_runs_persist_and_an_older_index_reads_as_windows(runs_index, minilm, tmp_path):
    runs_index.persist(tmp_path / "runs")
    loaded = ChunkQueryLinkIndex.load(tmp_path / "runs", embed_model=minilm)
    assert loaded.window_unit == "sentences" and _ranked(loaded) == _ranked(runs_index)
    # An index persisted before runs existed has no window_unit: its windows are windows.
    loaded.build_stats.pop("window_unit")
    assert loaded.window_unit == "windows"
