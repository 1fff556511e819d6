"""Chunk texts kept in LlamaIndex docstore backends other than the default in-memory one.

``GraphIndexBase`` takes any ``storage_context``; these tests build an index on
a docstore that lives on disk, reopen that docstore from disk with fresh
objects (as a later process would), and load the persisted index on it.
"""

from __future__ import annotations

import pytest
from llama_index.core import StorageContext
from llama_index.core.schema import Document
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.storage.kvstore import SimpleKVStore

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.qcg.index import QueryCentricGraphIndex
from llama_index_graphrag_ext.qcg.sentence_nodes import SentenceQueryGenerator

TEXTS = [
    "Ada Lovelace wrote the first program. She worked with Charles Babbage.",
    "Charles Babbage designed the Analytical Engine in London.",
    "London is the capital of England. The Thames flows through London.",
    "Alan Turing studied computation. He worked at Bletchley Park.",
]
DOCS = [Document(text=t, doc_id=f"d{i}") for i, t in enumerate(TEXTS)]


def _build(embed, storage_context):
    return QueryCentricGraphIndex.from_documents(
        DOCS,
        transformations=[PassageParser()],
        embed_model=embed,
        generator=SentenceQueryGenerator(min_chars=5),
        storage_context=storage_context,
    )


def _top(index, question="Who designed the Analytical Engine?"):
    return [r.node.node_id for r in index.as_retriever(similarity_top_k=2).retrieve(question)]


def _snapshot(index):
    """Chunk texts by id and the top-2 for a question, taken while the index's docstore is open."""
    ids = index.chunk_ids()
    return {n.node_id: n.get_content() for n in index.get_chunks(ids)}, _top(index)


def _check_round_trip(seen, reopened_docstore, folder, embed):
    """The reopened docstore holds every chunk's text; the index loads on it and answers alike."""
    texts, top = seen
    ids = list(texts)
    assert sorted(texts.values()) == sorted(TEXTS)
    assert {n.node_id: n.get_content() for n in reopened_docstore.get_nodes(ids)} == texts
    assert all(n.ref_doc_id for n in reopened_docstore.get_nodes(ids))
    loaded = QueryCentricGraphIndex.load(
        folder,
        embed_model=embed,
        storage_context=StorageContext.from_defaults(docstore=reopened_docstore),
    )
    assert loaded.docstore is reopened_docstore
    assert _top(loaded) == top
    assert loaded.ref_doc_info.keys() == {"d0", "d1", "d2", "d3"}
    return loaded


def test_simple_docstore_on_a_kv_store_persisted_to_a_path(bow_embed, tmp_path):
    path = tmp_path / "kv" / "docstore.json"
    docstore = SimpleDocumentStore(simple_kvstore=SimpleKVStore())
    index = _build(bow_embed, StorageContext.from_defaults(docstore=docstore))
    index.persist(tmp_path / "index")
    docstore.persist(str(path))
    reopened = SimpleDocumentStore.from_persist_path(str(path))
    loaded = _check_round_trip(_snapshot(index), reopened, tmp_path / "index", bow_embed)
    # Deletes go through the backend too.
    loaded.delete_ref_doc("d1")
    assert not reopened.document_exists(index.chunk_ids()[1])


def test_load_fills_an_empty_external_docstore_from_the_folder(bow_embed, tmp_path):
    index = _build(bow_embed, None)
    index.persist(tmp_path / "index")
    empty = SimpleDocumentStore()
    loaded = QueryCentricGraphIndex.load(
        tmp_path / "index",
        embed_model=bow_embed,
        storage_context=StorageContext.from_defaults(docstore=empty),
    )
    assert len(empty.docs) == 4 and _top(loaded) == _top(index)


def test_duckdb_docstore_file(bow_embed, tmp_path):
    duckdb_docstore = pytest.importorskip("llama_index.storage.docstore.duckdb")
    duckdb_kv = pytest.importorskip("llama_index.storage.kvstore.duckdb")

    class OfflineDuckDBKVStore(duckdb_kv.DuckDBKVStore):
        """DuckDB's KV store asks DuckDB to *install* its JSON extension, which
        means a download even though the Python wheel has it built in; offline,
        skip the install and only load it."""

        @classmethod
        def _initialize_table(cls, conn, table_name):
            return super()._initialize_table(_NoInstall(conn), table_name)

    def open_docstore():
        kv = OfflineDuckDBKVStore(database_name="chunks.duckdb", persist_dir=str(tmp_path))
        return duckdb_docstore.DuckDBDocumentStore(kv), kv

    docstore, kv = open_docstore()
    index = _build(bow_embed, StorageContext.from_defaults(docstore=docstore))
    index.persist(tmp_path / "index")
    seen = _snapshot(index)
    kv.client.close()  # as if the process ended
    assert (tmp_path / "chunks.duckdb").is_file()
    reopened, kv2 = open_docstore()
    _check_round_trip(seen, reopened, tmp_path / "index", bow_embed)
    kv2.client.close()


class _NoInstall:
    """A DuckDB connection whose ``install_extension`` does nothing (built-in extensions)."""

    def __init__(self, conn) -> None:
        self._conn = conn

    def install_extension(self, *args, **kwargs) -> None:
        return None

    def __getattr__(self, name):
        return getattr(self._conn, name)
