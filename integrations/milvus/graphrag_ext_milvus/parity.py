"""Parity check: does an index searching Milvus return what the in-memory index returns?

For each LLM-free index of the suite, :func:`run_parity` builds it with a
Milvus store, persists it, loads it back twice (once without a store, which
searches in memory, and once with a fresh connection to the same collection)
and compares the top-``k`` chunk ids per question. It also times the build,
the persist, the reload and the queries, and counts the lookups that reached
the store, so a method whose retriever bypasses the store shows up as such.

Run it on a benchmark slice from the command line::

    python -m graphrag_ext_milvus.parity --data ../shared/benchmarks/musique-100 \\
        --passages 50 --questions 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.vectors import VectorStoreTable

from .store import milvus_store


@dataclass(frozen=True)
class Method:
    """How to build, persist, reload and query one index kind.

    Attributes:
        name: The run name (``qcg``, ``lprag:pseudo``, ...).
        build: ``(documents, embed_model, vector_store) -> index``.
        persist: ``(index, folder) -> None``.
        load: ``(folder, embed_model, vector_store or None) -> index``; ``None``
            means "search in memory".
        retrieve: ``(index, question, k) -> chunk ids``, best first.
        memory_from_build: Build a separate in-memory index for the reference
            (for the dense baseline, whose reload needs the store).
    """

    name: str
    build: Callable[[Sequence[Document], BaseEmbedding, Any], Any]
    persist: Callable[[Any, Path], None]
    load: Callable[[Path, BaseEmbedding, Any], Any]
    retrieve: Callable[[Any, str, int], list[str]]
    memory_from_build: bool = False


def _ids(results) -> list[str]:
    return [r.node.node_id for r in results]


def _graph_method(name: str) -> Method:
    """A graph method by its run name (``qcg``, ``lprag:pseudo``), through its spec."""
    from llama_index_graphrag_ext.core.spec import make_config, parse_method_name
    from llama_index_graphrag_ext.specs import get_spec

    parsed = parse_method_name(name)
    spec = get_spec(parsed.method)
    config = make_config(spec, parsed)

    def build(docs, embed, store):
        from llama_index_graphrag_ext.core.nodes import PassageParser

        nodes = PassageParser().get_nodes_from_documents(docs)
        return spec.build(nodes, config, embed_model=embed, vector_store=store)

    def load(folder, embed, store):
        return spec.load(folder, embed_model=embed, vector_store=store)

    def retrieve(index, question, k):
        return _ids(index.as_retriever(similarity_top_k=k).retrieve(question))

    return Method(name, build, lambda index, folder: index.persist(folder), load, retrieve)


def _dense() -> Method:
    from llama_index.core import StorageContext, VectorStoreIndex

    from llama_index_graphrag_ext.baselines.dense import DenseRetriever, build_dense_index

    def build(docs, embed, store):
        return build_dense_index(docs, embed, vector_store=store)

    def persist(index, folder):
        index.storage_context.persist(persist_dir=str(folder))

    def load(folder, embed, store):
        if store is None:
            raise ValueError("the dense baseline's vectors live in its store only")
        # The store holds the vectors and (Milvus stores text) the chunk texts.
        StorageContext.from_defaults(persist_dir=str(folder), vector_store=store)
        return VectorStoreIndex.from_vector_store(store, embed_model=embed)

    def retrieve(index, question, k):
        return _ids(DenseRetriever(index, similarity_top_k=k).retrieve(question))

    return Method("dense", build, persist, load, retrieve, memory_from_build=True)


def methods() -> dict[str, Method]:
    """The LLM-free methods, by benchmark name."""
    table = [
        _dense(),
        *(_graph_method(n) for n in ("qcg", "cue", "chainrag", "lprag:pseudo", "fgrag")),
    ]
    return {m.name: m for m in table}


@dataclass
class ParityResult:
    """What one method's parity run measured (seconds, counts)."""

    method: str
    questions: int
    build_s: float
    persist_s: float
    reload_s: float
    same_topk_built: int
    same_topk_reloaded: int
    query_ms_store: float
    query_ms_memory: float
    store_lookups: int
    rows_in_store: dict[str, int] = field(default_factory=dict)
    mismatches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def all_equal(self) -> bool:
        """Top-k equal for every question, before and after the reload."""
        return self.same_topk_built == self.same_topk_reloaded == self.questions


@contextlib.contextmanager
def count_store_lookups() -> Iterator[list[int]]:
    """Count :meth:`VectorStoreTable.query` calls (lookups that reached a store)."""
    box = [0]
    original = VectorStoreTable.query

    def counting(self, *args, **kwargs):
        box[0] += 1
        return original(self, *args, **kwargs)

    VectorStoreTable.query = counting  # type: ignore[method-assign]
    try:
        yield box
    finally:
        VectorStoreTable.query = original  # type: ignore[method-assign]


