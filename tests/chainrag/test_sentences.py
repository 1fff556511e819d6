"""The columnar sentence table: rows, renumbering, batch building (strings: tests/core/test_arrays)."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.chainrag.sentences import SentenceTable, SentenceTableBuilder

ROWS = [
    ("Marie Curie was born in Warsaw.", "c1", 0, ["marie curie", "warsaw", "marie curie"]),
    ("Elle a déménagé à Paris — en 1891.", "c1", 1, ["paris", "1891"]),
    ("", "c1", 2, []),
    ("Warsaw is the capital of Poland 🇵🇱.", "c2", 0, ["warsaw", "poland"]),
    ("Paris is the capital of France.", "c3", 0, ["paris", "france"]),
]


def _as_rows(table: SentenceTable) -> list[tuple]:
    return [
        (table.text(i), table.chunk_id(i), table.position(i), table.entities(i))
        for i in range(len(table))
    ]


def _expected(rows) -> list[tuple]:
    return [(t, c, p, tuple(dict.fromkeys(e))) for t, c, p, e in rows]


def test_table_rows_keep_text_order_and_distinct_entities():
    table = SentenceTable.from_rows(ROWS)
    assert _as_rows(table) == _expected(ROWS)
    assert table.chunk_ids == ("c1", "c2", "c3")
    assert table.chunk_rows.dtype == np.int32 and table.entity_ids.dtype == np.int32
    # entity numbers follow first appearance over the rows
    assert list(table.entity_names) == [
        "marie curie",
        "warsaw",
        "paris",
        "1891",
        "poland",
        "france",
    ]
    assert table.rows_of_chunks(["c1", "zz"]).tolist() == [True, True, True, False, False]
    assert len(SentenceTable.empty()) == 0


def test_take_renumbers_chunks_and_entities_like_a_fresh_build():
    table = SentenceTable.from_rows(ROWS)
    keep = np.array([3, 4])
    part = table.take(keep)
    fresh = SentenceTable.from_rows([ROWS[i] for i in keep])
    assert _as_rows(part) == _as_rows(fresh)
    assert (
        list(part.entity_names)
        == list(fresh.entity_names)
        == ["warsaw", "poland", "paris", "france"]
    )
    assert part.chunk_ids == fresh.chunk_ids == ("c2", "c3")
    assert part.chunk_rows.tolist() == fresh.chunk_rows.tolist() == [0, 1]
    assert part.entity_ids.tolist() == fresh.entity_ids.tolist()
    assert len(table.take(np.array([], dtype=np.int64))) == 0


@pytest.mark.parametrize("pack_every", [1, 2, 100])
def test_batches_and_a_base_table_give_the_one_batch_table(pack_every):
    whole = SentenceTable.from_rows(ROWS)
    builder = SentenceTableBuilder(SentenceTable.from_rows(ROWS[:2]))
    for k, (text, chunk, pos, ents) in enumerate(ROWS[2:], start=1):
        builder.add(text, chunk, pos, ents)
        if k % pack_every == 0:
            builder.pack()
    table = builder.finish()
    assert _as_rows(table) == _as_rows(whole)
    assert list(table.entity_names) == list(whole.entity_names)
    for name in ("chunk_rows", "positions", "entity_ptr", "entity_ids"):
        assert np.array_equal(getattr(table, name), getattr(whole, name)), name
    assert table.texts.arrays()[0] == whole.texts.arrays()[0]
