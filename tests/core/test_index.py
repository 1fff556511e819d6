"""The shared index base, through a small kNN-graph index written the way methods write theirs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import Document, MetadataMode, QueryBundle
from support import ScriptedLLM

from llama_index_graphrag_ext.core.embeddings import embed_query, embed_texts, knn_graph
from llama_index_graphrag_ext.core.graph import TypedGraph
from llama_index_graphrag_ext.core.index import GraphIndexBase
from llama_index_graphrag_ext.core.nodes import PassageParser, with_evidence
from llama_index_graphrag_ext.core.persist import IndexFormatError
from llama_index_graphrag_ext.core.vectors import InMemoryVectorTable


class KnnChunkIndex(GraphIndexBase):
    index_kind = "test-knn"

    def _configure(self, k: int = 2) -> None:
        self.k = k
        self._graph = TypedGraph()
        self._vectors = InMemoryVectorTable()

    def config(self):
        return {"k": self.k}

    def _add_chunks(self, nodes):
        texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        self._vectors.add([n.node_id for n in nodes], embed_texts(self.embed_model, texts))
        for n in nodes:
            self._graph.add_node(n.node_id, "chunk")
        self._relink()

    def _remove_chunks(self, node_ids):
        self._vectors.delete(node_ids)
        self._graph.remove_nodes(node_ids)
        self._relink()

    def _relink(self):
        self._graph.remove_edges(kind="knn")
        ids = self._vectors.ids
        idx, sims = knn_graph(self._vectors.matrix, self.k)
        for i, row in enumerate(idx):
            for j, s in zip(row, sims[i], strict=True):
                self._graph.add_edge(ids[i], ids[j], "knn", float(s))

    def _persist_state(self, folder: Path) -> None:
        self._vectors.persist(folder, "chunks")

    def _load_state(self, folder: Path, manifest) -> None:
        self._vectors = InMemoryVectorTable.load(folder, "chunks")

    def as_retriever(self, similarity_top_k: int = 2, **kwargs):
        return _Retriever(self, similarity_top_k)


class _Retriever(BaseRetriever):
    def __init__(self, index, k):
        self._index, self._k = index, k
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle):
        q = embed_query(self._index.embed_model, query_bundle.query_str)
        ids, scores = self._index._vectors.query(q, self._k)
        nodes = self._index.get_chunks(ids)
        return [
            with_evidence(
                n, s, {"method": "knn", "neighbours": self._index.graph.neighbors(n.node_id)}
            )
            for n, s in zip(nodes, scores.tolist(), strict=True)
        ]


DOCS = [
    Document(id_="cats", text="Cats are small domestic felines that purr."),
    Document(id_="dogs", text="Dogs are loyal domestic canines that bark."),
    Document(id_="paris", text="Paris is the capital city of France."),
    Document(id_="rome", text="Rome is the capital city of Italy."),
]


@pytest.fixture
def index(bow_embed):
    return KnnChunkIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()]
    )


def _top(index, query, k=2):
    return [r.node.ref_doc_id for r in index.as_retriever(similarity_top_k=k).retrieve(query)]


def test_build_and_retrieve_with_evidence(index):
    assert len(index) == 4 and set(index.ref_doc_info) == {"cats", "dogs", "paris", "rome"}
    results = index.as_retriever().retrieve("capital city of France")
    assert results[0].node.ref_doc_id == "paris"
    assert results[0].node.metadata["evidence"]["method"] == "knn"
    assert index.graph.num_edges("knn") > 0


def test_empty_and_duplicate_documents_are_counted(bow_embed):
    docs = [*DOCS, Document(id_="blank", text="  "), DOCS[0]]
    index = KnnChunkIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()]
    )
    assert len(index) == 4
    assert index.input_report.as_dict()["empty_skipped"] == 1
    assert index.input_report.as_dict()["duplicates_skipped"] == 1


def test_insert_is_idempotent_and_delete_ref_doc_removes_everything(index):
    index.insert(Document(id_="berlin", text="Berlin is the capital city of Germany."))
    index.insert(Document(id_="berlin", text="Berlin is the capital city of Germany."))
    assert len(index) == 5 and _top(index, "capital of Germany", 1) == ["berlin"]
    index.delete_ref_doc("paris")
    assert len(index) == 4 and "paris" not in _top(index, "capital city of France", 4)
    assert "paris" not in index.ref_doc_info
    assert index.graph.num_nodes("chunk") == 4


def test_persist_and_load_give_identical_retrieval(index, bow_embed, tmp_path):
    index.persist(tmp_path / "idx")
    loaded = KnnChunkIndex.load(tmp_path / "idx", embed_model=bow_embed)
    for q in ("capital city", "domestic animals that bark", "felines"):
        assert _top(loaded, q, 3) == _top(index, q, 3)
    assert loaded.k == 2 and loaded.graph.stats() == index.graph.stats()
    loaded.delete_ref_doc("cats")  # a loaded index stays writable
    assert len(loaded) == 3


def test_failed_persist_keeps_the_previous_copy(index, bow_embed, tmp_path, monkeypatch):
    index.persist(tmp_path / "idx")
    index.insert(Document(id_="oslo", text="Oslo is the capital of Norway."))

    def boom(folder):
        raise OSError("disk full")

    monkeypatch.setattr(index, "_persist_state", boom)
    with pytest.raises(OSError):
        index.persist(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert len(manifest["chunk_ids"]) == 4
    assert len(KnnChunkIndex.load(tmp_path / "idx", embed_model=bow_embed)) == 4


def test_load_refuses_other_kinds_and_versions(index, bow_embed, tmp_path):
    index.persist(tmp_path / "idx")

    class Other(KnnChunkIndex):
        index_kind = "other"

    class Newer(KnnChunkIndex):
        format_version = 3

    with pytest.raises(IndexFormatError, match="not 'other'"):
        Other.load(tmp_path / "idx", embed_model=bow_embed)
    with pytest.raises(IndexFormatError, match="format version 2"):
        Newer.load(tmp_path / "idx", embed_model=bow_embed)


def test_unknown_settings_are_rejected(bow_embed):
    with pytest.raises(TypeError, match="unexpected keyword|unknown settings"):
        KnnChunkIndex.from_documents(DOCS, embed_model=bow_embed, kk=3)


def test_query_engine_uses_the_given_llm(index):
    llm = ScriptedLLM(["Paris."])
    response = index.as_query_engine(llm=llm, similarity_top_k=1).query("capital of France?")
    assert str(response) == "Paris." and llm.call_count == 1
    assert "Paris is the capital city of France." in llm.calls[0]
    assert response.source_nodes[0].node.ref_doc_id == "paris"


def test_vectors_stay_consistent(index):
    assert set(index._vectors.ids) == set(index.chunk_ids())
    assert np.allclose(np.linalg.norm(index._vectors.matrix, axis=1), 1.0, atol=1e-5)


def test_load_index_from_storage_names_the_suite_loader(index, tmp_path):
    """LlamaIndex's generic loader must not read a suite index as a SummaryIndex."""
    from llama_index.core import StorageContext, load_index_from_storage

    index.storage_context.persist(str(tmp_path / "storage"))  # LlamaIndex's own way
    index.persist(tmp_path / "own")  # the suite's way
    for folder in (tmp_path / "storage", tmp_path / "own"):
        storage = StorageContext.from_defaults(persist_dir=str(folder))
        with pytest.raises(IndexFormatError, match=r"KnnChunkIndex\.load\(dir\)"):
            load_index_from_storage(storage)


