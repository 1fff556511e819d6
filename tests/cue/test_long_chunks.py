"""A chunk longer than the embedder's window is scored by its best window
(cue/scoring.py, core/windows.py): what Q-Iter's paths found in the middle of a
long, many-topic document is not averaged away by its pooled vector."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.cue import MultiPartiteIndex

TOPICS = [
    "The quarterly budget review approved a new office lease in Linz.",
    "Lunch orders moved to the noodle bar on Wednesdays.",
    "Printer toner on the third floor ran out again.",
    "The parking garage closes early on Fridays for cleaning.",
    "Payroll switched to a new provider in March.",
    "The staff choir rehearses on Tuesday evenings.",
]
# A meeting log: many topics, and once, far past the first window, the lighthouse.
LOG = " ".join(
    [*TOPICS * 4, "Mira Holt repaired the lamp of the Velden lighthouse in 1998.", *TOPICS * 2]
)
DOCS = [
    Document(id_="log", text=LOG),
    Document(id_="town", text="Velden is a lake town in Carinthia, Austria."),
    Document(id_="coast", text="Lighthouses along the Adriatic coast were automated in 1990."),
    Document(id_="bakery", text="The Linz bakery sells rye bread and cinnamon buns."),
]
QUESTION = "Who repaired the lamp of the Velden lighthouse?"


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
    results = index.as_retriever(top_n=4, **kw).retrieve(QUESTION)
    return {r.node.ref_doc_id: r.score for r in results}


def test_the_long_chunk_keeps_its_windows_from_the_one_pass(index, minilm):
    windows = index.view().chunk_windows
    assert windows is not None and len(windows) > 1
    assert index.build_stats["chunk_windows"] == len(windows)
    log_chunk = index.ref_doc_info["log"].node_ids[0]
    assert set(windows.owner.tolist()) == {index._chunks.row_of(log_chunk)}


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
        DOCS, embed_model=minilm, transformations=[PassageParser()]
    )
    a, b = index._windows, separate._windows
    assert a.ids == b.ids
    np.testing.assert_allclose(a.matrix, b.matrix, atol=1e-5)


def test_windows_persist_leave_with_their_chunk_and_may_be_absent(index, minilm, tmp_path, caplog):
    index.persist(tmp_path / "cue")
    loaded = MultiPartiteIndex.load(tmp_path / "cue", embed_model=minilm)
    assert loaded._windows.ids == index._windows.ids
    assert _scores(loaded) == pytest.approx(_scores(index))
    # An index persisted before windows were kept loads, and scores long chunks pooled.
    for name in ("chunk_windows.npz", "chunk_windows.ids.json"):
        (tmp_path / "cue" / name).unlink()
    with caplog.at_level("WARNING"):
        old = MultiPartiteIndex.load(tmp_path / "cue", embed_model=minilm)
    assert "persisted without long chunks' windows" in caplog.text
    assert old.build_stats["chunk_windows_missing"] == len(DOCS)
    assert old.view().chunk_windows is None
    assert _scores(old) == pytest.approx(_scores(index, long_chunks="pooled"))
    # Deleting the long document drops its windows with it.
    loaded.delete_ref_doc("log")
    assert len(loaded._windows) == 0 and loaded.view().chunk_windows is None
