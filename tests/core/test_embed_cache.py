import numpy as np

from llama_index_graphrag_ext.core.embed_cache import CachedEmbedding


def test_each_text_is_embedded_once_and_survives_reopen(bow_embed, tmp_path, monkeypatch):
    calls = []
    original = type(bow_embed)._get_text_embeddings

    def counting(self, texts):
        calls.append(list(texts))
        return original(self, texts)

    monkeypatch.setattr(type(bow_embed), "_get_text_embeddings", counting)
    cached = CachedEmbedding(bow_embed, tmp_path / "emb.sqlite")
    first = cached.get_text_embedding_batch(["a b", "c d", "a b"])
    assert sum(len(c) for c in calls) == 2  # the repeated text is embedded once
    calls.clear()
    again = CachedEmbedding(bow_embed, tmp_path / "emb.sqlite").get_text_embedding_batch(
        ["c d", "a b"]
    )
    assert calls == []
    assert np.allclose(again[0], first[1], atol=1e-6) and np.allclose(again[1], first[0], atol=1e-6)
    assert np.allclose(cached.get_query_embedding("a b"), bow_embed.get_query_embedding("a b"))
