"""A persistent embedding cache: wrap any embedder so each text is embedded once.

Useful when several indexes are built over one corpus (their chunk texts are
embedded once, see the composition docs) and while iterating on a method.
Vectors are stored in the same sqlite store as LLM responses
(:class:`~.cache.LLMCache`), keyed by the embedder's name and the text.
"""

from __future__ import annotations

import base64
import logging
import os
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import ConfigDict, Field, PrivateAttr

from .llm.cache import LLMCache, cache_key

logger = logging.getLogger(__name__)


def _encode(vector: list[float]) -> str:
    return base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode("ascii")


def _decode(text: str) -> list[float]:
    return np.frombuffer(base64.b64decode(text), dtype=np.float32).tolist()


class CachedEmbedding(BaseEmbedding):
    """An embedder that looks every text up in a persistent cache before embedding it.

    Args:
        inner: The embedder doing the work.
        cache_path: sqlite file for the vectors (``None`` keeps them in memory).

    Query embeddings are cached too unless ``cache_queries=False``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    inner: BaseEmbedding = Field(description="The embedder doing the work.")
    cache_queries: bool = Field(default=True, description="Also cache query embeddings.")
    _cache: LLMCache = PrivateAttr()
    _namespace: str = PrivateAttr()

    def __init__(
        self, inner: BaseEmbedding, cache_path: str | os.PathLike | None = None, **kw: Any
    ):
        kw.setdefault("embed_batch_size", inner.embed_batch_size)
        kw.setdefault("model_name", f"cached:{inner.model_name}")
        super().__init__(inner=inner, **kw)
        self._cache = LLMCache(cache_path)
        self._namespace = f"embedding:{type(inner).__name__}:{inner.model_name}"

    @classmethod
    def class_name(cls) -> str:
        return "CachedEmbedding"

    @property
    def hits(self) -> int:
        """Texts served from the cache."""
        return self._cache.hits

    def _key(self, text: str, kind: str) -> str:
        return cache_key(self._namespace, text, {"kind": kind})

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        keys = [self._key(t, "text") for t in texts]
        found = [self._cache.get(k) for k in keys]
        todo = list(dict.fromkeys(texts[i] for i, v in enumerate(found) if v is None))
        fresh = dict(
            zip(todo, self.inner.get_text_embedding_batch(todo) if todo else [], strict=True)
        )
        for text, vector in fresh.items():
            self._cache.put(self._key(text, "text"), _encode(vector))
        return [
            list(fresh[text]) if value is None else _decode(value)
            for text, value in zip(texts, found, strict=True)
        ]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embedding(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        if not self.cache_queries:
            return self.inner.get_query_embedding(query)
        key = self._key(query, "query")
        value = self._cache.get(key)
        if value is not None:
            return _decode(value)
        vector = self.inner.get_query_embedding(query)
        self._cache.put(key, _encode(vector))
        return list(vector)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)
