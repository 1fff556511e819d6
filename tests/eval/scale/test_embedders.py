"""The run's embedders: the named one, and the meter's bounded sample of texts."""

from __future__ import annotations

from llama_index_graphrag_ext.core.defaults import make_embedder
from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding
from llama_index_graphrag_ext.eval.scale.embedders import MeteredEmbedding


def test_specs_name_the_embedder():
    embed = make_embedder("hash:384")
    assert isinstance(embed, HashEmbedding) and embed.dim == 384
    assert make_embedder("hash").dim == 384 and make_embedder("hash:64").dim == 64
    assert len(make_embedder("mock:8").get_text_embedding("x")) == 8


def test_metered_embedding_keeps_a_bounded_even_sample_of_texts():
    metered = MeteredEmbedding(make_embedder("hash:384"), keep_texts=True)
    texts = [f"passage {i} über the river" for i in range(1000)]
    for start in range(0, 1000, 37):  # batches of odd sizes, as builds send them
        metered.get_text_embedding_batch(texts[start : start + 37])
    seen = metered.seen
    assert metered.texts == 1000
    # Every 8th text: the smallest power-of-two stride that keeps at most 128.
    assert seen == texts[::8] and len(seen) == 125
    metered.reset()
    assert metered.texts == 0 and metered.seen == []
    off = MeteredEmbedding(make_embedder("hash:384"))
    off.get_text_embedding_batch(texts[:10])
    assert off.seen == []
