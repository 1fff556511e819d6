"""Growth curves: how each LLM-free method's cost grows with the corpus (``graphrag-ext scale``).

The corpora are synthetic but made of real text: the union of the shared
benchmark corpora (long texts cut into passage-sized pieces), and where a size
needs more passages than that, perturbed copies of them (see :func:`perturb`).
Sizes are nested: the 1k corpus is the head of the 4k one, and so on.

Each (method, size) cell runs in its own Python process, so one method's
memory never shows in another's figures and a slow or crashing method is cut
off by a timeout without blocking the rest. A cell measures:

* ``index_seconds``: wall time of the method's builder (the registry's
  ``build``), and ``embed_seconds``, the part of it spent computing
  embeddings that the shared cache (``--embed-cache``) did not hold;
  ``index_seconds_no_embed`` is the difference, and
  ``index_seconds_with_embed`` adds an estimate of embedding every text the
  build asked for (``embed_seconds_est``: a timed sample of those texts,
  encoded fresh, scaled to their count).
* ``retained_mb``: resident memory the built index keeps (after garbage
  collection and ``malloc_trim``) over the process before the build;
  ``peak_mb``: the highest resident memory during the build, over the same
  baseline. ``vectors_mb`` is what the vectors alone take as float32
  (texts the build embedded x dimension x 4 bytes).
* ``disk_mb``: the size of the index persisted to a temporary folder.
* ``p50_ms`` / ``p95_ms``: retrieval latency over a fixed question set
  (including the query's embedding by the run's embedder), after one untimed
  warm-up query; ``query_embed_ms``: the real embedder's time per question.

With ``--embed-model hash:384`` the run uses :class:`HashEmbedding`, a
near-free stand-in of MiniLM's dimension, so corpora too large to embed on
the machine can still be measured; the real embedder (``--calibrate-with``)
is then timed on samples for ``embed_seconds_est`` and ``query_embed_ms``.

Growth exponents are least-squares slopes on log-log axes (see
:func:`fit_exponent`).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from array import array
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import ConfigDict, Field, PrivateAttr

from ..core.text import split_long_text
from .data import Passage, Question, load_benchmark
from .metrics import percentile, recall_at_k
from .registry import REGISTRY, BenchContext, MethodRegistry
from .runner import RssSampler

logger = logging.getLogger(__name__)

#: The LLM-free methods measured by default (registry names).
DEFAULT_METHODS = (
    "dense",
    "bm25",
    "qcg-sentences",
    "cue-0.0",
    "chainrag-retriever",
    "lprag-pseudo",
    "fgrag",
)
DEFAULT_SIZES = (1000, 4000, 16000, 64000)
#: Benchmark texts longer than this are cut into passage-sized pieces.
MAX_PASSAGE_CHARS = 800
#: The issue's targets.
TARGET_TIME_EXPONENT = 1.3
TARGET_P50_MS = 100.0
TARGET_MEMORY_RATIO = 2.0

_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")


# ----------------------------------------------------------------------------- corpora


def default_benchmark_dirs() -> list[Path]:
    """The shared benchmark folders (``$GRAPHRAG_BENCHMARKS`` or ``../shared/benchmarks``)."""
    root = os.environ.get("GRAPHRAG_BENCHMARKS")
    base = Path(root) if root else Path(__file__).resolve().parents[3] / "shared" / "benchmarks"
    return sorted(p for p in base.glob("*") if (p / "corpus.jsonl").is_file())


def load_pool(
    benchmark_dirs: Sequence[str | os.PathLike], max_chars: int = MAX_PASSAGE_CHARS
) -> tuple[list[Passage], list[tuple[str, list[Question]]]]:
    """The union of the benchmark corpora, and each set's questions.

    Ids are prefixed with the set's folder name (``musique-100/<id>``) so sets
    cannot collide; gold ids get the same prefix. Texts longer than
    ``max_chars`` (the UltraDomain books) are cut at paragraph or sentence
    boundaries into pieces ``<id>#<n>``, each keeping the title; gold passages
    stay whole, so the questions' gold ids keep naming one passage each.

    Returns:
        ``(passages, [(set name, questions), ...])`` in folder order.
    """
    passages: list[Passage] = []
    questions: list[tuple[str, list[Question]]] = []
    for folder in benchmark_dirs:
        bench = load_benchmark(folder)
        prefix = f"{bench.name}/"
        gold = {g for q in bench.questions for g in q.gold_ids}
        for p in bench.passages:
            if len(p.text) <= max_chars or p.id in gold:
                passages.append(Passage(prefix + p.id, p.title, p.text))
                continue
            for n, (_, piece) in enumerate(split_long_text(p.text, max_chars)):
                if piece.strip():
                    passages.append(Passage(f"{prefix}{p.id}#{n}", p.title, piece.strip()))
        questions.append(
            (
                bench.name,
                [
                    Question(
                        q.id,
                        q.question,
                        q.answers,
                        tuple(prefix + g for g in q.gold_ids),
                        q.type,
                    )
                    for q in bench.questions
                ],
            )
        )
    return passages, questions


def split_sentences_rule(text: str) -> list[str]:
    """Sentences by a punctuation rule (fast, deterministic; used only to perturb)."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def perturb(passage: Passage, copy: int, seed: int = 0) -> Passage:
    """A perturbed copy of a passage, with the new id ``<id>~c<copy>``.

    The perturbation keeps the passage's words and topic but changes its text,
    so copies are near-duplicates rather than exact ones (as mirrored or
    re-edited pages are in real corpora): sentences are shuffled and, when
    there are three or more, one is dropped; a passage of one or two sentences
    loses one word instead (it has too few orders to tell its copies apart).
    Whole sentences stay intact where possible, so sentence-level embeddings
    are shared with the original through the embedding cache. The choice is
    seeded by ``(seed, copy, id)``.
    """
    rng = random.Random(f"{seed}:{copy}:{passage.id}")
    sentences = split_sentences_rule(passage.text)
    rng.shuffle(sentences)
    if len(sentences) >= 3:
        del sentences[rng.randrange(len(sentences))]
    else:  # too few orders to tell copies apart: drop a word too
        words = " ".join(sentences).split()
        if len(words) >= 2:
            del words[rng.randrange(1, len(words))]
        sentences = [" ".join(words)]
    return Passage(f"{passage.id}~c{copy}", passage.title, " ".join(sentences))


