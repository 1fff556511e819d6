"""One corpus, several indexes: share embeddings, spaCy parses and LLM responses.

Each method embeds, parses and (with an LLM) prompts on its own. When several
indexes are built over one corpus much of that work is the same: the methods
embed many of the same texts (passages; sentences where their splits agree),
and methods that parse the same texts the same way (FG-RAG and ChainRAG, with
spaCy's parser) can share one spaCy pass. CUE-RAG splits its sentence units by
punctuation rules and runs NER alone, so its parses are its own unless it is
built with ``sentence_splitter="model"``.
:class:`SharedResources` holds one cached embedder, one parse cache and one LLM
cache file, and :meth:`SharedResources.sharing` makes the parse cache current
while indexes are built:

```python
shared = SharedResources(cache_dir="cache/")
with shared.sharing():
    cue = MultiPartiteIndex.from_documents(docs, embed_model=shared.embed_model)
    fg = FGRAGIndex.from_documents(docs, embed_model=shared.embed_model)  # reuses vectors
print(shared.stats())
```

What sharing saves on a benchmark corpus is measured by
[`measure_sharing`][llama_index_graphrag_ext.eval.sharing.measure_sharing]
(``python -m llama_index_graphrag_ext.eval.sharing --data DIR``).
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
        embed_model: The embedder (``Settings`` or the embedded MiniLM when
            omitted). Wrapped in a
            [`CachedEmbedding`][llama_index_graphrag_ext.core.embed_cache.CachedEmbedding]
            unless it is one already.
        cache_dir: Where the embedding cache (``embeddings.sqlite``) and the LLM
            response cache (``llm.sqlite``) live; ``None`` keeps embeddings in
            memory and gives no LLM cache path.
        llm: The LLM the methods should use (kept here so one object serves all).
        cache_queries: Also cache query embeddings (fused retrievers embed the
            same query once per part; caching makes that once in all).
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

        Pass it where a method takes ``cache_path=`` / ``llm_cache_path=``; keys
        hold the model, prompt and parameters, so methods never see each other's
        answers unless they asked the same question of the same model.
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
