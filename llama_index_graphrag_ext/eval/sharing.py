"""What sharing work between indexes saves: index seconds with and without
[`SharedResources`][llama_index_graphrag_ext.compose.sharing.SharedResources]
(``python -m llama_index_graphrag_ext.eval.sharing --data DIR``).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import Document

from ..compose.sharing import SharedResources
from ..core.defaults import resolve_embed_model
from ..core.text import load_spacy
from .data import load_benchmark
from .registry import BenchContext, build_system, resolve

logger = logging.getLogger(__name__)


def measure_sharing(
    documents: Sequence[Document],
    methods: Sequence[str],
    *,
    embed_model: BaseEmbedding | None = None,
    top_k: int = 10,
    options: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Index seconds (wall and CPU) of registered methods built separately, then sharing.

    "Separately": the plain embedder and no parse cache; "shared": one
    ``SharedResources`` in the given order, so a later method reuses what an
    earlier one embedded or parsed. The embedder and spaCy are loaded before
    timing. CPU seconds are the steadier measure on a shared machine.

    Args:
        methods: Registered LLM-free method names.
        options: Method options (``--set`` pairs).

    Returns:
        ``{"separate": {method: s}, "shared": {method: s}, "separate_total": s,
        "shared_total": s, "saved_seconds": s, "saved_fraction": f, "shared_stats": {...}}``.
    """
    base = resolve_embed_model(embed_model)
    base.get_text_embedding("warm-up")
    load_spacy()
    for name in methods:  # fail fast on typos
        resolve(name, options)

    def build_all(embed: BaseEmbedding) -> tuple[dict[str, float], dict[str, float]]:
        wall: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for name in methods:
            ctx = BenchContext(embed_model=embed, top_k=top_k, options=dict(options or {}))
            start, start_cpu = time.perf_counter(), time.process_time()
            build_system(name, documents, ctx)
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
    """``python -m llama_index_graphrag_ext.eval.sharing --data DIR [--methods a,b]``."""
    parser = argparse.ArgumentParser(description=measure_sharing.__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="benchmark folder (canonical format)")
    parser.add_argument("--methods", default="qcg,cue,chainrag,lprag:pseudo")
    parser.add_argument("--max-passages", type=int, default=None)
    parser.add_argument("--out", default=None, help="write the result as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    bench = load_benchmark(args.data)
    if args.max_passages:
        bench = bench.subset(None, args.max_passages)
    result = measure_sharing(bench.documents(), args.methods.split(","))
    print(format_sharing(result))
    print(json.dumps(result["shared_stats"]))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