def synthesize(
    pool: Sequence[Passage], size: int, *, first: Sequence[str] = (), seed: int = 0
) -> list[Passage]:
    """A corpus of exactly ``size`` passages from ``pool`` (nested across sizes).

    The passages named in ``first`` (the gold passages of the query set) come
    first, then the rest of the pool in a seeded random order; past the pool,
    perturbed copies (:func:`perturb`) follow in the same order, copy 1 of
    every passage before copy 2.

    Raises:
        ValueError: ``size`` is not positive or the pool is empty.
    """
    if size <= 0:
        raise ValueError(f"size must be positive, got {size}")
    if not pool:
        raise ValueError("the passage pool is empty")
    by_id = {p.id: p for p in pool}
    head = [by_id[i] for i in dict.fromkeys(first) if i in by_id]
    chosen = {p.id for p in head}
    rest = [p for p in pool if p.id not in chosen]
    random.Random(seed).shuffle(rest)
    order = head + rest
    out = list(order[:size])
    copy = 1
    while len(out) < size:
        out.extend(perturb(p, copy, seed) for p in order[: size - len(out)])
        copy += 1
    return out


def query_set(questions: Sequence[tuple[str, list[Question]]], per_set: int) -> list[Question]:
    """The first ``per_set`` questions of each set, in set order."""
    return [q for _, qs in questions for q in qs[:per_set]]


# ------------------------------------------------------------------------- fitting


