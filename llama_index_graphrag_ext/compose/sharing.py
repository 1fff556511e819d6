"""One corpus, several indexes: share embeddings, spaCy parses and LLM responses.

Each method embeds, parses and (with an LLM) prompts on its own. When several
indexes are built over one corpus much of that work is the same: the methods
embed many of the same texts (passages; sentences where their splits agree),
and CUE-RAG and FG-RAG run spaCy over the very same passage texts.
:class:`SharedResources` holds one cached embedder, one parse cache and one LLM
cache file, and :meth:`SharedResources.sharing` makes the parse cache current
while indexes are built:

```python
shared = SharedResources(cache_dir="cache/")
with shared.sharing():
    cue = MultiPartiteIndex.from_documents(docs, embed_model=shared.embed_model)
    fg = FGRAGIndex.from_documents(docs, embed_model=shared.embed_model)  # reuses the parses
print(shared.stats())
```

:func:`measure_sharing` builds registered methods with and without sharing and
reports the index seconds; ``python -m llama_index_graphrag_ext.compose --data DIR``
runs it on a benchmark folder.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.schema import Document

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


def measure_sharing(
    documents: Sequence[Document],
    methods: Sequence[str],
    *,
    embed_model: BaseEmbedding | None = None,
    top_k: int = 10,
    options: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Index seconds (wall and CPU) of registered methods built separately, then sharing.

    "Separately" gives every method the plain embedder and no parse cache (what
    building them one after another costs today); "shared" builds them in the
    given order with one :class:`SharedResources` (embeddings in memory), so a
    later method reuses what an earlier one embedded or parsed. The embedder is
    loaded (and warmed) once before either, and spaCy is loaded before timing.
    CPU seconds (this process, all threads) are reported beside wall seconds:
    on a machine shared with other work they are the steadier measure.

    Args:
        documents: The corpus.
        methods: Registered LLM-free method names, e.g.
            ``["qcg-sentences", "cue-0.0", "chainrag-retriever", "lprag-pseudo"]``.
        embed_model: The embedder (the embedded MiniLM when omitted).
        top_k: The retrievers' top-k (does not change index time).
        options: Method options (``--set`` pairs).

    Returns:
        ``{"separate": {method: s}, "shared": {method: s}, "separate_total": s,
        "shared_total": s, "saved_seconds": s, "saved_fraction": f, "shared_stats": {...}}``.
    """
    from ..core.text import load_spacy
    from ..eval.registry import REGISTRY, BenchContext

    base = resolve_embed_model(embed_model)
    base.get_text_embedding("warm-up")
    load_spacy()
    specs = [(name, *REGISTRY.resolve(name)) for name in methods]

    def build_all(embed: BaseEmbedding) -> tuple[dict[str, float], dict[str, float]]:
        wall: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for name, spec, captured in specs:
            ctx = BenchContext(
                embed_model=embed, top_k=top_k, options={**(options or {}), **captured}
            )
            start, start_cpu = time.perf_counter(), time.process_time()
            spec.build(documents, ctx)
            wall[name] = round(time.perf_counter() - start, 2)
            cpu[name] = round(time.process_time() - start_cpu, 2)
            logger.info("built %s in %.1f s (%.1f CPU s)", name, wall[name], cpu[name])
        return wall, cpu

    separate, separate_cpu = build_all(base)
    shared = SharedResources(base)
    with shared.sharing():
        together, together_cpu = build_all(shared.embed_model)
    total_separate = round(sum(separate.values()), 2)
    total_shared = round(sum(together.values()), 2)
    return {
        "methods": list(methods),
        "passages": len(documents),
        "separate": separate,
        "shared": together,
        "separate_cpu": separate_cpu,
        "shared_cpu": together_cpu,
        "separate_total": total_separate,
        "shared_total": total_shared,
        "separate_cpu_total": round(sum(separate_cpu.values()), 2),
        "shared_cpu_total": round(sum(together_cpu.values()), 2),
        "saved_seconds": round(total_separate - total_shared, 2),
        "saved_fraction": round(1 - total_shared / total_separate, 4) if total_separate else 0.0,
        "shared_stats": shared.stats(),
    }


def format_sharing(result: dict[str, Any]) -> str:
    """The result of :func:`measure_sharing` as a Markdown table."""
    lines = [
        "| method | separate s | shared s | separate CPU s | shared CPU s |",
        "|---|---|---|---|---|",
        *(
            f"| {m} | {result['separate'][m]:.1f} | {result['shared'][m]:.1f} "
            f"| {result['separate_cpu'][m]:.1f} | {result['shared_cpu'][m]:.1f} |"
            for m in result["methods"]
        ),
        f"| **total** | **{result['separate_total']:.1f}** | **{result['shared_total']:.1f}** "
        f"| **{result['separate_cpu_total']:.1f}** | **{result['shared_cpu_total']:.1f}** |",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m llama_index_graphrag_ext.compose --data DIR [--methods a,b]``."""
    parser = argparse.ArgumentParser(description=measure_sharing.__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="benchmark folder (canonical format)")
    parser.add_argument(
        "--methods", default="qcg-sentences,cue-0.0,chainrag-retriever,lprag-pseudo"
    )
    parser.add_argument("--max-passages", type=int, default=None)
    parser.add_argument("--out", default=None, help="write the result as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from ..eval.data import load_benchmark

    bench = load_benchmark(args.data)
    if args.max_passages:
        bench = bench.subset(None, args.max_passages)
    result = measure_sharing(bench.documents(), args.methods.split(","))
    print(format_sharing(result))
    print(json.dumps(result["shared_stats"]))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
