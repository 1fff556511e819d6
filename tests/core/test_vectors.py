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
