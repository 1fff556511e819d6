"""FG-RAG on LadybugDB: the graph written through the standard upserts, read hop by hop,
the same top-5 as in memory on a musique-100 slice, through persist and reopen.

Skipped when ladybug (or the LlamaIndex Ladybug store) is not installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("ladybug")
pytest.importorskip("llama_index.graph_stores.ladybug")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from graphrag_ext_ladybug import close_store, hop_reader, open_store  # noqa: E402
from graphrag_ext_ladybug.parity import benchmark_slice, format_table, run_parity  # noqa: E402
from llama_index.core.graph_stores.types import EntityNode, Relation  # noqa: E402
from llama_index.core.schema import Document  # noqa: E402
from support import BagOfWordsEmbedding  # noqa: E402

from llama_index_graphrag_ext.core.nodes import PassageParser  # noqa: E402
from llama_index_graphrag_ext.fgrag import CooccurrenceExtractor, FGRAGIndex  # noqa: E402
from llama_index_graphrag_ext.fgrag.stores import StoreNeighbours  # noqa: E402

MUSIQUE = Path(__file__).resolve().parents[3].parent / "shared" / "benchmarks" / "musique-100"

DOCS = [
    Document(text=t, doc_id=f"d{i}")
    for i, t in enumerate(
        [
            "Ada Lovelace wrote the first program. She worked with Charles Babbage in London.",
            "Charles Babbage designed the Analytical Engine in London.",
            "London is the capital of England. The Thames flows through London.",
            "Alan Turing studied computation at Cambridge. He worked at Bletchley Park.",
            "Bletchley Park was the home of British codebreakers during the war.",
        ]
    )
]
QUERIES = ["Who worked with Charles Babbage?", "Where did Alan Turing work?", "London Thames"]


def build(docs=DOCS, **kwargs) -> FGRAGIndex:
    return FGRAGIndex.from_documents(
        docs,
        kg_extractors=[CooccurrenceExtractor()],
        transformations=[PassageParser()],
        embed_model=BagOfWordsEmbedding(),
        **kwargs,
    )


def top(index: FGRAGIndex) -> list[list[str]]:
    retriever = index.as_retriever(similarity_top_k=5)
    return [[n.node.node_id for n in retriever.retrieve(q)] for q in QUERIES]


def test_hop_reader_returns_both_directions_in_the_stored_direction(tmp_path):
    store = open_store(tmp_path / "g.lbug")
    try:
        store.upsert_nodes([EntityNode(name=n, label="PERSON") for n in ("ann", "bob", "cy")])
        store.upsert_relations(
            [
                Relation(label="KNOWS", source_id="ann", target_id="bob"),
                Relation(label="KNOWS", source_id="cy", target_id="ann"),
            ]
        )
        assert sorted(set(hop_reader(store)(["ann"]))) == [
            ("ann", "KNOWS", "bob"),
            ("cy", "KNOWS", "ann"),
        ]
        assert list(hop_reader(store)(["nobody"])) == []
    finally:
        close_store(store)


def test_fgrag_on_ladybug_matches_in_memory_and_survives_reopen(tmp_path):
    memory = build()
    store = open_store(tmp_path / "g.lbug")
    try:
        index = build(property_graph_store=store, hop_reader=hop_reader(store))
        assert isinstance(index.search_path(index.graph_snapshot())[1], StoreNeighbours)
        # The store holds the structure: every entity, no descriptions (its fixed schema).
        stored = store.get(ids=memory.graph_snapshot().names)
        assert len(stored) == memory.stats()["entities"]
        assert "descriptions" not in stored[0].properties
        assert top(index) == top(memory)
        index.persist(tmp_path / "index")
    finally:
        close_store(store)
    store = open_store(tmp_path / "g.lbug")
    try:
        reopened = FGRAGIndex.load(
            tmp_path / "index",
            embed_model=BagOfWordsEmbedding(),
            property_graph_store=store,
            hop_reader=hop_reader(store),
        )
        assert top(reopened) == top(memory)
        only_in_d4 = [e for e in memory.graph_snapshot().names if "british" in e]
        assert only_in_d4 and store.get(ids=only_in_d4)
        reopened.delete_ref_doc("d4")  # emptied entities leave the database too
        assert not store.get(ids=only_in_d4)
        assert top(reopened) == top(build(DOCS[:4]))
    finally:
        close_store(store)


@pytest.mark.skipif(not MUSIQUE.is_dir(), reason="musique-100 not beside the repository")
def test_musique_slice_same_top5_as_in_memory(tmp_path):
    documents, questions = benchmark_slice(MUSIQUE, passages=60, questions=15)
    report = run_parity(documents, questions, tmp_path, top_k=5)
    print(format_table(report))
    assert report["entities"] > 100 and report["relations"] > 100
    assert report["same_top_k"] == report["questions"]
    assert report["same_top_k_after_reopen"] == report["questions"]
