"""A small corpus with one long, many-topic document, shared by the long-chunk tests
of every method that scores a long chunk by its best window (core/windows.py)."""

from __future__ import annotations

from llama_index.core.schema import Document

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


def assert_only_the_log_has_windows(index, windows, row_of) -> None:
    """``windows`` (a ``ChunkWindows``) are the log's alone, several, and counted in
    ``index.build_stats``; ``row_of`` maps a chunk id to the row windows are owned by."""
    assert windows is not None and len(windows) > 1
    assert index.build_stats["chunk_windows"] == len(windows)
    log_chunk = index.ref_doc_info["log"].node_ids[0]
    assert set(windows.owner.tolist()) == {row_of(log_chunk)}


def evidence_by_document(retriever) -> dict[str, dict]:
    """Each retrieved node's evidence for :data:`QUESTION`, by document id, best first."""
    found = retriever.retrieve(QUESTION)
    return {r.node.ref_doc_id: r.node.metadata["evidence"] for r in found}


def load_as_before_windows(index_cls, folder, embed_model, caplog):
    """Load the index persisted in ``folder`` after deleting its window table, as an
    index persisted before windows were kept; check it warns and counts them missing."""
    for name in ("chunk_windows.npz", "chunk_windows.ids.json"):
        (folder / name).unlink()
    with caplog.at_level("WARNING"):
        old = index_cls.load(folder, embed_model=embed_model)
    assert "persisted without long chunks' windows" in caplog.text
    assert old.build_stats["chunk_windows_missing"] == len(DOCS)
    return old
