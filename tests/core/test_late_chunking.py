"""One forward pass gives a text's vector and its spans' vectors (core/late_chunking.py)."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.core.embed_cache import CachedEmbedding
from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding
from llama_index_graphrag_ext.core.late_chunking import (
    LateChunkingUnavailable,
    embed_spans,
    sentence_transformer,
)

TEXT = (
    "Marie Curie\nMarie Curie was born in Warsaw in 1867. "
    "She won the Nobel Prize in Chemistry in 1911."
)


def _span(text: str, part: str) -> tuple[int, int]:
    start = text.index(part)
    return start, start + len(part)


def test_the_text_vector_is_the_model_s_own_and_spans_pool_their_word_pieces(minilm):
    born = _span(TEXT, "Marie Curie was born in Warsaw in 1867.")
    prize = _span(TEXT, "She won the Nobel Prize in Chemistry in 1911.")
    title = _span(TEXT, "Marie Curie")
    out = embed_spans(
        minilm,
        [TEXT, "Vienna lies on the Danube."],
        [[[born], [title, prize]], []],
        [["born alone", "prize alone"], []],
    )
    plain = np.asarray(minilm.get_text_embedding_batch([TEXT, "Vienna lies on the Danube."]))
    # The mean of every word piece is the model's mean pooling: the same vector.
    assert np.allclose(out.text_vectors, plain, atol=1e-5)
    assert out.span_vectors[0].shape == (2, 384) and out.span_vectors[1].shape == (0, 384)
    assert np.allclose(np.linalg.norm(out.span_vectors[0], axis=1), 1.0, atol=1e-5)
    # A span vector is its sentence read in context: close to the sentence alone,
    # not the same, and each sentence's own.
    alone = np.asarray(minilm.get_text_embedding_batch([TEXT[born[0] : born[1]]]))[0]
    assert 0.6 < float(out.span_vectors[0][0] @ alone) < 0.999
    question = np.asarray(minilm.get_query_embedding("Who won the chemistry prize in 1911?"))
    assert question @ out.span_vectors[0][1] > question @ out.span_vectors[0][0]
    assert out.window_vectors == [None, None]  # both read whole
    assert out.stats == {
        "texts": 2,
        "spans": 2,
        "texts_windowed": 0,
        "texts_over_window": 0,
        "spans_alone": 0,
    }


LONG = "Opening sentence about rivers. {} Closing sentence about bridges.".format(
    " ".join(f"word{i} filler text." for i in range(200))  # far past 256 pieces
)


def test_a_long_text_is_read_window_by_window_as_the_pooling_wrapper_reads_it(minilm):
    first = _span(LONG, "Opening sentence about rivers.")
    last = _span(LONG, "Closing sentence about bridges.")
    across = (first[0], last[1])  # no window holds the whole text
    out = embed_spans(
        minilm,
        [LONG],
        [[[first], [last], [across], [(0, 0)]]],
        [["first", "Closing alone", "across alone", "empty"]],
    )
    assert out.stats["texts_windowed"] == 1 and out.stats["texts_over_window"] == 0
    # Only the span with no word piece is embedded alone; the closing sentence,
    # far past the first window, is read in the last one.
    assert out.stats["spans_alone"] == 1
    assert np.allclose(out.span_vectors[0][3], minilm.get_text_embedding_batch(["empty"])[0])
    closing = np.asarray(minilm.get_text_embedding_batch([LONG[last[0] : last[1]]]))[0]
    assert 0.6 < float(out.span_vectors[0][1] @ closing) < 0.999
    assert not np.allclose(out.span_vectors[0][1], out.span_vectors[0][2], atol=1e-3)
    # The text vector is the one the pooling wrapper makes from the same windows.
    assert np.allclose(out.text_vectors[0], minilm.get_text_embedding_batch([LONG])[0], atol=1e-5)
    # Each window's vector is kept too: the model's own vector of that window's text.
    windows = [LONG[a:b] for a, b in minilm.window_ranges([LONG])[0]]
    expected = np.asarray(minilm.get_text_embedding_batch(windows))
    assert out.window_vectors[0].shape == (len(windows), 384) and len(windows) > 1
    assert np.allclose(out.window_vectors[0], expected, atol=1e-5)


def test_without_pooling_spans_past_the_window_and_empty_spans_are_embedded_alone(minilm):
    plain = minilm.inner  # the HuggingFaceEmbedding under the pooling wrapper
    first = _span(LONG, "Opening sentence about rivers.")
    last = _span(LONG, "Closing sentence about bridges.")
    out = embed_spans(
        plain, [LONG], [[[first], [last], [(0, 0)]]], [["first", "Closing alone", "empty"]]
    )
    assert out.stats["texts_over_window"] == 1 and out.stats["texts_windowed"] == 0
    assert out.stats["spans_alone"] == 2
    expected = np.asarray(plain.get_text_embedding_batch(["Closing alone", "empty"]))
    assert np.allclose(out.span_vectors[0][1:], expected, atol=1e-5)
    # The text vector is what the model reads of it: the window it truncates to.
    assert np.allclose(out.text_vectors[0], plain.get_text_embedding_batch([LONG])[0], atol=1e-5)


def test_the_model_is_found_through_the_cache_wrapper(minilm, tmp_path):
    cached = CachedEmbedding(minilm, tmp_path / "cache.sqlite")
    assert sentence_transformer(cached) is sentence_transformer(minilm)


def test_an_embedder_without_word_pieces_says_why():
    with pytest.raises(LateChunkingUnavailable, match="sentence-transformers"):
        embed_spans(HashEmbedding(dim=8), ["a b"], [[[(0, 1)]]], [["a"]])


def test_arguments_must_line_up(minilm):
    with pytest.raises(ValueError, match="one entry per text"):
        embed_spans(minilm, ["a", "b"], [[]], [[], []])