def fit_exponent(sizes: Sequence[float], values: Sequence[float]) -> dict[str, float] | None:
    """Least-squares fit of ``value = c * size^b`` on log-log axes.

    Points with a non-positive value (a memory delta lost in noise) are left
    out. Returns ``{"exponent": b, "r2": ..., "points": n}``, or None with
    fewer than two usable points.
    """
    pairs = [(float(s), float(v)) for s, v in zip(sizes, values, strict=True) if s > 0 and v > 0]
    if len(pairs) < 2:
        return None
    x = np.log([s for s, _ in pairs])
    y = np.log([v for _, v in pairs])
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((residual**2).sum()) / total if total > 0 else 1.0
    return {"exponent": round(float(slope), 3), "r2": round(r2, 4), "points": len(pairs)}


# ---------------------------------------------------------------------- embeddings


class _TextSample:
    """An evenly spread sample of a stream of texts, in bounded memory.

    Keeps every ``stride``-th text; past ``limit`` kept, drops every other one
    and doubles the stride. Kept as UTF-8 in one buffer, not as references:
    holding the build's own strings (all of them, as this harness once did)
    kept them and the allocator arenas they sit in alive, and was counted as
    index memory (docs/scaling.md, "Memory").
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


class HashEmbedding(BaseEmbedding):
    """Signed hashed bag-of-words vectors: a near-free stand-in embedder of any dimension.

    Texts that share words get similar vectors, so kNN graphs and thresholds
    behave like they do on real embeddings (less well, but with the same
    shapes and costs); only the embedding itself is free. Used to measure how
    an index's own work grows on corpora too large to embed with MiniLM on a
    shared two-core machine; the real embedder's cost is then timed on a sample.
    """

    dim: int = Field(default=384, gt=0, description="Vector dimension.")

    @classmethod
    def class_name(cls) -> str:
        return "HashEmbedding"

    def _vector(self, text: str) -> list[float]:
        # No per-word cache: it grew with the vocabulary and showed up as the
        # index's own memory in the growth curves. crc32 per word is cheap.
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
        return self._vector(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]


def make_embedder(spec: str) -> BaseEmbedding:
    """The embedder named by ``spec``.

    ``default``: the embedded MiniLM; ``hash:<dim>``: :class:`HashEmbedding`;
    ``mock:<dim>``: LlamaIndex's constant ``MockEmbedding`` (tests).
    """
    kind, _, dim = spec.partition(":")
    if kind == "mock":
        from llama_index.core.embeddings import MockEmbedding

        return MockEmbedding(embed_dim=int(dim))
    if kind == "hash":
        return HashEmbedding(dim=int(dim or 384))
    from ..core.defaults import resolve_embed_model

    return resolve_embed_model(spec if spec != "default" else None)


# ------------------------------------------------------------------- one cell


@dataclass
class ScaleConfig:
    """Options of a scale run (the CLI's flags)."""

    methods: list[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    sizes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES))
    benchmarks: list[str] = field(
        default_factory=lambda: [str(p) for p in default_benchmark_dirs()]
    )
    queries_per_set: int = 20
    top_k: int = 10
    embed_cache: str | None = None
    embed_model: str = "default"
    timeout: float = 1800.0
    seed: int = 0
    calibrate_with: str | None = "default"
    calibration_texts: int = 32
    calibration_queries: int = 10
    isolate: bool = True
    options: dict[str, str] = field(default_factory=dict)
    #: BLAS/OpenMP threads in each cell's process (None: the library default).
    #: On an oversubscribed machine one thread is much faster for the
    #: matrix-vector products of retrieval.
    blas_threads: int | None = None


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
    and its OpenMP threads (about 20 MB resident) counted as index memory in
    the cells past that size only.
    """
    from ..core.ann import ivf_knn

    rows = np.random.default_rng(0).standard_normal((2000, 16)).astype(np.float32)
    ivf_knn(rows, rows, 2)


def find_index(retriever: Any) -> Any | None:
    """The index behind a retriever (``index``/``_index``, or one wrapper deeper)."""
    for obj in (retriever, getattr(retriever, "_inner", None)):
        for name in ("index", "_index"):
            index = getattr(obj, name, None)
            if index is not None and (
                hasattr(index, "persist") or hasattr(index, "storage_context")
            ):
                return index
    return None


def persist_index(index: Any, folder: Path) -> None:
    """Persist with the index's own ``persist``, else its LlamaIndex storage context."""
    if hasattr(index, "persist") and callable(index.persist):
        index.persist(folder)
    else:
        index.storage_context.persist(persist_dir=str(folder))


