"""FG-RAG on LadybugDB against FG-RAG in memory: same top-k, through persist and reopen; query p50.

Run it on a benchmark slice (LLM-free graph, the bundled MiniLM)::

    python -m graphrag_ext_ladybug.parity --data ../shared/benchmarks/musique-100 \\
        --passages 300 --questions 50

It builds the in-memory index and the store-backed one on the same passages,
asks every question of both (top-k and latency), persists the store-backed
index, closes the database, reopens it and asks again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.defaults import resolve_embed_model
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.eval.data import load_benchmark
from llama_index_graphrag_ext.fgrag import CooccurrenceExtractor, FGRAGIndex

from . import close_store, hop_reader, open_store


def benchmark_slice(
    data: str | Path, passages: int, questions: int
) -> tuple[list[Document], list[str]]:
    """The first ``questions`` questions and their gold passages, plus others up to ``passages``."""
    bench = load_benchmark(data)
    asked = bench.questions[:questions]
    gold = {pid for q in asked for pid in q.gold_ids}
    chosen = [p for p in bench.passages if p.id in gold]
    chosen += [p for p in bench.passages if p.id not in gold][: max(0, passages - len(chosen))]
    return [p.to_document() for p in chosen], [q.question for q in asked]


def _build(documents: Sequence[Document], embed: Any, **kwargs: Any) -> FGRAGIndex:
    return FGRAGIndex.from_documents(
        documents,
        kg_extractors=[CooccurrenceExtractor()],
        transformations=[PassageParser()],
        embed_model=embed,
        **kwargs,
    )


def _ask(
    index: FGRAGIndex, questions: Sequence[str], k: int
) -> tuple[list[list[str]], list[float]]:
    retriever = index.as_retriever(similarity_top_k=k)
    tops, ms = [], []
    for question in questions:
        start = time.perf_counter()
        nodes = retriever.retrieve(question)
        ms.append(1000 * (time.perf_counter() - start))
        tops.append([n.node.node_id for n in nodes])
    return tops, ms


def run_parity(
    documents: Sequence[Document],
    questions: Sequence[str],
    folder: str | Path,
    *,
    top_k: int = 5,
    embed_model: Any = None,
) -> dict[str, Any]:
    """Build both indexes, compare their top-``k`` per question before and after a reopen."""
    folder = Path(folder)
    embed = resolve_embed_model(embed_model)
    start = time.perf_counter()
    memory = _build(documents, embed)
    memory_build = time.perf_counter() - start
    store = open_store(folder / "graph.lbug")
    start = time.perf_counter()
    on_store = _build(documents, embed, property_graph_store=store, hop_reader=hop_reader(store))
    store_build = time.perf_counter() - start
    _ask(memory, questions[:2], top_k)  # warm both (spaCy, first queries)
    _ask(on_store, questions[:2], top_k)
    expected, memory_ms = _ask(memory, questions, top_k)
    got, store_ms = _ask(on_store, questions, top_k)
    on_store.persist(folder / "index")
    close_store(store)
    store = open_store(folder / "graph.lbug")
    try:
        reopened = FGRAGIndex.load(
            folder / "index",
            embed_model=embed,
            property_graph_store=store,
            hop_reader=hop_reader(store),
        )
        again, reopened_ms = _ask(reopened, questions, top_k)
    finally:
        close_store(store)
    stats = memory.stats()
    return {
        "passages": len(documents),
        "questions": len(questions),
        "top_k": top_k,
        "entities": stats["entities"],
        "relations": stats["relations"],
        "same_top_k": sum(a == b for a, b in zip(expected, got, strict=True)),
        "same_top_k_after_reopen": sum(a == b for a, b in zip(expected, again, strict=True)),
        "build_seconds": {"memory": round(memory_build, 2), "ladybug": round(store_build, 2)},
        "p50_ms": {
            "memory": round(statistics.median(memory_ms), 2),
            "ladybug": round(statistics.median(store_ms), 2),
            "ladybug_reopened": round(statistics.median(reopened_ms), 2),
        },
    }


def format_table(report: dict[str, Any]) -> str:
    """The report as a Markdown table."""
    n = report["questions"]
    return "\n".join(
        [
            f"{report['passages']} passages, {report['entities']} entities, "
            f"{report['relations']} relations; {n} questions, top-{report['top_k']}",
            "",
            "| FG-RAG graph | build s | retrieval p50 ms | same top-k as in memory |",
            "|---|---|---|---|",
            f"| in memory | {report['build_seconds']['memory']} | {report['p50_ms']['memory']} | - |",
            f"| LadybugDB | {report['build_seconds']['ladybug']} | {report['p50_ms']['ladybug']} "
            f"| {report['same_top_k']}/{n} |",
            f"| LadybugDB, reopened | - | {report['p50_ms']['ladybug_reopened']} "
            f"| {report['same_top_k_after_reopen']}/{n} |",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="benchmark folder")
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--out", help="write the JSON report here")
    args = parser.parse_args(argv)
    documents, questions = benchmark_slice(args.data, args.passages, args.questions)
    with tempfile.TemporaryDirectory() as folder:
        report = run_parity(documents, questions, folder, top_k=args.top_k)
    print(format_table(report))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
