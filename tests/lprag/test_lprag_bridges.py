"""Bridges by title mentions and shared rare entities: pairs, edges and bridge pseudo-queries."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.lprag.bridges import (
    bridge_edges,
    bridge_queries,
    entity_links,
    title_mentions,
    union_edges,
)
from llama_index_graphrag_ext.lprag.chunk_graph import mention_pairs

TITLES = ["Song X", "Ann Lee", "Paris", "Paris", "Parisian Life"]
TEXTS = [
    "Song X\nSong X is a ballad recorded by Ann Lee in 1990.",
    "Ann Lee\nAnn Lee is a singer born in Paris.",
    "Paris\nParis is the capital of France.",
    "Paris\nParis hosts the Louvre; Ann Lee lived there.",
    "Parisian Life\nA parisian magazine.",
]


def test_mentions_match_whole_words_and_skip_own_title():
    pairs = title_mentions(TITLES, TEXTS)
    assert (0, 1) in pairs  # Song X names Ann Lee
    assert (1, 2) in pairs and (1, 3) in pairs  # Ann Lee names Paris (both chunks)
    assert (3, 1) in pairs
    # "Parisian" is not "Paris"; chunks of the same page do not link through their title
    assert not any(a == 4 for a, _ in pairs)
    assert (2, 3) not in pairs and (3, 2) not in pairs
    assert not any(a == b for a, b in pairs)


def test_hub_titles_are_skipped():
    titles = ["Hub City"] + [f"Page {i}" for i in range(5)]
    texts = ["Hub City\nA hub."] + [f"Page {i}\nIt mentions Hub City." for i in range(5)]
    assert title_mentions(titles, texts, max_mentions=10) == [(i, 0) for i in range(1, 6)]
    assert title_mentions(titles, texts, max_mentions=4) == []


def test_no_titles_no_pairs_and_length_mismatch_is_an_error():
    assert title_mentions([None, ""], ["a text", "another"]) == []
    with pytest.raises(ValueError, match="same length"):
        title_mentions(["a"], [])


def test_edges_are_undirected_unique_and_cosine_weighted():
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(4, 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    rows, cols, weights = bridge_edges([(0, 1), (1, 0), (3, 2)], matrix)
    assert rows.tolist() == [0, 2] and cols.tolist() == [1, 3]
    assert np.allclose(weights, [matrix[0] @ matrix[1], matrix[2] @ matrix[3]], atol=1e-6)
    knn = (np.array([0, 1]), np.array([1, 2]), np.array([0.9, 0.8], np.float32))
    r, c, w = union_edges(knn, (rows, cols, weights), 4)
    assert sorted(zip(r.tolist(), c.tolist(), strict=True)) == [(0, 1), (1, 2), (2, 3)]
    assert w[(r == 0) & (c == 1)][0] == pytest.approx(0.9)  # the first list's weight wins


def test_bridge_query_is_the_mentioning_sentence_linked_to_both_chunks():
    pairs = [(0, 1)]
    sentences = [["Song X", "Song X is a ballad recorded by Ann Lee in 1990."], [], [], [], []]
    out = bridge_queries(pairs, TITLES, sentences, [0, 2], np.random.default_rng(0), max_words=6)
    assert len(out) == 1
    text, linked = out[0]
    assert linked == [0, 1]
    assert "Ann Lee" in text and len(text.split()) <= 6


def test_entity_links_join_chunks_naming_a_rare_entity_both_ways():
    keys = [["ann lee", "oslo"], ["ann lee"], ["oslo", "rome"], ["rome", "ann lee"], ["tea"]]
    links = entity_links(keys, max_chunks=3)
    pairs = {(a, b) for a, b, _ in links}
    assert pairs == {(0, 1), (1, 0), (0, 3), (3, 0), (1, 3), (3, 1),
                     (0, 2), (2, 0), (2, 3), (3, 2)}  # fmt: skip
    assert not any(4 in p for p in pairs)  # an entity no other chunk names links nothing
    # (0, 2) share only "oslo"; (2, 3) only "rome"; a pair sharing several keeps the rarest.
    named = {(a, b): key for a, b, key in links}
    assert named[(0, 2)] == "oslo" and named[(3, 2)] == "rome"
    # "ann lee" is named by 3 chunks: a hub once the cap is 2, and only it linked 0-1.
    capped = {(a, b) for a, b, _ in entity_links(keys, max_chunks=2)}
    assert (0, 1) not in capped and (0, 2) in capped
    with pytest.raises(ValueError, match="max_chunks"):
        entity_links(keys, max_chunks=1)


def test_entity_link_names_the_shared_entity_in_the_bridge_query():
    keys = [["ann lee"], ["ann lee"]]
    sentences = [["Song X is a ballad recorded by Ann Lee in 1990."], ["Ann Lee sings."]]
    links = entity_links(keys)
    out = bridge_queries(links, [None, None], sentences, [0], np.random.default_rng(0), mask=True)
    assert out == [("Song X is a ballad recorded by in 1990.", [0, 1])]


def test_mention_pairs_by_titles_entities_or_both():
    keys = [["ann lee"], ["ann lee", "paris"], ["paris"], ["paris"], []]
    titles_only = mention_pairs(TITLES, TEXTS, "titles")
    assert [(a, b) for a, b, _ in titles_only] == title_mentions(TITLES, TEXTS)
    assert all(name == TITLES[b] for _, b, name in titles_only)
    both = {(a, b): name for a, b, name in mention_pairs(TITLES, TEXTS, "both", keys)}
    assert both[(0, 1)] == "Ann Lee"  # linked both ways: the title names it
    assert both[(2, 1)] == "paris"  # by the entity only (no text of 2 names "Ann Lee")
    assert set(both) > {(a, b) for a, b, _ in titles_only}
    with pytest.raises(ValueError, match="entity keys"):
        mention_pairs(TITLES, TEXTS, "entities")
    with pytest.raises(ValueError, match="bridge_links"):
        mention_pairs(TITLES, TEXTS, "pages", keys)
