"""The per-query fast path of Q-Iter against the straightforward implementation it replaced.

The fast path computes the query's unit scores once and shares them between
Knowledge Anchoring and the depth-1 beam states, groups beam states by anchor
entity, and scores the entity table in cache-sized blocks. It must find the
same anchors and the same paths as the plain version below (a copy of the
code before the change), on a random graph with a hub entity large enough to
take the blocked gather.
"""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.core import search as search_mod
from llama_index_graphrag_ext.core.embeddings import top_k_of_scores
from llama_index_graphrag_ext.core.search import MatrixSearch
from llama_index_graphrag_ext.cue import qiter
from llama_index_graphrag_ext.cue.qiter import anchor_entities, beam_search
from llama_index_graphrag_ext.cue.scoring import EmbeddingScorer
from llama_index_graphrag_ext.cue.view import build_view

# --------------------------------------------------------------- reference


def reference_anchor(view, query_vec, query_entities, top_k):
    """Algorithm 4 as first written: one product per table, no sharing."""
    seen: dict[int, None] = {}
    names = list(query_entities)
    if names:
        sims = np.stack([query_entities[n] for n in names]) @ view.entity_matrix.T
        for row in sims:
            seen.update(dict.fromkeys(int(j) for j in top_k_of_scores(row, top_k)[0]))
    idx, _ = top_k_of_scores(view.unit_matrix @ query_vec, top_k)
    for u in idx.tolist():
        seen.update(dict.fromkeys(int(e) for e in view.unit_entities[u]))
    return list(seen)


def reference_beam(view, query_vec, seeds, scorer, top_k, depth, beam, use_qu):
    """Algorithm 3 lines 5-18 as first written: each state multiplies its own units."""
    units = view.unit_matrix
    states = [(int(v), query_vec, (), None) for v in dict.fromkeys(seeds)]
    kept_by_depth = []
    for _ in range(depth):
        candidates = {}
        for v, phi, path, _ in states:
            linked = view.entity_units[v]
            if path:
                linked = linked[~np.isin(linked, path)]
            if linked.size == 0:
                continue
            idx, _ = top_k_of_scores(units[linked] @ phi, top_k)
            for k in linked[idx].tolist():
                key = tuple(sorted((*path, k)))
                if key not in candidates:
                    candidates[key] = (key, k, v, phi - units[k] if use_qu else phi)
        if not candidates:
            break
        cands = list(candidates.values())
        scores = np.asarray(scorer.score_paths("q", query_vec, view, [c[0] for c in cands]))
        order, _ = top_k_of_scores(scores.astype(np.float64), beam)
        kept = [(cands[i], float(scores[i])) for i in order.tolist()]
        kept_by_depth.append([(c[0], c[1], c[2], s) for c, s in kept])
        next_states = {}
        for (key, k, _, vec), _ in kept:
            for e in view.unit_entities[k].tolist():
                next_states.setdefault((e, key), (e, vec, key, None))
        states = list(next_states.values())
    return kept_by_depth


# ------------------------------------------------------------------ graph


