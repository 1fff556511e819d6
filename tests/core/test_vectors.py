import threading

import numpy as np
import pytest

from llama_index_graphrag_ext.core.embeddings import normalize_rows
from llama_index_graphrag_ext.core.vectors import InMemoryVectorTable, VectorStoreTable


def _data(n=40, d=8, seed=0):
    m = normalize_rows(np.random.default_rng(seed).normal(size=(n, d)))
    return [f"id{i}" for i in range(n)], m


def test_in_memory_add_query_delete_replace():
    ids, m = _data()
    table = InMemoryVectorTable()
    table.add(ids, m)
    got, scores = table.query(m[5], 3)
    assert got[0] == "id5" and scores[0] == pytest.approx(1.0, abs=1e-5)
    table.delete(["id5", "nope"])
    assert "id5" not in table and len(table) == 39
    assert table.query(m[5], 1)[0][0] != "id5"
    table.add(["id6"], -m[6:7])  # replace in place
    assert len(table) == 39 and table.query(m[6], 39)[0][-1] == "id6"
    assert table.query(m[6], 3, allowed=["id1", "id2"])[0] == sorted(
        ["id1", "id2"], key=lambda i: -float(m[int(i[2:])] @ m[6])
    )
    with pytest.raises(ValueError, match="duplicate"):
        table.add(["a", "a"], m[:2])
    with pytest.raises(ValueError, match="dimension"):
        table.add(["b"], np.ones((1, 3)))


def test_in_memory_persist_round_trip(tmp_path):
    ids, m = _data()
    table = InMemoryVectorTable()
    table.add(ids, m)
    table.persist(tmp_path, "chunks")
    back = InMemoryVectorTable.load(tmp_path, "chunks")
    assert back.ids == ids and np.array_equal(back.matrix, table.matrix)
    assert back.query(m[3], 5)[0] == table.query(m[3], 5)[0]


def test_in_memory_reads_are_safe_during_writes():
    ids, m = _data(200)
    table = InMemoryVectorTable()
    table.add(ids[:100], m[:100])
    errors = []

    def reader():
        try:
            for _ in range(200):
                got, _ = table.query(m[0], 5)
                assert got[0] == "id0"
        except Exception as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(100, 200):
        table.add([ids[i]], m[i : i + 1])
    for t in threads:
        t.join()
    assert not errors and len(table) == 200


def test_vector_store_table_matches_in_memory():
    from llama_index.core.vector_stores import SimpleVectorStore

    ids, m = _data()
    memory = InMemoryVectorTable()
    memory.add(ids, m)
    store = VectorStoreTable(SimpleVectorStore(), "chunks")
    store.add(ids, m)
    for q in range(0, 40, 7):
        assert store.query(m[q], 5)[0] == memory.query(m[q], 5)[0]
    store.delete(["id0"])
    assert "id0" not in store and store.query(m[0], 1)[0] != ["id0"]


def test_row_search_rescores_exactly_and_drops_unknown_ids():
    from llama_index.core.vector_stores import SimpleVectorStore

    from llama_index_graphrag_ext.core.embeddings import top_k
    from llama_index_graphrag_ext.core.vectors import RowSearch

    ids, m = _data(50, 12, seed=3)
    table = VectorStoreTable(SimpleVectorStore(), "ns/t")
    table.add(ids + ["ghost"], np.vstack([m, m[:1]]))  # a row the snapshot does not know
    search = RowSearch(table, ids, m)
    for q in range(0, 50, 6):
        rows, scores = search(m[q], 5)
        want_rows, want_scores = top_k(m, m[q], 5)
        assert rows.tolist() == want_rows.tolist()
        assert np.allclose(scores, want_scores, atol=1e-6)
    assert search(m[0], 0)[0].tolist() == []
    assert len(search(m[0], 80)[0]) == 50  # never more rows than the snapshot has


def test_store_tables_sync_attach_and_describe():
    from llama_index.core.vector_stores import SimpleVectorStore

    from llama_index_graphrag_ext.core.vectors import StoreTables, store_identity

    ids, m = _data(30, 8, seed=4)
    store = SimpleVectorStore()
    tables = StoreTables(store, "qcg")
    tables.sync("queries", ids[:20], m[:20])
    tables.sync("queries", ids[5:30], m[5:30])  # 5 rows gone, 10 new
    table = tables.table("queries")
    assert table.ids == set(ids[5:30]) and table.name == "qcg/queries"
    assert table.query(m[2], 1)[0] != ["id2"] and table.query(m[25], 1)[0] == ["id25"]
    described = tables.describe()
    assert described["namespace"] == "qcg" and described["tables"] == {"queries": 25}
    assert described["class"].endswith("SimpleVectorStore")
    # A later session on the same store reuses the rows; a stale table is rewritten.
    again = StoreTables(store, "qcg")
    assert again.attach("queries", ids[5:30], m[5:30]) is False
    assert again.attach("queries", ids[5:30], -m[5:30]) is True
    assert again.table("queries").query(-m[9], 1)[0] == ["id9"]

    class Remote:
        uri = "https://user:secret@milvus.example.org:19530"
        collection_name = "c"
        token = "user:secret"

    identity = store_identity(Remote())
    assert identity["uri"] == "https://milvus.example.org:19530"
    assert "secret" not in str(identity)


