"""Synthetic corpora: the pooled benchmarks, nested sizes, perturbed copies."""

from __future__ import annotations

import pytest

from llama_index_graphrag_ext.eval.data import Passage
from llama_index_graphrag_ext.eval.scale.corpus import (
    load_pool,
    perturb,
    query_set,
    split_sentences_rule,
    synthesize,
)


@pytest.fixture(scope="module")
def pool_and_sets(musique_slice, book_set):
    return load_pool([musique_slice, book_set], max_chars=300)


def test_pool_prefixes_ids_and_cuts_long_texts(pool_and_sets, musique_slice, book_set, book_text):
    pool, sets = pool_and_sets
    ids = [p.id for p in pool]
    assert len(ids) == len(set(ids))
    assert [name for name, _ in sets] == [musique_slice.name, book_set.name]
    pieces = [p for p in pool if p.id.startswith(f"{book_set.name}/book#")]
    assert len(pieces) >= len(book_text) // 300
    assert all(len(p.text) <= 300 and p.title == "Ferry log" for p in pieces)
    # The pieces cover the whole book, in order.
    assert " ".join(p.text for p in pieces).split() == book_text.split()
    # Gold ids carry the same prefix, so they name passages of the pool.
    questions = query_set(sets, 3)
    assert len(questions) == 3 + 1
    gold = {g for q in questions for g in q.gold_ids}
    assert gold and gold <= set(ids)


@pytest.mark.parametrize("size", [1, 25, 200, 1000])
def test_synthesize_exact_size_unique_ids_deterministic(pool_and_sets, size):
    pool, sets = pool_and_sets
    gold = [g for q in query_set(sets, 2) for g in q.gold_ids]
    corpus = synthesize(pool, size, first=gold, seed=3)
    assert len(corpus) == size
    assert len({p.id for p in corpus}) == size
    again = synthesize(pool, size, first=gold, seed=3)
    assert corpus == again
    if size >= len(gold):
        assert [p.id for p in corpus[: len(set(gold))]] == list(dict.fromkeys(gold))


def test_synthesize_is_nested_and_copies_are_perturbed(pool_and_sets):
    pool, _ = pool_and_sets
    small, big = synthesize(pool, 50), synthesize(pool, 3 * len(pool) + 7)
    assert big[:50] == small
    originals = {p.id: p for p in pool}
    copies = big[len(pool) :]
    assert all("~c" in p.id for p in copies)
    assert {p.id.rsplit("~c", 1)[1] for p in copies} == {"1", "2", "3"}
    changed = 0
    for copy in copies:
        source = originals[copy.id.rsplit("~c", 1)[0]]
        assert copy.title == source.title
        # Only words of the source, at most one sentence or one word fewer.
        assert set(copy.text.split()) <= set(source.text.split())
        changed += copy.text != source.text
    assert changed >= 0.9 * len(copies)
    # A different seed gives a different order.
    assert [p.id for p in synthesize(pool, 50, seed=1)] != [p.id for p in small]


def test_perturb_keeps_sentences_intact_when_it_can():
    text = "Alpha one. Beta two. Gamma three. Delta four."
    copy = perturb(Passage("p", "T", text), copy=2, seed=0)
    assert copy.id == "p~c2"
    kept = split_sentences_rule(copy.text)
    assert len(kept) == 3 and set(kept) < set(split_sentences_rule(text))
    short = perturb(Passage("s", "T", "Only one sentence here."), copy=1)
    assert len(short.text.split()) == 3


def test_synthesize_rejects_bad_input():
    with pytest.raises(ValueError, match="positive"):
        synthesize([Passage("a", "", "x")], 0)
    with pytest.raises(ValueError, match="empty"):
        synthesize([], 5)
