"""Edge construction of the sentence graph on hand-made inputs (paper §3.1)."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.chainrag.key_entities import (
    PAPER_BM25_CUT,
    KeyCut,
    incidence,
    key_entities,
    key_entity_rows,
    key_incidence,
)
from llama_index_graphrag_ext.chainrag.sentence_graph import SentenceGraph, sa_edges, ss_edges
from llama_index_graphrag_ext.chainrag.sentences import SentenceRecord, SentenceTable

#: The authors' code's importance (mean BM25), per-sentence cut, no cap.
BM25 = {"importance": "bm25", "cut": "sentence", "max_df": None, "keep_rarest": False}


def test_alpha_keeps_the_top_share_by_bm25_importance():
    # "a" and "b" recur over the corpus; "c", "d", "e" and the u_i occur once
    lists = [["e", "d", "c", "b", "a"]] + [["a", f"u{i}"] for i in range(6)] + [["b", "w"]] * 3
    keys = key_entities(lists, 0.6, **BM25)
    assert keys[0] == ("b", "a", "e")  # round(0.6 * 5) = 3, most important first, ties by order
    assert key_entities(lists, 0.2, **BM25)[0] == ("b",)
    assert key_entities([["x"]], 0.1, **BM25) == [("x",)]  # at least one is always kept
    with pytest.raises(ValueError):
        key_entities(lists, 0.0)


def test_alpha_cut_counts():
    lists = [["p", "q"], ["p", "q", "r"], ["p"], ["q"]]
    keys = key_entities(lists, 0.6, **BM25)
    assert len(keys[0]) == 1  # floor(1.2 + 0.5) = 1
    assert len(keys[1]) == 2  # floor(1.8 + 0.5) = 2
    assert key_entities([[]], 0.6, **BM25) == [()]


def test_ss_edges_are_the_union_of_top_m_lists():
    # rows 0..3 on a line: 0-1 close, 2-3 close, 1-2 farther
    vecs = np.array([[1, 0], [0.95, 0.31], [0.31, 0.95], [0, 1]], dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows, cols, _ = ss_edges(vecs, 1)
    # top-1: 0->1, 1->0, 2->3, 3->2 : only two undirected edges
    assert set(zip(rows.tolist(), cols.tolist(), strict=True)) == {(0, 1), (2, 3)}
    rows, cols, _ = ss_edges(vecs, 2)
    # top-2 of 1 is {0, 2}: the union adds 1-2 although 2 lists 1 second only
    assert (1, 2) in set(zip(rows.tolist(), cols.tolist(), strict=True))


def test_ss_union_includes_one_sided_lists():
    # 3 is an outlier whose nearest is 2, but 2's top-1 is 1: edge 2-3 kept (either end)
    vecs = np.array([[1, 0, 0], [0.99, 0.14, 0], [0.9, 0.43, 0], [0.3, 0.3, 0.9]], np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows, cols, _ = ss_edges(vecs, 1)
    assert (2, 3) in set(zip(rows.tolist(), cols.tolist(), strict=True))


def test_sa_window_stays_inside_a_chunk():
    groups = np.array([0, 0, 0, 0, 0, 1, 1])
    pos = np.array([0, 1, 2, 3, 4, 0, 1])
    rows, cols, dist = sa_edges(groups, pos, 3)
    pairs = set(zip(rows.tolist(), cols.tolist(), strict=True))
    assert (0, 3) in pairs and (0, 4) not in pairs  # |i - j| <= 3
    assert (4, 5) not in pairs and (5, 6) in pairs  # never across chunks
    assert dist.max() == 3
    rows1, _, _ = sa_edges(groups, pos, 1)
    assert len(rows1) == 5


def _records():
    texts = [
        ("Marie Curie was born in Warsaw.", "c1", ("marie curie", "warsaw")),
        ("She moved to Paris in 1891.", "c1", ("paris", "1891")),
        ("Warsaw is the capital of Poland.", "c2", ("warsaw", "poland")),
        ("Paris is the capital of France.", "c3", ("paris", "france")),
    ]
    pos: dict[str, int] = {}
    out = []
    for text, chunk, ents in texts:
        out.append(SentenceRecord(text, chunk, pos.get(chunk, 0), ents))
        pos[chunk] = pos.get(chunk, 0) + 1
    return out


def test_graph_neighbors_label_edges_and_shared_entities():
    recs = _records()
    vecs = np.eye(4, dtype=np.float32)
    sg = SentenceGraph.build(recs, vecs, m=0, window=3, key_cut=KeyCut(alpha=1.0, **BM25))
    assert sg.num_edges("SS") == 0 and sg.num_edges("SA") == 1
    assert sg.num_edges("EC") == 2  # warsaw (0-2), paris (1-3)
    # The linear-time summary: 6 entities over 8 links; each shared entity makes one pair.
    assert sg.ec_summary() == {
        "key_entities": 6,
        "links": 8,
        "pairs_upper_bound": 2,
        "largest_entity": 2,
    }
    nb = sg.neighbors([0], ("EC", "SA"))
    assert nb == {2: {"EC": [0]}, 1: {"SA": [0]}}
    assert sg.shared_entities(0, 2) == ["warsaw"]
    assert sg.neighbors([0], ("SS",)) == {}
    with pytest.raises(ValueError, match="unknown edge kind"):
        sg.neighbors([0], ("XX",))


def _random_entity_lists(seed: int, n: int = 300, vocab: int = 60) -> list[list[str]]:
    if seed < 0:  # hand-made: equal importance inside one row ("c", "d", "e"), cut between them
        return [["e", "d", "c", "b", "a"]] + [["a", f"u{i}"] for i in range(6)] + [["b", "w"]] * 3
    rng = np.random.default_rng(seed)
    # a skewed vocabulary (frequent and rare entities, many ties), some empty rows
    lists = []
    for _ in range(n):
        size = int(rng.integers(0, 7))
        picks = rng.zipf(1.5, size=size) % vocab
        lists.append(list(dict.fromkeys(f"e{int(p)}" for p in picks)))
    return lists


@pytest.mark.parametrize("cut", [BM25, {}, {"cut": "sentence"}, {"max_df": 5, "cut": "sentence"}])
@pytest.mark.parametrize(
    ("seed", "alpha"), [(-1, 0.6), (-1, 0.5), (0, 0.6), (1, 0.6), (2, 0.3), (3, 1.0)]
)
def test_array_key_entities_match_the_list_version(seed, alpha, cut):
    lists = _random_entity_lists(seed)
    table = SentenceTable.from_rows((f"s{i}", f"c{i // 4}", i % 4, e) for i, e in enumerate(lists))
    spec = KeyCut(alpha=alpha, **cut)
    expected = key_entities(lists, spec)
    key_ptr, key_ids = key_entity_rows(table, spec)
    names = table.entity_names
    got = [
        tuple(names[e] for e in key_ids[key_ptr[i] : key_ptr[i + 1]].tolist())
        for i in range(len(lists))
    ]
    assert got == expected
    # the key matrix is the list-based one, column numbering and dtypes included
    vocab, kmat = incidence(expected)
    columns, mat = key_incidence(key_ptr, key_ids)
    assert [names[e] for e in columns.tolist()] == list(vocab)
    for part in ("data", "indices", "indptr"):
        a, b = getattr(mat, part), getattr(kmat, part)
        assert a.dtype == b.dtype and np.array_equal(a, b), part
    # and so is the graph's view of them
    sg = SentenceGraph.build(table, np.eye(len(lists), 4, dtype=np.float32), key_cut=spec, m=0)
    assert list(sg.key_entities) == expected and sg.entity_vocab == vocab


def test_graph_from_records_equals_graph_from_table():
    recs = _records()
    vecs = np.eye(4, dtype=np.float32)
    a = SentenceGraph.build(recs, vecs, alpha=0.6, m=2, window=3)
    b = SentenceGraph.build(
        SentenceTable.from_rows((r.text, r.chunk_id, r.position, r.entities) for r in recs),
        vecs,
        alpha=0.6,
        m=2,
        window=3,
    )
    assert list(a.records) == list(b.records) == recs
    for name in ("key_matrix", "ss", "sa"):
        assert (getattr(a, name) != getattr(b, name)).nnz == 0, name
    assert a.text(2) == recs[2].text and a.chunk_id(3) == "c3"
    empty = SentenceGraph.build([], np.zeros((0, 0), np.float32))
    assert len(empty) == 0 and list(empty.key_entities) == [] and empty.neighbors([]) == {}


def _hub_corpus() -> list[list[str]]:
    # "usa" is named by 30 of 232 sentences (a hub, like "united states" on 331 of
    # musique-100's 6,598); "salten" links two sentences; u_i, f_i, g_i occur once
    lists = [["usa", "bambi", "salten"], ["salten", "vienna", "usa"], ["vienna", "danube"]]
    lists += [["usa", f"u{i}"] for i in range(27)] + [["bambi", "disney"], ["disney", "usa"]]
    lists += [["bambi"]] + [[f"f{i}", f"g{i}"] for i in range(200)]
    return lists


@pytest.mark.parametrize("cut", ["global", "sentence"])
def test_a_hub_entity_is_never_key_and_the_rarest_survives(cut):
    lists = _hub_corpus()
    keys = key_entities(lists, KeyCut(alpha=0.6, cut=cut, max_df=20))
    assert not any("usa" in k for k in keys)  # on 30 > max_df sentences: a hub
    assert "salten" in keys[0] and "salten" in keys[1]  # each sentence's rarest linking entity
    assert keys[2] == ("danube",) or "vienna" in keys[2]
    # once-only entities link nothing and are not key
    assert not any(k[0] in "ufg" and k != "usa" for row in keys for k in row)
    # the authors' importance (mean BM25) grows with frequency: the hub is key, the bridge cut
    paper = key_entities(lists, PAPER_BM25_CUT)
    assert "usa" in paper[0] and "salten" not in paper[0]


def test_keep_rarest_restores_a_bridge_the_share_cut_drops():
    # a global alpha cut keeps only the rarest entities; row 0's rarest is kept by the rule
    lists = [["a", "b"], ["a", "b"], ["b", "c"], ["c", "d"], ["d", "a"], ["b"], ["b"]]
    without = key_entities(lists, KeyCut(alpha=0.3, max_df=None, keep_rarest=False))
    with_rule = key_entities(lists, KeyCut(alpha=0.3, max_df=None, keep_rarest=True))
    assert all(len(k) >= 1 for k in with_rule)
    assert sum(map(len, with_rule)) > sum(map(len, without))
    with pytest.raises(ValueError):
        KeyCut(importance="tfidf")
    with pytest.raises(ValueError):
        KeyCut(cut="corpus")