def _timed_topk(method: Method, index, questions: Sequence[str], k: int):
    tops, times = [], []
    for q in questions:
        t = time.perf_counter()
        tops.append(method.retrieve(index, q, k))
        times.append((time.perf_counter() - t) * 1000)
    return tops, statistics.median(times) if times else 0.0


def _rows_in_store(index) -> dict[str, int]:
    tables = getattr(index, "_store_tables", None)
    return tables.describe()["tables"] if tables is not None else {}


def run_parity(
    method: Method,
    documents: Sequence[Document],
    questions: Sequence[str],
    embed_model: BaseEmbedding,
    workdir: str | Path,
    *,
    k: int = 5,
    dim: int | None = None,
) -> ParityResult:
    """Build ``method`` on Milvus Lite, persist, reload, and compare top-``k`` with memory.

    Args:
        method: One of :func:`methods`.
        documents: The corpus.
        questions: The questions.
        embed_model: The embedder (the same for every build and load).
        workdir: Where the Milvus Lite file and the index folder go.
        k: How many chunks are compared per question.
        dim: Embedding dimension (probed when omitted).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    dim = dim or len(embed_model.get_text_embedding("dimension probe"))
    uri = workdir / "milvus.db"
    collection = method.name.replace("-", "_").replace(".", "_")
    store = milvus_store(uri, dim=dim, collection_name=collection, overwrite=True)
    t = time.perf_counter()
    index = method.build(documents, embed_model, store)
    build_s = time.perf_counter() - t
    with count_store_lookups() as lookups:
        built_top, ms_store = _timed_topk(method, index, questions, k)
    if method.memory_from_build:
        memory = method.build(documents, embed_model, None)
    folder = workdir / "index"
    t = time.perf_counter()
    method.persist(index, folder)
    persist_s = time.perf_counter() - t
    rows = _rows_in_store(index)
    if not method.memory_from_build:
        memory = method.load(folder, embed_model, None)
    memory_top, ms_memory = _timed_topk(method, memory, questions, k)
    # A new store object on the same file and collection, as a later session
    # opens it. (The first client stays open: pymilvus shares one connection per
    # Milvus Lite file in a process, and closing it can stop the embedded server.)
    reopened = milvus_store(uri, dim=dim, collection_name=collection)
    t = time.perf_counter()
    reloaded = method.load(folder, embed_model, reopened)
    reload_s = time.perf_counter() - t
    reloaded_top, _ = _timed_topk(method, reloaded, questions, k)
    reopened.client.close()
    store.client.close()
    mismatches = [
        {"question": q, "memory": m, "store": b, "reloaded": r}
        for q, m, b, r in zip(questions, memory_top, built_top, reloaded_top, strict=True)
        if not (m == b == r)
    ]
    return ParityResult(
        method=method.name,
        questions=len(questions),
        build_s=round(build_s, 2),
        persist_s=round(persist_s, 3),
        reload_s=round(reload_s, 2),
        same_topk_built=sum(m == b for m, b in zip(memory_top, built_top, strict=True)),
        same_topk_reloaded=sum(m == r for m, r in zip(memory_top, reloaded_top, strict=True)),
        query_ms_store=round(ms_store, 1),
        query_ms_memory=round(ms_memory, 1),
        store_lookups=lookups[0],
        rows_in_store=rows,
        mismatches=mismatches,
    )


def _markdown(results: Sequence[ParityResult]) -> str:
    head = (
        "| method | questions | build s (Milvus) | persist s | reload s | same top-k built "
        "| same top-k reloaded | query ms Milvus | query ms memory | store lookups | rows in store |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in results:
        rows = ", ".join(f"{k} {v}" for k, v in r.rows_in_store.items()) or "(store's own)"
        lines.append(
            f"| {r.method} | {r.questions} | {r.build_s} | {r.persist_s} | {r.reload_s} "
            f"| {r.same_topk_built}/{r.questions} | {r.same_topk_reloaded}/{r.questions} "
            f"| {r.query_ms_store} | {r.query_ms_memory} | {r.store_lookups} | {rows} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the parity check on a benchmark slice and print a table."""
    from llama_index_graphrag_ext.core.defaults import resolve_embed_model
    from llama_index_graphrag_ext.eval.data import load_benchmark

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a benchmark folder (canonical format)")
    parser.add_argument("--passages", type=int, default=50)
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--methods", default=",".join(methods()))
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    bench = load_benchmark(args.data).subset(limit=args.questions, max_passages=args.passages)
    documents = bench.documents()
    questions = [q.question for q in bench.questions]
    embed = resolve_embed_model(None)
    table = methods()
    results = []
    for name in args.methods.split(","):
        workdir = Path(tempfile.mkdtemp(prefix=f"parity-{name}-"))
        try:
            result = run_parity(table[name], documents, questions, embed, workdir, k=args.k)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        results.append(result)
        print(json.dumps(asdict(result)), flush=True)
    print(f"\n{len(documents)} passages, {len(questions)} questions, top-{args.k}\n")
    print(_markdown(results))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0 if all(r.all_equal for r in results) else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