def test_llm_steps_persist_with_the_index(index, bow_embed, tmp_path):
    from llama_index_graphrag_ext.core.llm import LLMChoice

    index.llm_steps.plan(
        "demo-step", LLMChoice(ScriptedLLM("x"), "settings"), needs="text", stand_in="nothing"
    )
    index.llm_steps.count("demo-step", 3)
    index.llm_steps.fell_back("demo-step", ["HTTP 500"], what="chunk")
    index.persist(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["llm_steps"]["demo-step"]["fallbacks"] == 1
    loaded = KnnChunkIndex.load(tmp_path / "idx", embed_model=bow_embed)
    assert loaded.llm_steps.to_dict() == index.llm_steps.to_dict()
    record = loaded.llm_steps.record("demo-step")
    assert (record.tier, record.source, record.items) == ("full-llm", "settings", 3)


async def test_async_writes_leave_the_loop_free(index):
    """ainsert/adelete run in a worker thread: the caller's loop keeps ticking."""
    import asyncio

    ticks = 0

    async def heartbeat():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    beat = asyncio.create_task(heartbeat())
    await index.ainsert(Document(id_="lyon", text="Lyon lies on the Rhone in France."))
    await index.adelete_ref_doc("lyon")
    beat.cancel()
    assert ticks > 10  # blocking in the loop would leave it two or three
    assert "lyon" not in {n.ref_doc_id for n in index.get_chunks(index.chunk_ids())}
