"""A meter around a scale run's embedder: texts and seconds."""

from __future__ import annotations

import time
from array import array
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import ConfigDict, Field, PrivateAttr


class _TextSample:
    """An evenly spread sample of a stream of texts, in bounded memory.

    Keeps every ``stride``-th text; past ``limit`` kept, drops every other one
    and doubles the stride. Kept as UTF-8 in one buffer, not as references:
    references to the build's own strings would keep them, and the allocator
    arenas they sit in, alive, and that would count as the index's memory.
    """

    def __init__(self, limit: int = 128) -> None:
        self.limit, self.stride, self.offered = limit, 1, 0
        self._blob, self._ends = bytearray(), array("q")

    def offer(self, texts: Sequence[str]) -> None:
        for text in texts:
            if self.offered % self.stride == 0:
                self._blob += text.encode("utf-8", "surrogatepass")
                self._ends.append(len(self._blob))
                if len(self._ends) > self.limit:
                    self._halve()
            self.offered += 1

    def _halve(self) -> None:
        kept = self.texts()[::2]
        self._blob, self._ends, self.stride = bytearray(), array("q"), self.stride * 2
        for text in kept:
            self._blob += text.encode("utf-8", "surrogatepass")
            self._ends.append(len(self._blob))

    def texts(self) -> list[str]:
        starts = [0, *self._ends][: len(self._ends)]
        return [
            self._blob[a:b].decode("utf-8", "surrogatepass")
            for a, b in zip(starts, self._ends, strict=True)
        ]


class MeteredEmbedding(BaseEmbedding):
    """Passes calls through to ``inner`` and counts texts and seconds.

    Args:
        inner: The embedder doing the work.
        keep_texts: Remember an evenly spread sample of the texts asked for
            (for the timing sample; see :attr:`seen`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    inner: BaseEmbedding = Field(description="The embedder doing the work.")
    keep_texts: bool = Field(default=False, description="Remember the texts asked for.")
    _texts: int = PrivateAttr(default=0)
    _seconds: float = PrivateAttr(default=0.0)
    _sample: _TextSample = PrivateAttr(default_factory=lambda: _TextSample())

    def __init__(self, inner: BaseEmbedding, **kw: Any) -> None:
        kw.setdefault("embed_batch_size", inner.embed_batch_size)
        kw.setdefault("model_name", inner.model_name)
        super().__init__(inner=inner, **kw)

    @classmethod
    def class_name(cls) -> str:
        return "MeteredEmbedding"

    @property
    def texts(self) -> int:
        """Texts embedded through this object since the last :meth:`reset`."""
        return self._texts

    @property
    def seconds(self) -> float:
        """Seconds spent in ``inner`` for texts since the last :meth:`reset`."""
        return self._seconds

    @property
    def seen(self) -> list[str]:
        """With ``keep_texts``: every ``s``-th text asked for, ``s`` a power of two (at most 128)."""
        return self._sample.texts()

    def reset(self) -> None:
        """Zero the counters."""
        self._texts, self._seconds, self._sample = 0, 0.0, _TextSample()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        start = time.perf_counter()
        vectors = self.inner.get_text_embedding_batch(texts)
        self._seconds += time.perf_counter() - start
        self._texts += len(texts)
        if self.keep_texts:
            self._sample.offer(texts)
        return vectors

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embedding(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.inner.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)
