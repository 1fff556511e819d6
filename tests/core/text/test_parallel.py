"""spaCy analyses in worker processes kept across calls (core/text/parallel.py)."""

from __future__ import annotations

import pytest

from llama_index_graphrag_ext.core.text import (
    ParsePool,
    analyze_batch,
    shared_parses,
)
from llama_index_graphrag_ext.core.text.parallel import TASK_TEXTS, available_processes

TEXTS = [
    "Marie Curie was born in Warsaw. She moved to Paris in 1891.",
    "",
    "The Danube flows through Vienna and Budapest.\n\nIt ends in the Black Sea.",
    "Ada Lovelace worked with Charles Babbage in London.",
] * (TASK_TEXTS // 2)  # several tasks per worker


def test_the_pool_gives_the_analyses_of_one_process_in_order(nlp):
    labels = {"PERSON", "GPE"}
    with ParsePool(None, 2) as pool:
        pooled = analyze_batch(TEXTS, nlp, labels=labels, pool=pool)
        # The same workers serve a second call.
        again = analyze_batch(TEXTS[:3], nlp, pool=pool)
    assert pooled == analyze_batch(TEXTS, nlp, labels=labels)
    assert again == analyze_batch(TEXTS[:3], nlp)
    assert [e.text for e in pooled[0].entities] == ["Marie Curie", "Warsaw", "Paris"]
    assert pooled[1].sentences == []


def test_the_pool_fills_the_shared_parse_cache(nlp):
    with ParsePool(None, 2) as pool, shared_parses() as parses:
        first = analyze_batch(TEXTS, nlp, pool=pool)
        second = analyze_batch(TEXTS, nlp, labels={"GPE"})  # no pool: all from the cache
    assert parses.misses == len(set(TEXTS)) and parses.hits == len(TEXTS) * 2 - len(set(TEXTS))
    assert [e.text for e in second[0].entities] == ["Warsaw", "Paris"]
    assert first[0].sentences == second[0].sentences


def test_one_process_is_not_a_pool_and_a_missing_model_fails_before_any_worker():
    with pytest.raises(ValueError, match="at least 2"):
        ParsePool(None, 1)
    with pytest.raises(OSError, match="pip install"):
        ParsePool("no_such_spacy_model_xyz", 2)
    assert 1 <= available_processes() <= 4
    assert available_processes(cap=1) == 1


def test_rule_sentences_skip_the_parser_and_keep_every_entity(nlp):
    from llama_index_graphrag_ext.core.text.spacy import _disabled_components

    text = (
        "Dr. Smith met Marie Curie in Warsaw in 1891. They spoke about radium "
        "for hours; nobody noticed the time"
    )
    model = analyze_batch([text], nlp)[0]
    rule = analyze_batch([text], nlp, sentences="rule")[0]
    # NER runs alone (its own embedding layer), so entities are the model pass's.
    assert rule.entities == model.entities
    assert rule.sentences == [
        "Dr. Smith met Marie Curie in Warsaw in 1891.",
        "They spoke about radium for hours; nobody noticed the time",
    ]
    skipped = _disabled_components(nlp, entities=True, sentences="rule")
    assert "parser" in skipped and "ner" not in skipped
    if "tok2vec" in nlp.pipe_names:  # listened to by the tagger and parser only
        assert "tok2vec" in skipped
    with pytest.raises(ValueError, match="sentences"):
        analyze_batch([text], nlp, sentences="nltk")


def test_rule_and_model_analyses_are_cached_and_pooled_apart(nlp):
    texts = TEXTS[:8]
    with ParsePool(None, 2) as pool, shared_parses() as parses:
        rule = analyze_batch(texts, nlp, pool=pool, sentences="rule")
        model = analyze_batch(texts, nlp, sentences="model")
    assert parses.misses == 2 * len(set(texts))  # one entry per text and mode
    assert rule == analyze_batch(texts, nlp, sentences="rule")
    assert model == analyze_batch(texts, nlp)


def test_submitted_analyses_come_back_in_order_from_lowered_workers(nlp):
    import os

    with ParsePool(None, 2, nice=5) as pool:
        pending = [pool.submit(TEXTS[i::3], {"GPE"}, sentences="rule") for i in range(3)]
        niceness = pool._executor.submit(os.nice, 0).result()
        results = [p.result() for p in reversed(pending)][::-1]
    assert niceness >= os.nice(0) + 5
    for i, got in enumerate(results):
        assert got == analyze_batch(TEXTS[i::3], nlp, labels={"GPE"}, sentences="rule")
