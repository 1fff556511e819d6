"""The suite's indexes on Milvus Lite: same top-5 as in memory, through persist and reload.

Skipped when milvus-lite (or the LlamaIndex Milvus store) is not installed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("milvus_lite")
pytest.importorskip("llama_index.vector_stores.milvus")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from graphrag_ext_milvus import is_lite_uri, milvus_store  # noqa: E402
from graphrag_ext_milvus.parity import methods, run_parity  # noqa: E402
from llama_index.core.schema import Document  # noqa: E402
from support import BagOfWordsEmbedding  # noqa: E402

from llama_index_graphrag_ext.core.embeddings import normalize_rows  # noqa: E402
from llama_index_graphrag_ext.core.nodes import PassageParser  # noqa: E402
from llama_index_graphrag_ext.core.vectors import InMemoryVectorTable, VectorStoreTable  # noqa: E402
from llama_index_graphrag_ext.qcg.index import QueryCentricGraphIndex  # noqa: E402

MUSIQUE = Path(__file__).resolve().parents[3].parent / "shared" / "benchmarks" / "musique-100"


class _Words(BagOfWordsEmbedding):
    """Hashed bag of words: a fast deterministic embedder for the plumbing tests."""


DOCS = [
    Document(text=t, doc_id=f"d{i}")
    for i, t in enumerate(
        [
            "Ada Lovelace wrote the first program. She worked with Charles Babbage.",
            "Charles Babbage designed the Analytical Engine in London.",
            "The Analytical Engine was a mechanical computer. It was never finished.",
            "London is the capital of England. The Thames flows through London.",
            "Alan Turing studied computation. He worked at Bletchley Park.",
            "Bletchley Park was the home of British codebreakers during the war.",
        ]
    )
]


def test_store_helper_and_lite_uri(tmp_path):
    assert is_lite_uri(tmp_path / "x.db") and is_lite_uri("rel/x.db")
    assert not is_lite_uri("http://localhost:19530") and not is_lite_uri("https://a.b/x.db")
    with pytest.raises(ValueError, match="dim"):
        milvus_store(tmp_path / "x.db", dim=0)
    store = milvus_store(tmp_path / "sub" / "x.db", dim=8, collection_name="t", overwrite=True)
    assert Path(store.uri).is_file() or (tmp_path / "sub").is_dir()
    store.client.close()


def test_vector_store_table_on_milvus_matches_memory_and_reattaches(tmp_path):
    ids = [f"id{i}" for i in range(60)]
    m = normalize_rows(np.random.default_rng(1).normal(size=(60, 16)))
    memory = InMemoryVectorTable()
    memory.add(ids, m)
    store = milvus_store(tmp_path / "v.db", dim=16, collection_name="t", overwrite=True)
    table = VectorStoreTable(store, "ns/chunks")
    table.add(ids, m)
    for q in range(0, 60, 9):
        got, scores = table.query(m[q], 5)
        want, want_scores = memory.query(m[q], 5)
        assert got == want and np.allclose(scores, want_scores, atol=1e-5)
    assert table.query(m[3], 3, allowed=["id1", "id2", "id3"])[0][0] == "id3"
    table.delete(["id0"])
    assert "id0" not in table and table.query(m[0], 1)[0] != ["id0"]
    # A second table in the same collection is invisible to the first.
    other = VectorStoreTable(store, "ns/other")
    other.add(["x"], m[5:6])
    assert "x" not in table.query(m[5], 10)[0]
    store.client.close()
    # A new connection (a later process) reuses the rows instead of writing them again.
    again = milvus_store(tmp_path / "v.db", dim=16, collection_name="t")
    table2 = VectorStoreTable(again, "ns/chunks")
    assert table2.attach(ids[1:], m[1:]) is False
    assert table2.query(m[7], 5)[0] == memory.query(m[7], 5, allowed=ids[1:])[0]
    # Stale rows (different vectors under the same ids) are detected and rewritten.
    assert table2.attach(ids[1:], -m[1:]) is True
    assert table2.query(-m[7], 1)[0] == ["id7"]
    table2.clear()
    other2 = VectorStoreTable(again, "ns/other")
    assert table2.query(m[7], 1)[0] == [] and other2.attach(["x"], m[5:6]) is False
    again.client.close()


def test_index_store_follows_inserts_and_deletes_and_namespaces(tmp_path):
    embed = _Words()
    store = milvus_store(tmp_path / "q.db", dim=64, collection_name="shared", overwrite=True)

    def build(namespace, docs):
        return QueryCentricGraphIndex.from_documents(
            docs,
            transformations=[PassageParser()],
            embed_model=embed,
            config="default",
            min_chars=5,
            vector_store=store,
            vector_namespace=namespace,
        )

    a = build("a", DOCS[:4])
    b = build("b", DOCS[4:])  # the same collection, another namespace
    memory = QueryCentricGraphIndex.from_documents(
        DOCS[:4],
        transformations=[PassageParser()],
        embed_model=embed,
        config="default",
        min_chars=5,
    )

    def top(index, q="Who designed the Analytical Engine?"):
        return [r.node.ref_doc_id for r in index.as_retriever(similarity_top_k=3).retrieve(q)]

    assert top(a) == top(memory) and top(a)[0] == "d1"
    assert set(top(b, "Where did Alan Turing work?")) <= {"d4", "d5"}
    assert a._store_tables.describe()["tables"]["queries"] == len(a.layer)
    a.delete_ref_doc("d1")
    memory.delete_ref_doc("d1")
    assert "d1" not in top(a) and top(a) == top(memory)
    assert a._store_tables.describe()["tables"]["queries"] == len(a.layer)
    a.insert(DOCS[1])
    memory.insert(DOCS[1])
    assert top(a) == top(memory) and top(a)[0] == "d1"
    a.persist(tmp_path / "a")
    manifest = (tmp_path / "a" / "manifest.json").read_text()
    recorded = json.loads(manifest)["vector_store"]
    assert recorded["collection_name"] == "shared" and recorded["namespace"] == "a"
    assert recorded["uri"] == str((tmp_path / "q.db").resolve())
    assert recorded["tables"] == {"queries": len(a.layer)} and "token" not in manifest
    store.client.close()


@pytest.fixture(scope="module")
def musique():
    if not MUSIQUE.is_dir():
        pytest.skip(f"benchmark data not found at {MUSIQUE}")
    from llama_index_graphrag_ext.eval.data import load_benchmark

    bench = load_benchmark(MUSIQUE).subset(limit=5, max_passages=50)
    return bench.documents(), [q.question for q in bench.questions]


@pytest.fixture(scope="module")
def minilm():
    from llama_index_graphrag_ext.core.defaults import default_embed_model

    return default_embed_model()


@pytest.mark.parametrize("name", list(methods()))
def test_same_top5_as_memory_through_persist_and_reload(name, musique, minilm, tmp_path):
    documents, questions = musique
    assert 45 <= len(documents) <= 60 and len(questions) == 5
    result = run_parity(methods()[name], documents, questions, minilm, tmp_path, k=5, dim=384)
    assert result.mismatches == []
    assert result.same_topk_built == result.same_topk_reloaded == 5
    if name != "dense":
        assert result.rows_in_store and all(result.rows_in_store.values())
    if name not in ("dense", "lprag:pseudo"):
        # The retriever's first hop really went to Milvus. (The dense baseline is
        # LlamaIndex's own VectorStoreIndex; LP-RAG attaches the query node through
        # ChunkQueryLinkIndex.nearest_chunk_rows, tested below.)
        assert result.store_lookups >= len(questions)


def test_lprag_nearest_chunks_from_milvus_equal_memory(musique, minilm, tmp_path):
    from llama_index_graphrag_ext.core.embeddings import embed_query
    from llama_index_graphrag_ext.lprag.index import ChunkQueryLinkIndex

    documents, questions = musique
    store = milvus_store(tmp_path / "lp.db", dim=384, collection_name="lp", overwrite=True)
    index = ChunkQueryLinkIndex.from_documents(
        documents,
        transformations=[PassageParser()],
        embed_model=minilm,
        config="pseudo",
        epochs=5,
        vector_store=store,
    )
    index.persist(tmp_path / "lp")
    memory = ChunkQueryLinkIndex.load(tmp_path / "lp", embed_model=minilm)
    for q in questions:
        v = embed_query(minilm, q)
        got = index.nearest_chunk_rows(index._snapshot, v, 10)
        want = memory.nearest_chunk_rows(memory._snapshot, v, 10)
        assert got.tolist() == want.tolist()
    store.client.close()
