"""The suite's hashed embedder: near-free vectors of any dimension that count their input."""

from __future__ import annotations

import re
import threading
import zlib
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import Field, PrivateAttr

_WORD = re.compile(r"\w+")


class HashEmbedding(BaseEmbedding):
    """Signed hashed bag-of-words vectors: a near-free stand-in embedder of any dimension.

    Each lower-cased word adds +1 or -1 (bit 31 of its crc32) to the slot
    ``crc32 % dim``, then the sum is normalised; stable across processes. Texts
    sharing words get similar vectors, so graphs behave with the same shapes and
    costs as on real embeddings. Used by ``graphrag-ext scale --embed-model
    hash:384`` and by tests, whose counters check how often texts are embedded.
    """

    dim: int = Field(default=384, gt=0, description="Vector dimension.")
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _texts: int = PrivateAttr(default=0)
    _chars: int = PrivateAttr(default=0)
    _longest: int = PrivateAttr(default=0)

    @classmethod
    def class_name(cls) -> str:
        return "HashEmbedding"

    @property
    def embedded_texts(self) -> int:
        """Texts (and queries) embedded so far."""
        return self._texts

    @property
    def embedded_chars(self) -> int:
        """Characters embedded so far."""
        return self._chars

    @property
    def longest_text(self) -> int:
        """Characters of the longest text embedded so far."""
        return self._longest

    def _vector(self, text: str) -> list[float]:
        with self._lock:
            self._texts += 1
            self._chars += len(text)
            self._longest = max(self._longest, len(text))
        # No per-word cache: it would count as the index's memory in growth curves.
        dim = self.dim  # a local: pydantic attribute access is slow
        codes = np.fromiter(
            (zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in _WORD.findall(text.lower())),
            dtype=np.int64,
        )
        vec = np.zeros(dim, dtype=np.float32)
        signs = np.where(codes & (1 << 31), 1.0, -1.0).astype(np.float32)
        np.add.at(vec, codes % dim, signs)
        norm = float(np.linalg.norm(vec))
        if norm == 0:
            vec[0], norm = 1.0, 1.0
        return (vec / norm).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        # Batches go through here too, so a test can hook this one method.
        return self._vector(text)
