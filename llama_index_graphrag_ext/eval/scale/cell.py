"""One (method, size) cell: build the method on its corpus and measure it, in this process."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from ...core.defaults import make_embedder
from ..metrics import percentile, recall_at_k
from ..registry import BenchContext, build_system, resolve
from ..runner import RssSampler
from .config import ScaleConfig
from .corpus import load_pool, query_set, synthesize
from .embedders import MeteredEmbedding


def _trim_heap() -> None:
    """Collect garbage and hand freed heap back to the OS, so RSS shows live memory."""
    gc.collect()
    # Not glibc: no trim, and RSS then over-states live memory (never under-states).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _warm_up_ann() -> None:
    """Load the approximate kNN's library and thread pool before measuring.

    Builds switch to faiss only past about 50k x 50k rows, which the small
    warm-up build never reaches; loaded inside the measured build, the library
    and its OpenMP threads would count as index memory in the cells past that
    size only.
    """
    from ...core.ann import ivf_knn

    rows = np.random.default_rng(0).standard_normal((2000, 16)).astype(np.float32)
    ivf_knn(rows, rows, 2)


def folder_bytes(folder: Path) -> int:
    """Total size of the files under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def measure_cell(method: str, size: int, config: ScaleConfig) -> dict[str, Any]:
    """Build one method on one corpus size in this process and measure it."""
    tier = resolve(method, config.options).tier
    if tier != "llm-free":
        raise ValueError(f"{method} is {tier}; scale measures LLM-free methods only")
    pool, sets = load_pool(config.benchmarks)
    questions = query_set(sets, config.queries_per_set)
    gold = [g for q in questions for g in q.gold_ids]
    passages = synthesize(pool, size, first=gold, seed=config.seed)
    documents = [p.to_document() for p in passages]
    del pool

    base = make_embedder(config.embed_model)
    base.get_text_embedding("warm-up")  # model load is nobody's index time
    computed = MeteredEmbedding(base)
    inner: BaseEmbedding = computed
    if config.embed_cache:
        from ...core.embed_cache import CachedEmbedding

        inner = CachedEmbedding(computed, config.embed_cache, cache_queries=False)
    requested = MeteredEmbedding(inner, keep_texts=True)
    dim = len(base.get_query_embedding("dimension probe"))

    ctx = BenchContext(
        embed_model=requested,
        top_k=config.top_k,
        options=dict(config.options),
        show_progress=False,
    )
    # A throw-away build on a few passages first: imports, spaCy pipelines and
    # other lazily loaded models are then nobody's index time or memory.
    build_system(method, documents[:20], ctx)
    _warm_up_ann()
    computed.reset()
    requested.reset()
    _trim_heap()
    baseline = RssSampler.current_mb()
    with RssSampler() as rss:
        start = time.perf_counter()
        system = build_system(method, documents, ctx)
        index_seconds = time.perf_counter() - start
    _trim_heap()
    retained = RssSampler.current_mb() - baseline
    embedded_texts, embed_seconds = requested.texts, computed.seconds
    sample = requested.seen[:: max(1, len(requested.seen) // config.calibration_texts)]
    sample = sample[: config.calibration_texts]
    requested.keep_texts = False
    requested.reset()

    system.retrieve("warm-up query about a film director")
    latencies, recalls = [], []
    corpus_ids = {p.id for p in passages}
    for q in questions:
        start = time.perf_counter()
        ranked, _ = system.retrieve(q.question)
        latencies.append(1000 * (time.perf_counter() - start))
        present = [g for g in q.gold_ids if g in corpus_ids]
        if present:
            recalls.append(recall_at_k(ranked, present, 5))

    disk_bytes, persist_seconds, persist_note = None, None, None
    index = system.index
    if index is None:
        persist_note = f"{method} has no persistable index"
    else:
        folder = Path(tempfile.mkdtemp(prefix="graphrag-scale-"))
        try:
            start = time.perf_counter()
            index.persist(folder / "index")
            persist_seconds = round(time.perf_counter() - start, 3)
            disk_bytes = folder_bytes(folder / "index")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    # The real embedder's cost, timed on a sample of this build's texts and on
    # the questions (only estimated when the run used a stand-in embedder).
    calibrator = base
    if config.calibrate_with and config.calibrate_with != config.embed_model:
        calibrator = make_embedder(config.calibrate_with)
        calibrator.get_text_embedding("warm-up")
    embed_est = None
    if sample:
        start = time.perf_counter()
        calibrator.get_text_embedding_batch(list(sample))
        embed_est = (time.perf_counter() - start) / len(sample) * embedded_texts
    query_embed_ms = []
    for q in questions[: config.calibration_queries]:
        start = time.perf_counter()
        calibrator.get_query_embedding(q.question)
        query_embed_ms.append(1000 * (time.perf_counter() - start))
    stand_in = calibrator is not base
    p50 = percentile(latencies, 50)
    query_embed = percentile(query_embed_ms, 50)

    no_embed = index_seconds - embed_seconds
    vectors_mb = embedded_texts * dim * 4 / 2**20
    return {
        "method": method,
        "chunks": size,
        "tier": tier,
        "index_seconds": round(index_seconds, 3),
        "embed_seconds": round(embed_seconds, 3),
        "index_seconds_no_embed": round(no_embed, 3),
        "embed_seconds_est": None if embed_est is None else round(embed_est, 3),
        "index_seconds_with_embed": None if embed_est is None else round(no_embed + embed_est, 3),
        "embedded_texts": embedded_texts,
        "dimension": dim,
        "vectors_mb": round(vectors_mb, 2),
        "retained_mb": round(retained, 1),
        "peak_mb": round(rss.peak_mb - baseline, 1),
        "memory_ratio": round(retained / vectors_mb, 2) if vectors_mb > 0 else None,
        "disk_mb": None if disk_bytes is None else round(disk_bytes / 2**20, 2),
        "persist_seconds": persist_seconds,
        "persist_note": persist_note,
        "queries": len(latencies),
        "p50_ms": round(p50, 2),
        "p95_ms": round(percentile(latencies, 95), 2),
        "embedder": config.embed_model,
        "calibrated_with": config.calibrate_with if stand_in else None,
        "query_embed_ms": round(query_embed, 2),
        "query_embed_ms_min": round(min(query_embed_ms), 2) if query_embed_ms else None,
        # What a user of the real embedder would see: the stand-in's query
        # embedding (near zero) replaced by the real one's.
        "p50_ms_real_embed": round(p50 + query_embed, 2) if stand_in else round(p50, 2),
        "text_mb": round(sum(len(p.text.encode("utf-8")) for p in passages) / 2**20, 2),
        "recall@5": round(float(np.mean(recalls)), 4) if recalls else None,
        "info": _jsonable(system.info),
    }


def _jsonable(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def _worker(request_json: str) -> int:
    """Child-process entry: measure one cell and write its JSON row."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    request = json.loads(request_json)
    config = ScaleConfig(**request["config"])
    row = measure_cell(request["method"], int(request["size"]), config)
    Path(request["out"]).write_text(json.dumps(row), encoding="utf-8")
    return 0
