"""One forward pass gives a text's vector and its spans' vectors (core/late_chunking.py)."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.core.embed_cache import CachedEmbedding
from llama_index_graphrag_ext.core.late_chunking import (
    LateChunkingUnavailable,
    embed_spans,
    sentence_transformer,
)
from llama_index_graphrag_ext.testing import HashEmbedding

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
    assert out.stats == {"texts": 2, "spans": 2, "texts_over_window": 0, "spans_alone": 0}


def test_spans_past_the_window_and_empty_spans_are_embedded_alone(minilm):
    filler = " ".join(f"word{i} filler text." for i in range(200))  # far past 256 pieces
    text = f"Opening sentence about rivers. {filler} Closing sentence about bridges."
    first = _span(text, "Opening sentence about rivers.")
    last = _span(text, "Closing sentence about bridges.")
    out = embed_spans(
        minilm, [text], [[[first], [last], [(0, 0)]]], [["first", "Closing alone", "empty"]]
    )
    assert out.stats["texts_over_window"] == 1 and out.stats["spans_alone"] == 2
    expected = np.asarray(minilm.get_text_embedding_batch(["Closing alone", "empty"]))
    assert np.allclose(out.span_vectors[0][1:], expected, atol=1e-5)
    # The long text's vector comes from the embedder's normal path (pooled windows).
    assert np.allclose(out.text_vectors[0], minilm.get_text_embedding_batch([text])[0], atol=1e-5)


def test_the_model_is_found_through_the_cache_wrapper(minilm, tmp_path):
    cached = CachedEmbedding(minilm, tmp_path / "cache.sqlite")
    assert sentence_transformer(cached) is sentence_transformer(minilm)


def test_an_embedder_without_word_pieces_says_why():
    with pytest.raises(LateChunkingUnavailable, match="sentence-transformers"):
        embed_spans(HashEmbedding(dim=8), ["a b"], [[[(0, 1)]]], [["a"]])


def test_arguments_must_line_up(minilm):
    with pytest.raises(ValueError, match="one entry per text"):
        embed_spans(minilm, ["a", "b"], [[]], [[], []])