def unit_rows(rng, n, dim):
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def random_view():
    """5,000 units, 300 entities: each unit mentions 1-3 entities, and entity 0
    (a hub, like a nationality) is mentioned by more units than one gather block."""
    rng = np.random.default_rng(7)
    n_units, n_entities, dim = 5000, 300, 24
    edges = set()
    for u in range(n_units):
        for e in rng.choice(np.arange(1, n_entities), size=rng.integers(1, 4), replace=False):
            edges.add((u, int(e)))
    for u in rng.choice(n_units, size=search_mod._BLOCK_ROWS * 3 + 100, replace=False):
        edges.add((int(u), 0))
    return build_view(
        unit_ids=[f"u{i}" for i in range(n_units)],
        unit_texts=[f"unit {i}" for i in range(n_units)],
        unit_matrix=unit_rows(rng, n_units, dim),
        entity_ids=[f"entity:e{j}" for j in range(n_entities)],
        entity_names=[f"E{j}" for j in range(n_entities)],
        entity_matrix=unit_rows(rng, n_entities, dim),
        edges_unit_entity=sorted(edges),
        unit_chunks=[(f"c{i // 4}",) for i in range(n_units)],
        chunk_ids=[f"c{i}" for i in range(n_units // 4)],
        chunk_matrix=unit_rows(rng, n_units // 4, dim),
    )


def queries(view, n, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        q = unit_rows(rng, 1, view.unit_matrix.shape[1])[0]
        picks = rng.choice(len(view.entity_ids), size=rng.integers(0, 4), replace=False)
        # query entities: some known entity vectors (the hub among them), some new ones
        ents = {f"E{j}": view.entity_matrix[j] for j in picks}
        if rng.random() < 0.5:
            ents["E0"] = view.entity_matrix[0]
        if len(picks) and rng.random() < 0.5:  # a second spelling of a known entity
            ents["alias"] = view.entity_matrix[picks[0]].copy()
        if rng.random() < 0.5:
            ents["unknown"] = unit_rows(rng, 1, view.unit_matrix.shape[1])[0]
        yield q, ents


def searches(view):
    return {
        "entity_search": MatrixSearch(view.entity_matrix),
        "unit_search": MatrixSearch(view.unit_matrix),
    }


def fast(view, q, ents, *, top_k=3, depth=3, beam=5, use_qu=True):
    anchoring = anchor_entities(view, q, ents, top_k, **searches(view))
    scores = anchoring.unit_scores
    np.testing.assert_array_equal(scores, view.unit_matrix @ q)
    kept = beam_search(
        view,
        "q",
        q,
        anchoring.seeds,
        EmbeddingScorer(),
        top_k=top_k,
        depth=depth,
        beam=beam,
        use_qu=use_qu,
        unit_scores=scores,
    )
    return anchoring.seeds, [[(c.units, c.unit, c.via, c.score) for c in lvl] for lvl in kept]


def assert_same_paths(got, want):
    assert [[p[:3] for p in lvl] for lvl in got] == [[p[:3] for p in lvl] for lvl in want]
    np.testing.assert_allclose(
        [p[3] for lvl in got for p in lvl], [p[3] for lvl in want for p in lvl], atol=1e-6
    )


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("use_qu", [True, False])
def test_fast_path_finds_the_reference_anchors_and_paths(random_view, use_qu, monkeypatch):
    view = random_view
    hub_expanded = 0
    grouped = []  # products shared by several states of one entity

    def spy(matrix, vectors, rows=None):
        grouped.append(rows is not None and len(vectors) > 1)
        return products(matrix, vectors, rows)

    products = qiter.products
    monkeypatch.setattr(qiter, "products", spy)
    for q, ents in queries(view, 25, seed=1 if use_qu else 2):
        seeds, kept = fast(view, q, ents, use_qu=use_qu)
        assert seeds == reference_anchor(view, q, ents, 3)
        if "alias" in ents:
            spreading = anchor_entities(view, q, ents, 3, **searches(view)).spreading
            assert spreading["alias"] == spreading[next(iter(ents))]
        want = reference_beam(view, q, seeds, EmbeddingScorer(), 3, 3, 5, use_qu)
        assert_same_paths(kept, want)
        hub_expanded += any(p[2] == 0 for lvl in kept[1:] for p in lvl)
    assert hub_expanded  # the hub was expanded past depth 1 (the grouped, blocked product)
    assert any(grouped) == use_qu  # without query updating every state reads the shared scores


def test_fast_path_matches_with_other_beam_settings(random_view):
    view = random_view
    for q, ents in queries(view, 10, seed=3):
        seeds, kept = fast(view, q, ents, top_k=5, depth=4, beam=8)
        want = reference_beam(view, q, seeds, EmbeddingScorer(), 5, 4, 8, True)
        assert_same_paths(kept, want)


def test_beam_search_without_shared_scores_is_the_same(random_view):
    # with an external unit store (or KA off) the retriever passes no unit scores
    view = random_view
    for q, ents in queries(view, 8, seed=4):
        seeds, kept = fast(view, q, ents)
        plain = beam_search(view, "q", q, seeds, EmbeddingScorer())
        assert_same_paths([[(c.units, c.unit, c.via, c.score) for c in lvl] for lvl in plain], kept)


def test_blocked_products_match_plain_products(random_view):
    rng = np.random.default_rng(5)
    table = unit_rows(rng, search_mod._BLOCK_ROWS * 2 + 37, 24)
    vectors = list(unit_rows(rng, 3, 24))
    want = np.stack(vectors) @ table.T
    np.testing.assert_allclose(search_mod.products(table, vectors), want, atol=1e-6)
    np.testing.assert_allclose(search_mod.products(table, vectors[:1]), want[:1], atol=1e-6)
    units = random_view.unit_matrix
    rows = random_view.entity_units[0]  # the hub: several blocks of gathered rows
    assert rows.size > search_mod._BLOCK_ROWS * 3
    np.testing.assert_allclose(
        search_mod.products(units, vectors[:2], rows),
        np.stack(vectors[:2]) @ units[rows].T,
        atol=1e-6,
    )


def test_score_paths_of_one_length_equals_the_per_path_sum(random_view):
    view = random_view
    rng = np.random.default_rng(6)
    q = unit_rows(rng, 1, 24)[0]
    for length in (1, 2, 3):
        paths = [tuple(sorted(rng.choice(5000, length, replace=False).tolist())) for _ in range(9)]
        sums = np.stack([view.unit_matrix[list(p)].sum(axis=0) for p in paths])
        want = (sums / np.linalg.norm(sums, axis=1, keepdims=True)) @ q
        got = EmbeddingScorer().score_paths("q", q, view, paths)
        np.testing.assert_allclose(got, want, atol=1e-6)
    mixed = [(1,), (2, 3), (4, 5, 6)]
    sums = np.stack([view.unit_matrix[list(p)].sum(axis=0) for p in mixed])
    np.testing.assert_allclose(
        EmbeddingScorer().score_paths("q", q, view, mixed),
        (sums / np.linalg.norm(sums, axis=1, keepdims=True)) @ q,
        atol=1e-6,
    )


# ------------------------------------------------------- chunk texts, lazily

DOCS = [
    ("green", "Green\nGreen is an album by Steve Hillage. It was released in 1978."),
    ("hillage", "Steve Hillage\nSteve Hillage is an English guitarist. He was born in Chingford."),
    ("chingford", "Chingford\nChingford is a town in London. It lies near Epping Forest."),
    ("paris", "Paris\nParis is the capital of France. The Seine flows through Paris."),
]


@pytest.fixture
def small_index(bow_embed):
    from llama_index.core.schema import Document

    from llama_index_graphrag_ext.core.nodes import PassageParser
    from llama_index_graphrag_ext.cue import MultiPartiteIndex

    docs = [Document(id_=i, text=t, metadata={"title": t.split("\n")[0]}) for i, t in DOCS]
    return MultiPartiteIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()]
    )


class TextLengthScorer(EmbeddingScorer):
    """Reads the candidates' texts (as a cross-encoder would)."""

    name = "text-length"

    def __init__(self):
        self.seen = []

    def score_chunks(self, query, query_vec, view, chunk_rows, texts):
        self.seen = list(texts)
        return np.array([len(t) for t in texts], dtype=float)


def test_only_returned_chunks_are_fetched_when_the_scorer_ignores_texts(small_index, monkeypatch):
    question = "Where was the guitarist of Green born?"
    retriever = small_index.as_retriever(similarity_top_k=2, fill="none")
    retriever.retrieve(question)  # the first query builds BM25 over the passages, once
    fetched = []
    get_chunks = small_index.get_chunks

    def counting(ids):
        fetched.append(list(ids))
        return get_chunks(ids)

    monkeypatch.setattr(small_index, "get_chunks", counting)
    results = retriever.retrieve(question)
    assert len(results) == 2
    assert fetched == [[r.node.node_id for r in results]]


def test_a_scorer_that_reads_texts_gets_every_candidate_text(small_index):
    scorer = TextLengthScorer()
    question = "Where was the guitarist of Green born?"
    retriever = small_index.as_retriever(
        similarity_top_k=2, fill="none", reranker=scorer, path_weight=0.0, bm25_weight=0.0
    )
    results = retriever.retrieve(question)
    texts = {n.get_content() for n in small_index.get_chunks(small_index.chunk_ids())}
    assert len(scorer.seen) >= 2 and set(scorer.seen) <= texts
    assert [r.score for r in results] == sorted((float(len(t)) for t in scorer.seen), reverse=True)[
        :2
    ]
