"""One corpus, several indexes: share embeddings, spaCy parses and LLM responses.

Indexes over one corpus embed many of the same texts, and methods that parse
texts the same way can share one spaCy pass. :class:`SharedResources` holds one
cached embedder, one parse cache and one LLM cache file; what it saves is
measured by [`measure_sharing`][llama_index_graphrag_ext.eval.sharing.measure_sharing].
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM

from ..core.defaults import resolve_embed_model
from ..core.embed_cache import CachedEmbedding
from ..core.llm.cache import LLMCache
from ..core.text import ParseCache, shared_parses

logger = logging.getLogger(__name__)


class SharedResources:
    """The expensive, reusable parts of indexing, held once for several indexes.

    Args:
        embed_model: The embedder, wrapped in a
            [`CachedEmbedding`][llama_index_graphrag_ext.core.embed_cache.CachedEmbedding]
            unless it is one already.
        cache_dir: Where ``embeddings.sqlite`` and ``llm.sqlite`` live; ``None``
            keeps embeddings in memory and gives no LLM cache path.
        cache_queries: Also cache query embeddings (fused retrievers embed the
            same query once per part).
    """

    def __init__(
        self,
        embed_model: BaseEmbedding | str | None = None,
        *,
        cache_dir: str | os.PathLike | None = None,
        llm: LLM | None = None,
        cache_queries: bool = True,
    ) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        if self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        base = resolve_embed_model(embed_model)
        if isinstance(base, CachedEmbedding):
            self.embed_model = base
        else:
            path = self.cache_dir / "embeddings.sqlite" if self.cache_dir else None
            self.embed_model = CachedEmbedding(base, path, cache_queries=cache_queries)
        self.parses = ParseCache()
        self.llm = llm

    @property
    def llm_cache_path(self) -> str | None:
        """One sqlite file for every method's LLM responses (``None`` without ``cache_dir``).

        Keys hold the model, prompt and parameters, so methods share only
        identical questions to the same model.
        """
        return str(self.cache_dir / "llm.sqlite") if self.cache_dir else None

    def llm_cache(self) -> LLMCache | None:
        """An :class:`LLMCache` on :attr:`llm_cache_path` (for methods that take ``cache=``)."""
        path = self.llm_cache_path
        return LLMCache(path) if path else None

    @contextlib.contextmanager
    def sharing(self) -> Iterator[SharedResources]:
        """Within the block, spaCy analyses are shared (see ``core.text.shared_parses``)."""
        with shared_parses(self.parses):
            yield self

    def stats(self) -> dict[str, int]:
        """What was reused so far: embedding hits and parse hits and misses."""
        return {
            "embedding_hits": self.embed_model.hits,
            "parse_hits": self.parses.hits,
            "parse_misses": self.parses.misses,
        }
