"""The array toolkit: packed string tables (sequence and interner) and CSR building."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from llama_index_graphrag_ext.core.arrays import (
    StringTable,
    csr,
    csr_order,
    first_appearance_codes,
    indptr_of,
    spans,
    take_rows,
)

WORDS = ["", "a", "Zürich", "東京", "🙂 ok", "", "lone \udc80 surrogate"]


def test_string_table_is_a_packed_sequence():
    table = StringTable(WORDS)
    assert len(table) == len(WORDS) and list(table) == WORDS
    assert table[2] == "Zürich" and table[-3] == "🙂 ok" and table[1:4] == WORDS[1:4]
    assert table[::2] == WORDS[::2] and list(table.strings(3)) == WORDS[3:]
    assert list(table.strings(2, 4)) == WORDS[2:4]
    with pytest.raises(IndexError):
        table[len(WORDS)]
    assert table.lengths().tolist() == [len(w.encode("utf-8", "surrogatepass")) for w in WORDS]
    assert table.lengths([2, 0]).tolist() == [len("Zürich".encode()), 0]
    assert list(table.take(np.array([3, 0, 2, 2]))) == ["東京", "", "Zürich", "Zürich"]
    assert list(table.take(np.array([], dtype=np.int64))) == []
    both = StringTable.concat([table, StringTable(), StringTable(["x", "Ω"])])
    assert list(both) == [*WORDS, "x", "Ω"]
    blob, ends = table.arrays()
    assert list(StringTable.from_arrays(blob, ends)) == WORDS
    with pytest.raises(ValueError):
        StringTable.from_arrays(b"abc", np.array([2]))
    assert table.nbytes() >= len(blob)


def test_string_table_interns_and_finds():
    table = StringTable()
    assert table.find("x") == -1 and table.find_many(["x"]).tolist() == [-1]
    assert table.intern("paris") == 0 and table.intern("rome") == 1 and table.intern("paris") == 0
    ids = table.intern_many(["rome", "oslo", "Zürich", "oslo", "paris"])
    assert ids.tolist() == [1, 2, 3, 2, 0] and len(table) == 4
    assert table.find("Zürich") == 3 and "oslo" in table and "nope" not in table
    assert table.find_many(["oslo", "nope", "paris"]).tolist() == [2, -1, 0]
    table.append("rome")  # a plain append keeps repeats; find gives the first
    assert len(table) == 5 and table.find("rome") == 1
    # many single interns go through the pending entries, then get merged
    many = [f"w{i}" for i in range(3000)]
    got = [table.intern(w) for w in many]
    assert got == list(range(5, 3005)) and table.find_many(many).tolist() == got
    table.fit()
    assert table.intern_many(many[::-1]).tolist() == got[::-1]


def test_string_table_reads_while_one_writer_grows_it():
    table = StringTable(["w0"])
    errors = []

    def reader():
        try:
            for _ in range(2000):
                n = len(table)
                assert table[n - 1] == f"w{n - 1}"
                assert table.find(f"w{n // 2}") == n // 2  # lookups while the index grows
        except Exception as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(1, 3000):
        table.intern(f"w{i}")
    for t in threads:
        t.join()
    assert not errors


def test_csr_groups_and_orders_columns():
    indptr, cols = csr(np.array([2, 0, 2, 0]), np.array([5, 7, 1, 3]), 4)
    assert indptr.tolist() == [0, 2, 2, 4, 4] and cols.tolist() == [3, 7, 1, 5]
    assert cols.dtype == np.int32 and indptr.dtype == np.int64
    indptr, cols = csr([1, 0, 1], [9, 4, 2], 2, sort=False, dtype=np.int64)
    assert indptr.tolist() == [0, 1, 3] and cols.tolist() == [4, 9, 2]
    indptr, cols = csr(np.zeros(0), np.zeros(0), 3)
    assert indptr.tolist() == [0, 0, 0, 0] and cols.tolist() == []
    with pytest.raises(ValueError):
        csr([3], [0], 3)
    indptr, order = csr_order([1, 0, 1, 0], 2)
    assert indptr.tolist() == [0, 2, 4] and order.tolist() == [1, 3, 0, 2]
    assert indptr_of([2, 0, 1]).tolist() == [0, 2, 2, 3]
    sub_ptr, sub = take_rows(np.array([0, 2, 2, 5]), np.array([1, 2, 7, 8, 9]), [2, 0, 1])
    assert sub_ptr.tolist() == [0, 3, 5, 5] and sub.tolist() == [7, 8, 9, 1, 2]


def test_spans_gather_and_first_appearance_codes():
    assert spans(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist() == [5, 6, 9, 10, 11]
    assert spans(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == []
    codes, kept = first_appearance_codes(np.array([7, 3, 7, 9, 3]))
    assert codes.tolist() == [0, 1, 0, 2, 1] and kept.tolist() == [7, 3, 9]
    assert kept[codes].tolist() == [7, 3, 7, 9, 3]


def test_string_tables_compare_by_content():
    a, b = StringTable(["x", "yz"]), StringTable(["x"])
    assert a != b and a != ["x", "yz"]
    b.append("yz")
    assert a == b and a == StringTable.concat([StringTable(["x"]), StringTable(["yz"])])
    assert StringTable() == StringTable() and StringTable(["xy"]) != StringTable(["x", "y"])
