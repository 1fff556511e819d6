"""The flat query table and the offset-kept sentences answer as the objects they replaced."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from llama_index_graphrag_ext.lprag.chunker import new_rule_sentencizer
from llama_index_graphrag_ext.lprag.pseudo_queries import ChunkSentences, chunk_sentences
from llama_index_graphrag_ext.lprag.query_table import (
    ORIGINS,
    QueryTable,
    QueryTableBuilder,
    query_digest,
)

CHUNK_IDS = [f"doc-{i}#0" for i in range(6)]


def random_records(seed: int, n: int = 40) -> list[dict]:
    """Queries as the index used to keep them: one dict per query."""
    rng = np.random.default_rng(seed)
    words = ["Paris", "Seine", "café", "Zürich", "河", "tea", "🙂", "river"]
    out = []
    for _ in range(n):
        chunks = rng.choice(len(CHUNK_IDS), size=int(rng.integers(1, 4)), replace=False)
        text = " ".join(rng.choice(words, size=int(rng.integers(1, 6))))
        chunk_ids = [CHUNK_IDS[c] for c in chunks]
        digest = hashlib.sha1(f"{chunk_ids[0]}|{text}".encode()).hexdigest()[:16]
        origin = ORIGINS[int(rng.integers(0, len(ORIGINS)))]
        out.append({"id": "q:" + digest, "text": text, "chunks": chunk_ids, "origin": origin})
    return out


def table_of(records: list[dict], seed: int = 0) -> QueryTable:
    vectors = np.random.default_rng(seed).normal(size=(len(records), 4)).astype(np.float32)
    return QueryTable.from_records(records, {c: i for i, c in enumerate(CHUNK_IDS)}, vectors)


def test_records_round_trip_with_the_old_ids():
    records = random_records(0)
    table = table_of(records)
    assert len(table) == len(records)
    assert table.records(CHUNK_IDS) == records
    assert [table.text(i) for i in range(len(table))] == [r["text"] for r in records]
    builder = QueryTableBuilder()
    for r in records:
        rows = [CHUNK_IDS.index(c) for c in r["chunks"]]
        builder.add(r["text"], rows, r["origin"], first_chunk_id=r["chunks"][0])
    assert builder.texts() == [r["text"] for r in records]
    rebuilt = builder.build(table.vectors)
    assert rebuilt.records(CHUNK_IDS) == records  # ids made the way the old index made them
    assert query_digest("a", "b") == int(hashlib.sha1(b"a|b").hexdigest()[:16], 16)


def test_links_are_the_query_chunk_pairs_in_order():
    records = random_records(1)
    pos_q, pos_c = table_of(records).links()
    expected = [(q, CHUNK_IDS.index(c)) for q, r in enumerate(records) for c in r["chunks"]]
    assert list(zip(pos_q.tolist(), pos_c.tolist(), strict=True)) == expected


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_removing_chunks_matches_filtering_each_query(seed):
    records = random_records(seed)
    table = table_of(records, seed)
    rng = np.random.default_rng(seed)
    gone = set(rng.choice(CHUNK_IDS, size=3, replace=False).tolist())
    kept_ids = [c for c in CHUNK_IDS if c not in gone]
    new_row = np.array([kept_ids.index(c) if c in kept_ids else -1 for c in CHUNK_IDS])
    after = table.remap_chunks(new_row)
    expected, kept = [], []
    for i, r in enumerate(records):
        chunks = [c for c in r["chunks"] if c not in gone]
        if chunks:
            expected.append({**r, "chunks": chunks})
            kept.append(i)
    assert len(kept) < len(records)  # the case of queries left without links is exercised
    assert after.records(kept_ids) == expected
    np.testing.assert_array_equal(after.vectors, table.vectors[kept])
    assert table.remap_chunks(np.full(len(CHUNK_IDS), -1)).records([]) == []


def test_concat_appends_in_order():
    a, b = random_records(5, 7), random_records(6, 5)
    both = table_of(a).concat(table_of(b, 1))
    assert both.records(CHUNK_IDS) == a + b
    np.testing.assert_array_equal(both.vectors[7:], table_of(b, 1).vectors)
    assert QueryTable.empty().concat(table_of(a)).records(CHUNK_IDS) == a


def test_bad_ids_and_mismatched_vectors_are_rejected():
    records = random_records(7, 3)
    with pytest.raises(ValueError, match="16 hex"):
        table_of([{**records[0], "id": "query-1"}])
    with pytest.raises(ValueError, match="vectors"):
        QueryTable.from_records(records, {c: i for i, c in enumerate(CHUNK_IDS)}, np.zeros((2, 4)))


def test_sentence_offsets_give_the_splitter_sentences():
    texts = {
        3: "Paris is the capital of France. It lies on the Seine!  Is it big?",
        7: "  leading space. Then a second paragraph follows.\n\nNew paragraph here. Yes.",
        8: "no final stop and no capital",
        9: "   ",
        11: "Dr. Smith went to Washington. He met Mr. Jones. Café au lait? Oui.",
    }
    nlp = new_rule_sentencizer()
    sentences = ChunkSentences(texts, nlp, block=2)
    reference = dict(zip(texts, chunk_sentences(list(texts.values()), nlp), strict=True))
    for row in texts:
        assert sentences[row] == reference[row]
    assert sentences[9] == [] and sentences[4] == [] and sentences[99] == []
