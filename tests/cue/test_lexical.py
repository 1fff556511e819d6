"""The exact-word evidence of the LLM-free re-ranker (lexical.py, EmbeddingScorer(lexical_weight))."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.cue.lexical import Lexicon, content_words
from llama_index_graphrag_ext.cue.qiter import beam_search
from llama_index_graphrag_ext.cue.scoring import EmbeddingScorer
from llama_index_graphrag_ext.cue.view import build_view

TEXTS = [
    "Green was performed by Steve Hillage.",  # 0: first hop (names "Green")
    "He was born in Chingford.",  # 1: bridge, only through the title entity
    "Chingford is a town in London.",  # 2
    "The album Green was released in 1978.",  # 3: topical, names no bridge
]


def make_view(unit_matrix=None):
    n = len(TEXTS)
    return build_view(
        unit_ids=[f"u{i}" for i in range(n)],
        unit_texts=TEXTS,
        unit_matrix=unit_matrix if unit_matrix is not None else np.eye(n, dtype=np.float32),
        entity_ids=["entity:steve hillage", "entity:green", "entity:chingford"],
        entity_names=["Steve Hillage", "Green", "Chingford"],
        entity_matrix=np.eye(3, dtype=np.float32),
        # unit 1 reaches "Steve Hillage" through its chunk's title entity
        edges_unit_entity=[(0, 0), (0, 1), (1, 0), (1, 2), (2, 2), (3, 1)],
        unit_chunks=[("c0",), ("c0",), ("c1",), ("c2",)],
        chunk_ids=["c0", "c1", "c2"],
        chunk_matrix=np.eye(3, dtype=np.float32),
    )


def test_content_words_casefold_and_drop_stop_words():
    assert content_words("Where was THE performer of Green born? Green!") == [
        "performer",
        "green",
        "born",
    ]


def test_a_unit_covers_the_names_of_its_entities():
    view = make_view()
    words = Lexicon(view).query("Where was Steve Hillage born?")
    # unit 1 never says "Steve Hillage", but its title entity does
    cover = words.path_coverage([(1,), (2,)])
    assert cover[0] == pytest.approx(1.0)  # "born" in its text, "steve hillage" in its entity
    assert cover[1] == 0.0


def test_a_path_covers_the_union_of_its_units_and_rare_words_weigh_more():
    view = make_view()
    words = Lexicon(view).query("Green London")
    green, london, both = words.path_coverage([(3,), (2,), (2, 3)])
    assert both == pytest.approx(1.0)
    # "green" is in the words of 2 units, "london" in 1: the rarer word weighs more
    assert london > green > 0
    assert green + london == pytest.approx(both)
    # a word no unit has still counts in the denominator
    assert Lexicon(view).query("Green zanzibar").path_coverage([(3,)])[0] < 0.5


def test_lexical_weight_changes_which_paths_survive_the_beam():
    # Unit vectors: unit 3 (topical, names no one) is nearest the query, unit 1 farthest.
    mat = np.array(
        [[0.8, 0.6, 0, 0], [0.5, 0, 0.866, 0], [0, 0, 0, 1], [0.9, 0.436, 0, 0]],
        dtype=np.float32,
    )
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    view = make_view(mat)
    q = np.array([1, 0, 0, 0], dtype=np.float32)
    query = "Where was Steve Hillage born?"
    seeds = [0, 1]  # Steve Hillage, Green
    plain = beam_search(view, query, q, seeds, EmbeddingScorer(), top_k=3, depth=1, beam=1)
    lexical = beam_search(
        view, query, q, seeds, EmbeddingScorer(lexical_weight=1.0), top_k=3, depth=1, beam=1
    )
    assert plain[0][0].units == (3,)  # cosine alone keeps the topical unit
    # unit 1 names all three words ("born", and "Steve Hillage" through its entity)
    assert lexical[0][0].units == (1,)
    assert lexical[0][0].score > float(mat[1] @ q)


def test_lexicon_is_cached_per_view_and_rebuilt_for_a_new_one():
    scorer = EmbeddingScorer(lexical_weight=0.5)
    view = make_view()
    a = scorer.query_words("Green", view)
    assert scorer.query_words("Green", view) is a
    assert scorer.query_words("Chingford", view) is not a
    other = make_view()
    assert scorer.query_words("Green", other) is not a
    with pytest.raises(ValueError):
        EmbeddingScorer(lexical_weight=-1)


def test_chunks_are_scored_by_cosine_alone():
    view = make_view()
    q = np.array([0, 1, 0], dtype=np.float32)
    plain = EmbeddingScorer().score_chunks("Green", q, view, [0, 1, 2], [])
    lexical = EmbeddingScorer(lexical_weight=2.0).score_chunks("Green", q, view, [0, 1, 2], [])
    np.testing.assert_allclose(plain, lexical)
