"""A persistent embedding cache: wrap any embedder so each text is embedded once.

Vectors live in an :class:`~.llm.cache.LLMCache` store, keyed by the embedder's name and the text.
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
from .pooling import PooledEmbedding

logger = logging.getLogger(__name__)


def _encode(vector: list[float]) -> str:
    return base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode("ascii")


def _decode(text: str) -> list[float]:
    return np.frombuffer(base64.b64decode(text), dtype=np.float32).tolist()


class CachedEmbedding(BaseEmbedding):
    """An embedder that looks every text up in a persistent cache before embedding it.

    ``cache_path``: the sqlite file (``None`` keeps vectors in memory).
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
        # A pooling wrapper keeps its inner embedder's namespace; pooled texts get
        # their own key kind (see _kinds), never a truncated vector.
        model = inner.inner if isinstance(inner, PooledEmbedding) else inner
        self._namespace = f"embedding:{type(model).__name__}:{model.model_name}"

    @classmethod
    def class_name(cls) -> str:
        return "CachedEmbedding"

    @property
    def hits(self) -> int:
        """Texts served from the cache."""
        return self._cache.hits

    def _key(self, text: str, kind: str) -> str:
        return cache_key(self._namespace, text, {"kind": kind})

    def _kinds(self, texts: list[str]) -> list[str]:
        """Each text's key kind: ``text``, or ``text`` plus the pooling tag when it is pooled."""
        inner = self.inner
        if not isinstance(inner, PooledEmbedding) or not inner.pooling:
            return ["text"] * len(texts)
        tag = f"text:{inner.cache_tag}"
        return [tag if pooled else "text" for pooled in inner.pooled(texts)]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        kinds = self._kinds(texts)
        keys = [self._key(t, kind) for t, kind in zip(texts, kinds, strict=True)]
        found = [self._cache.get(k) for k in keys]
        todo: list[int] = []  # the first position of each text to embed
        seen: set[str] = set()
        for i, value in enumerate(found):
            if value is None and texts[i] not in seen:
                seen.add(texts[i])
                todo.append(i)
        vectors = self.inner.get_text_embedding_batch([texts[i] for i in todo]) if todo else []
        fresh = {texts[i]: vector for i, vector in zip(todo, vectors, strict=True)}
        for i in todo:
            self._cache.put(keys[i], _encode(fresh[texts[i]]))
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