def folder_bytes(folder: Path) -> int:
    """Total size of the files under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def measure_cell(
    method: str, size: int, config: ScaleConfig, registry: MethodRegistry = REGISTRY
) -> dict[str, Any]:
    """Build one method on one corpus size in this process and measure it."""
    spec, captured = registry.resolve(method)
    if spec.tier != "llm-free":
        raise ValueError(f"{method} is {spec.tier}; scale measures LLM-free methods only")
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
        from ..core.embed_cache import CachedEmbedding

        inner = CachedEmbedding(computed, config.embed_cache, cache_queries=False)
    requested = MeteredEmbedding(inner, keep_texts=True)
    dim = len(base.get_query_embedding("dimension probe"))

    ctx = BenchContext(
        embed_model=requested,
        top_k=config.top_k,
        options={**config.options, **captured},
        show_progress=False,
    )
    # A throw-away build on a few passages first: imports, spaCy pipelines and
    # other lazily loaded models are then nobody's index time or memory.
    spec.build(documents[:20], ctx)
    _warm_up_ann()
    computed.reset()
    requested.reset()
    _trim_heap()
    baseline = RssSampler.current_mb()
    with RssSampler() as rss:
        start = time.perf_counter()
        system = spec.build(documents, ctx)
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
    index = find_index(system.retriever)
    if index is None:
        persist_note = f"{type(system.retriever).__name__} has no persistable index"
    else:
        folder = Path(tempfile.mkdtemp(prefix="graphrag-scale-"))
        try:
            start = time.perf_counter()
            persist_index(index, folder / "index")
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
        "tier": spec.tier,
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


# --------------------------------------------------------------------- the run


def _run_isolated(method: str, size: int, config: ScaleConfig) -> dict[str, Any]:
    """Run :func:`measure_cell` in a child process, with the config's timeout."""
    with tempfile.TemporaryDirectory(prefix="graphrag-scale-cell-") as tmp:
        result = Path(tmp) / "cell.json"
        log = Path(tmp) / "cell.log"
        request = {"method": method, "size": size, "config": asdict(config), "out": str(result)}
        cmd = [sys.executable, "-m", "llama_index_graphrag_ext.eval.scale", json.dumps(request)]
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
        if config.blas_threads:
            for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                env[name] = str(config.blas_threads)
        with open(log, "w") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
            try:
                proc.wait(timeout=config.timeout)
            except subprocess.TimeoutExpired:
                return {"error": f"timeout: over {config.timeout:.0f} s (build and queries)"}
            finally:  # also when this process is interrupted: leave no orphan behind
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if proc.returncode == 0 and result.is_file():
            return json.loads(result.read_text())
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        return {"error": f"exit code {proc.returncode}: " + " | ".join(tail)}