def test_graph_index_searches_a_vector_store_with_memory_results(bow_embed, tmp_path):
    from llama_index.core.schema import Document
    from llama_index.core.vector_stores import SimpleVectorStore

    from llama_index_graphrag_ext.core.nodes import PassageParser
    from llama_index_graphrag_ext.qcg.index import QueryCentricGraphIndex
    from llama_index_graphrag_ext.qcg.sentence_nodes import SentenceQueryGenerator

    docs = [
        Document(text=t, doc_id=f"d{i}")
        for i, t in enumerate(
            [
                "Ada Lovelace wrote the first program. She worked with Charles Babbage.",
                "Charles Babbage designed the Analytical Engine in London.",
                "London is the capital of England. The Thames flows through London.",
                "Alan Turing studied computation. He worked at Bletchley Park.",
            ]
        )
    ]

    def build(**kw):
        return QueryCentricGraphIndex.from_documents(
            docs,
            transformations=[PassageParser()],
            embed_model=bow_embed,
            generator=SentenceQueryGenerator(min_chars=5),
            **kw,
        )

    store = SimpleVectorStore()
    with_store, memory = build(vector_store=store), build()
    assert with_store.vector_store is store and memory.vector_store is None

    def top(index, q):
        return [r.node.node_id for r in index.as_retriever(similarity_top_k=3).retrieve(q)]

    questions = ["Who designed the Analytical Engine?", "Where did Turing work?", "the Thames"]
    assert [top(with_store, q) for q in questions] == [top(memory, q) for q in questions]
    with_store.delete_ref_doc("d1")
    assert len(with_store._store_tables.table("queries")) == len(with_store.layer)
    with_store.persist(tmp_path / "i")
    loaded = QueryCentricGraphIndex.load(tmp_path / "i", embed_model=bow_embed, vector_store=store)
    assert loaded.vector_store is store
    assert [top(loaded, q) for q in questions] == [top(with_store, q) for q in questions]


def test_matrix_search_and_row_search_answer_alike():
    from llama_index.core.vector_stores import SimpleVectorStore

    from llama_index_graphrag_ext.core.embeddings import top_k
    from llama_index_graphrag_ext.core.vectors import MatrixSearch, RowSearch, RowSearcher

    ids, m = _data(60, 10, seed=5)
    table = VectorStoreTable(SimpleVectorStore(), "ns/t")
    table.add(ids, m)
    memory, store = MatrixSearch(m), RowSearch(table, ids, m)
    assert isinstance(memory, RowSearcher) and isinstance(store, RowSearcher)
    for q in range(0, 60, 9):
        a, b = memory.search(m[q], 6), store.search(m[q], 6)
        assert a.rows.tolist() == b.rows.tolist() == top_k(m, m[q], 6)[0].tolist()
        assert np.allclose(a.scores, b.scores, atol=1e-6)
        # the query's cosines with any rows: the whole product in memory, lazily from the store
        some = np.array([3, 0, 59])
        assert np.allclose(a.cosines[some], b.cosines[some], atol=1e-6)
        assert np.array_equal(a.cosines, m @ m[q])
    both = [m[1], m[2], m[1].copy()]
    many = memory.search_many(both, 3)
    assert [h.rows.tolist() for h in many] == [memory.search(v, 3).rows.tolist() for v in both]
    assert many[0] is many[2]  # equal vectors share one scan
    assert [h.rows.tolist() for h in store.search_many(both, 3)] == [h.rows.tolist() for h in many]
    rows, scores = memory(m[4], 2)  # the (rows, scores) shorthand
    assert rows.tolist()[0] == 4 and scores.shape == (2,)
    assert memory.search(m[0], 0).rows.tolist() == [] and len(memory.search(m[0], 99).rows) == 60
    empty = MatrixSearch(np.zeros((0, 0), np.float32))
    assert empty.search(m[0], 3).rows.tolist() == []
    assert RowSearch(table, ids).search(m[0], 2).rows.tolist() == [
        0,
        memory.search(m[0], 2).rows[1],
    ]


def test_index_searcher_is_in_memory_without_a_store(bow_embed):
    from llama_index.core.schema import Document

    from llama_index_graphrag_ext.core.nodes import PassageParser
    from llama_index_graphrag_ext.core.vectors import MatrixSearch, RowSearch
    from llama_index_graphrag_ext.qcg.index import QueryCentricGraphIndex

    docs = [Document(text="Ada Lovelace wrote the first program.", doc_id="d0")]
    index = QueryCentricGraphIndex.from_documents(
        docs, transformations=[PassageParser()], embed_model=bow_embed, config="default"
    )
    layer = index.layer
    assert isinstance(index.searcher("queries", layer, layer.ids, layer.matrix), MatrixSearch)
    from llama_index.core.vector_stores import SimpleVectorStore

    stored = QueryCentricGraphIndex.from_documents(
        docs,
        transformations=[PassageParser()],
        embed_model=bow_embed,
        config="default",
        vector_store=SimpleVectorStore(),
    )
    layer = stored.layer
    assert isinstance(stored.searcher("queries", layer, layer.ids, layer.matrix), RowSearch)