def run_scale(
    config: ScaleConfig,
    out: str | os.PathLike | None = None,
    registry: MethodRegistry = REGISTRY,
) -> dict[str, Any]:
    """Measure every (method, size) cell, smallest sizes first; return the report.

    With ``out``, the JSON report is rewritten after every cell, and cells it
    already holds without an error are kept rather than measured again (so a
    run can be extended to a bigger size later). A method that fails or times
    out at one size is skipped at the larger ones.
    """
    for name in config.methods:  # fail fast on typos
        registry.resolve(name)
    previous: dict[str, dict] = {}
    history: list[dict] = []
    if out and Path(out).is_file():
        loaded = json.loads(Path(out).read_text())
        previous = loaded.get("cells", {})
        history = [*loaded.get("history", []), *([loaded["run"]] if "run" in loaded else [])]
    report: dict[str, Any] = {
        "run": {
            "methods": config.methods,
            "sizes": sorted(config.sizes),
            "benchmarks": [Path(b).name for b in config.benchmarks],
            "queries_per_set": config.queries_per_set,
            "top_k": config.top_k,
            "embed_model": config.embed_model,
            "calibrate_with": config.calibrate_with,
            "embed_cache": config.embed_cache,
            "timeout_s": config.timeout,
            "blas_threads": config.blas_threads,
            "seed": config.seed,
            "cpus": os.cpu_count(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "cells": dict(previous),
        "history": history,  # the earlier invocations that wrote cells of this file
    }
    failed: set[str] = set()
    for size in sorted(config.sizes):
        for method in config.methods:
            key = cell_key(method, size)
            if key in previous and "error" not in previous[key]:
                logger.info("%s: kept from %s", key, out)
                continue
            if method in failed:
                report["cells"][key] = {
                    "method": method,
                    "chunks": size,
                    "skipped": "failed at a smaller size",
                }
                continue
            logger.warning("scale: %s at %d chunks", method, size)
            start = time.perf_counter()
            try:
                if config.isolate:
                    row = _run_isolated(method, size, config)
                else:
                    row = measure_cell(method, size, config, registry)
            except Exception as exc:  # one broken method must not lose the others' results
                logger.exception("scale cell %s failed", key)
                row = {"error": f"{type(exc).__name__}: {exc}"}
            row = {"method": method, "chunks": size, **row}
            row["cell_seconds"] = round(time.perf_counter() - start, 1)
            if "error" in row:
                failed.add(method)
                logger.warning("scale: %s failed: %s", key, row["error"])
            report["cells"][key] = row
            report["fits"] = fit_report(report)
            if out:
                write_json(report, out)
    report["fits"] = fit_report(report)
    if out:
        write_json(report, out)
    return report


def cell_key(method: str, size: int) -> str:
    """The report's key of one cell."""
    return f"{method}@{size}"


def _rows_by_method(report: dict[str, Any]) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for row in report["cells"].values():
        if "error" in row or "skipped" in row:
            continue
        rows.setdefault(row["method"], []).append(row)
    for method_rows in rows.values():
        method_rows.sort(key=lambda r: r["chunks"])
    return rows


def fit_report(report: dict[str, Any]) -> dict[str, Any]:
    """Growth exponents per method and the issue's targets, met or not."""
    fits: dict[str, Any] = {}
    for method, rows in _rows_by_method(report).items():
        sizes = [r["chunks"] for r in rows]
        entry: dict[str, Any] = {"sizes": sizes}
        for key in ("index_seconds_no_embed", "index_seconds_with_embed", "retained_mb", "peak_mb"):
            values = [r.get(key) or 0.0 for r in rows]
            entry[key] = fit_exponent(sizes, values)
        largest = rows[-1]
        time_fit = entry["index_seconds_no_embed"]
        ratio = largest.get("memory_ratio")
        entry["targets"] = {
            "time_exponent_le_1.3": None
            if time_fit is None
            else time_fit["exponent"] <= TARGET_TIME_EXPONENT,
            # The retrieval's own latency. The real embedder's query embedding is
            # reported beside it (``query_embed_ms``): on a loaded machine it is
            # the machine's figure, not the method's.
            "p50_lt_100ms_at_largest": largest["p50_ms"] < TARGET_P50_MS,
            "memory_within_2x_vectors_at_largest": None
            if ratio is None
            else ratio <= TARGET_MEMORY_RATIO,
            "largest": largest["chunks"],
        }
        fits[method] = entry
    return fits


def write_json(report: dict[str, Any], path: str | os.PathLike) -> None:
    """Write the report atomically (a crash mid-write keeps the previous file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


# --------------------------------------------------------------------- output


def _fmt(value: Any, spec: str) -> str:
    return "" if value is None else format(value, spec)


def format_scale_table(report: dict[str, Any]) -> str:
    """The cells and the fitted exponents as Markdown tables."""
    lines = [
        "| method | chunks | index s | embed s | index s no-embed | index s with-embed (est.) "
        "| vectors MB | retained MB | peak MB | mem/vectors | disk MB | p50 ms | p95 ms "
        "| MiniLM query-embed ms | R@5 |",
        "|" + "---|" * 15,
    ]
    cells = sorted(report["cells"].values(), key=lambda r: (r["method"], r["chunks"]))
    names = dict.fromkeys([*DEFAULT_METHODS, *report["run"]["methods"]])
    order = {m: i for i, m in enumerate(names)}
    cells.sort(key=lambda r: (order.get(r["method"], len(order)), r["chunks"]))
    for r in cells:
        if "error" in r or "skipped" in r:
            lines.append(
                f"| {r['method']} | {r['chunks']} | {r.get('error') or 'skipped: ' + r['skipped']} |"
            )
            continue
        lines.append(
            f"| {r['method']} | {r['chunks']} | {_fmt(r['index_seconds'], '.1f')} "
            f"| {_fmt(r['embed_seconds'], '.1f')} | {_fmt(r['index_seconds_no_embed'], '.1f')} "
            f"| {_fmt(r['index_seconds_with_embed'], '.1f')} | {_fmt(r['vectors_mb'], '.1f')} "
            f"| {_fmt(r['retained_mb'], '.0f')} | {_fmt(r['peak_mb'], '.0f')} "
            f"| {_fmt(r['memory_ratio'], '.2f')} | {_fmt(r['disk_mb'], '.1f')} "
            f"| {_fmt(r['p50_ms'], '.1f')} | {_fmt(r['p95_ms'], '.1f')} "
            f"| {_fmt(r.get('query_embed_ms'), '.0f')} | {_fmt(r['recall@5'], '.3f')} |"
        )
    lines += [
        "",
        "| method | sizes | time exp. (no embed) | time exp. (with embed) | retained-memory exp. "
        "| time <= n^1.3 | p50 < 100 ms at largest | memory <= 2x vectors at largest |",
        "|" + "---|" * 8,
    ]

    def exp(fit: dict | None) -> str:
        return "" if fit is None else f"{fit['exponent']:.2f} (r2 {fit['r2']:.2f})"

    def yes(flag: bool | None) -> str:
        return "n/a" if flag is None else ("yes" if flag else "**no**")

    fits = sorted(report.get("fits", {}).items(), key=lambda kv: order.get(kv[0], len(order)))
    for method, fit in fits:
        t = fit["targets"]
        lines.append(
            f"| {method} | {','.join(str(s) for s in fit['sizes'])} "
            f"| {exp(fit['index_seconds_no_embed'])} | {exp(fit['index_seconds_with_embed'])} "
            f"| {exp(fit['retained_mb'])} | {yes(t['time_exponent_le_1.3'])} "
            f"| {yes(t['p50_lt_100ms_at_largest'])} | {yes(t['memory_within_2x_vectors_at_largest'])} |"
        )
    return "\n".join(lines)


def plot_scale(report: dict[str, Any], path: str | os.PathLike) -> None:
    """Log-log growth curves: index time, retained memory, latency and disk per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    known = {m: i for i, m in enumerate(DEFAULT_METHODS)}
    rows = dict(
        sorted(_rows_by_method(report).items(), key=lambda kv: known.get(kv[0], len(known)))
    )
    panels = (
        ("index_seconds_no_embed", "index seconds (embeddings cached)"),
        ("retained_mb", "retained memory MB (dashed: vectors)"),
        ("p50_ms", "retrieval p50 ms (red: the 100 ms target)"),
        ("disk_mb", "persisted MB"),
    )
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5), dpi=120)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (key, title) in zip(axes.flat, panels, strict=True):
        for i, (method, method_rows) in enumerate(rows.items()):
            pts = [(r["chunks"], r.get(key)) for r in method_rows if (r.get(key) or 0) > 0]
            if not pts:
                continue
            color = colors[i % len(colors)]
            ax.plot(*zip(*pts, strict=True), marker="o", label=method, color=color)
            if key == "retained_mb":
                vec = [(r["chunks"], r["vectors_mb"]) for r in method_rows if r["vectors_mb"] > 0]
                if vec:
                    ax.plot(*zip(*vec, strict=True), linestyle="--", color=color, alpha=0.5)
        if key == "p50_ms":
            ax.axhline(TARGET_P50_MS, color="red", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("chunks")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncols=min(len(labels), 7) or 1, fontsize=8)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def _worker(request_json: str) -> int:
    """Child-process entry: measure one cell and write its JSON row."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    request = json.loads(request_json)
    config = ScaleConfig(**request["config"])
    row = measure_cell(request["method"], int(request["size"]), config)
    Path(request["out"]).write_text(json.dumps(row), encoding="utf-8")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``graphrag-ext scale`` flags."""
    parser.add_argument(
        "--methods", default=",".join(DEFAULT_METHODS), help="comma-separated LLM-free methods"
    )
    parser.add_argument(
        "--sizes", default=",".join(str(s) for s in DEFAULT_SIZES), help="corpus sizes in chunks"
    )
    parser.add_argument(
        "--benchmarks",
        help="comma-separated benchmark folders (default: every folder of ../shared/benchmarks)",
    )
    parser.add_argument("--queries-per-set", type=int, default=20, help="timed questions per set")
    parser.add_argument("--top-k", type=int, default=10, help="chunks retrieved per question")
    parser.add_argument(
        "--embed-cache", help="sqlite embedding cache shared by every cell (strongly advised)"
    )
    parser.add_argument(
        "--embed-model",
        default="default",
        help="'default' (MiniLM), 'hash:<dim>' (near-free stand-in) or 'mock:<dim>' (tests)",
    )
    parser.add_argument(
        "--calibrate-with",
        default="default",
        help="real embedder timed on a sample when --embed-model is a stand-in ('none': skip)",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds allowed per (method, size) cell"
    )
    parser.add_argument("--seed", type=int, default=0, help="corpus order and perturbation seed")
    parser.add_argument(
        "--blas-threads", type=int, help="BLAS/OpenMP threads per cell (default: library default)"
    )
    parser.add_argument(
        "--in-process", action="store_true", help="no child process per cell (no timeout)"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="method option"
    )
    parser.add_argument("--out", help="JSON report (cells already in it are kept)")
    parser.add_argument("--plot", help="write the log-log growth curves here (PNG)")


def config_from_args(args: argparse.Namespace, options: dict[str, str]) -> ScaleConfig:
    """A :class:`ScaleConfig` from parsed ``scale`` flags."""
    config = ScaleConfig(
        methods=[m.strip() for m in args.methods.split(",") if m.strip()],
        sizes=[int(s) for s in args.sizes.split(",") if s.strip()],
        queries_per_set=args.queries_per_set,
        top_k=args.top_k,
        embed_cache=args.embed_cache,
        embed_model=args.embed_model,
        calibrate_with=None if args.calibrate_with == "none" else args.calibrate_with,
        timeout=args.timeout,
        seed=args.seed,
        isolate=not args.in_process,
        options=options,
        blas_threads=args.blas_threads,
    )
    if args.benchmarks:
        config.benchmarks = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
    if not config.benchmarks:
        raise SystemExit("no benchmark folders found; pass --benchmarks DIR1,DIR2")
    return config


if __name__ == "__main__":  # the child process of one cell
    sys.exit(_worker(sys.argv[1]))
