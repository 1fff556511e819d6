"""The benchmark runner: every named method on one corpus and question set, in one process.

For each method it measures index seconds, per-question latency, LLM calls and
prompt and completion tokens (indexing and querying apart, as LlamaIndex's
instrumentation sees them: cached responses cost nothing), the process's peak
resident memory while the method ran, and the retrieval metrics of the
benchmarks README. With ``answer=True`` methods also answer, and exact match,
token F1 and Acc are reported where the set has answers.

Every method reports its LLM steps (which LLM and tier each ran in, and how
many items fell back to the LLM-free stand-in). A method whose full-LLM steps
fell back on more than :data:`MAX_FALLBACK_SHARE` of their items is marked
failed (and the run exits non-zero) unless ``allow_fallback`` is set: its
figures would be the stand-in's, not the method's.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.llms import LLM
from tqdm.auto import tqdm

from ..core.defaults import describe_embed_model, resolve_embed_model
from ..core.llm import (
    LLMOutputError,
    UsageMeter,
    count_llm_calls,
    describe_llm,
    fallback_share,
    resolve_llm,
)
from .data import Benchmark, Question, load_benchmark
from .metrics import (
    accuracy,
    all_at_k,
    exact_match,
    paired_bootstrap,
    percentile,
    recall_at_k,
    token_f1,
)
from .registry import BenchContext, BenchSystem, build_system, check_options, resolve
from .table import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, REFERENCE

logger = logging.getLogger(__name__)

RECALL_KS = (2, 5, 10)
#: Share of a method's full-tier LLM items that may fall back before it counts as failed.
MAX_FALLBACK_SHARE = 0.05
#: Passages handed to the answer synthesizer for retrieve-then-answer.
ANSWER_TOP_K = 5


class RssSampler:
    """Samples this process's resident memory in a thread; ``peak_mb`` after exit."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def current_mb() -> float:
        """Resident memory now, in MiB."""
        try:
            with open("/proc/self/statm") as fh:
                pages = int(fh.read().split()[1])
            return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
        except (OSError, ValueError):  # not Linux: fall back to the lifetime peak
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, self.current_mb())
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self.peak_mb = self.current_mb()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, self.current_mb())


@dataclass
class RunConfig:
    """Options of one benchmark run (the CLI's flags)."""

    data: str
    methods: list[str]
    limit: int | None = None
    max_passages: int | None = None
    no_titles: bool = False
    join_passages: int | None = None
    answer: bool = False
    top_k: int = 10
    options: dict[str, str] = field(default_factory=dict)
    cache_dir: str | None = None
    llm: str | None = None
    show_progress: bool = True
    floor: bool = False
    embed_cache: str | None = None
    allow_fallback: bool = False


def _answer_with_synthesis(llm: LLM) -> Callable[[str, list], str]:
    from ..core.llm.answering import answering
    from ..core.prompts import SHORT_ANSWER_PROMPT

    synthesize = answering(llm, response_mode="compact", text_qa_template=SHORT_ANSWER_PROMPT)
    failures: list[str] = []

    def answer(question: str, results: list) -> str:
        try:
            return str(synthesize(question, results[:ANSWER_TOP_K]))
        except LLMOutputError as exc:  # scored as a wrong answer, never silently
            failures.append(str(exc))
            logger.warning("answer %d failed (%s): scored as wrong", len(failures), exc)
            return ""

    return answer


def evaluate_method(
    name: str,
    system_builder: Callable[[], BenchSystem],
    questions: Sequence[Question],
    usage: UsageMeter,
    *,
    tier: str,
    answer_fn: Callable[[str, list], str] | None = None,
    show_progress: bool = True,
    server: Any = None,
) -> dict[str, Any]:
    """Build one method and run it over the questions; return its result row.

    With ``server`` (a model server counting its own usage) the row also
    holds the server's own counts of requests and tokens per phase.
    """
    row: dict[str, Any] = {"tier": tier}
    with RssSampler() as rss:
        usage.take()
        mark = server.usage() if server is not None else None
        start = time.perf_counter()
        system = system_builder()
        row["index_seconds"] = round(time.perf_counter() - start, 3)
        _take_usage(usage, row, "index")
        if server is not None:
            row["server"] = {"index": phase_usage(server, mark)}
            mark = server.usage()
        latencies, recalls, alls, answers = [], {k: [] for k in RECALL_KS}, [], []
        outcomes: list[dict[str, Any]] = []
        bar = tqdm(questions, desc=f"{name}: questions", unit="q", disable=not show_progress)
        for q in bar:
            start = time.perf_counter()
            if system.answerer is not None and answer_fn is not None:
                prediction, ranked = system.answerer(q.question)
                latencies.append(time.perf_counter() - start)
            else:
                ranked, results = system.retrieve(q.question)
                latencies.append(time.perf_counter() - start)
                prediction = answer_fn(q.question, results) if answer_fn else None
            # Per-question outcome: the ranked passage ids, so two runs can be
            # compared question by question (same top-k, paired differences).
            outcomes.append({"id": q.id, "ranked": list(ranked[: max(RECALL_KS)])})
            if q.gold_ids:
                for k in RECALL_KS:
                    recalls[k].append(recall_at_k(ranked, q.gold_ids, k))
                alls.append(all_at_k(ranked, q.gold_ids, 5))
            if prediction is not None and q.answers:
                answers.append(
                    (
                        exact_match(prediction, q.answers),
                        token_f1(prediction, q.answers),
                        accuracy(prediction, q.answers),
                    )
                )
        _take_usage(usage, row, "query")
        if server is not None:
            row["server"]["query"] = phase_usage(server, mark)
    for k in RECALL_KS:
        row[f"recall@{k}"] = round(float(np.mean(recalls[k])), 4) if recalls[k] else None
    row["all@5"] = round(float(np.mean(alls)), 4) if alls else None
    ms = [1000 * t for t in latencies]
    row["query_ms_p50"] = round(percentile(ms, 50), 2)
    row["query_ms_p95"] = round(percentile(ms, 95), 2)
    if answers:
        em, f1, acc = np.mean(np.asarray(answers), axis=0)
        row.update(em=round(float(em), 4), f1=round(float(f1), 4), acc=round(float(acc), 4))
    row["peak_rss_mb"] = round(rss.peak_mb, 1)
    row["per_question"] = outcomes
    info = dict(system.info)
    stats = getattr(system.retriever, "stats", None)  # counted while the questions ran
    if isinstance(stats, dict) and stats:
        info["retriever_stats"] = dict(stats)
    if info:
        row["info"] = info
    records = [r for ledger in system.steps for r in ledger.records()]
    if records:
        # The tier the method's LLM steps really ran in (an LLM step that could
        # not run falls to llm-free, and the row says so).
        row["tier"] = "+".join(sorted({r.tier for r in records}))
        row["llm_steps"] = [r.to_dict() for r in records]
        fell, items = fallback_share(records)
        row["fallbacks"] = f"{fell}/{items}" if items else "0"
        row["fallback_share"] = round(fell / items, 4) if items else 0.0
    return row


def _take_usage(usage: UsageMeter, row: dict[str, Any], phase: str) -> None:
    """Calls and prompt/completion tokens since the last take, into ``row`` for ``phase``."""
    counts = usage.snapshot()
    usage.take()
    row[f"llm_calls_{phase}"] = counts["calls"]
    row[f"llm_tokens_{phase}"] = counts["total_tokens"]
    row[f"llm_prompt_tokens_{phase}"] = counts["prompt_tokens"]
    row[f"llm_completion_tokens_{phase}"] = counts["completion_tokens"]


def judge_fallbacks(row: dict[str, Any], allow: bool) -> None:
    """Mark ``row`` failed when its full tier fell back on too many items (see the module docs)."""
    share = row.get("fallback_share") or 0.0
    if share <= MAX_FALLBACK_SHARE:
        return
    message = (
        f"full-LLM steps fell back on {100 * share:.1f}% of their items ({row['fallbacks']}), "
        f"over {100 * MAX_FALLBACK_SHARE:.0f}%: these figures are the stand-in's"
    )
    if allow:
        row["warning"] = message + " (allowed by --allow-fallback)"
    else:
        row["failed"] = message + "; pass --allow-fallback to accept"


def phase_usage(server: Any, before: tuple[int, int, int]) -> dict[str, int]:
    """A model server's own requests and tokens since ``before`` (a ``server.usage()``)."""
    now = server.usage()
    return {
        "requests": now[0] - before[0],
        "prompt_tokens": now[1] - before[1],
        "completion_tokens": now[2] - before[2],
    }


def run_benchmark(
    config: RunConfig,
    *,
    llm: LLM | None = None,
    server: Any = None,
) -> dict[str, Any]:
    """Run every method of ``config`` on one benchmark; return the report (JSON-ready).

    ``llm`` replaces the provider ``config.llm`` names. With ``server`` (a model
    server whose ``usage()`` returns its requests, prompt and completion tokens
    so far, such as the loopback server of ``tests/support/wire_bench.py``) each
    row also holds the server's own counts per phase.
    """
    full = load_benchmark(config.data)
    bench: Benchmark = full.subset(config.limit, config.max_passages)
    sampled = len(bench.passages) < len(full.passages)  # before any joining
    sample_size = len(bench.passages)
    if config.no_titles:
        bench = bench.without_titles()
    if config.join_passages:
        bench = bench.joined(config.join_passages)
    # Every name, preset, field and value is checked before anything is built.
    check_options(config.methods, config.options)
    tiers = {name: resolve(name, config.options).tier for name in config.methods}

    load_start = time.perf_counter()
    base_embed = resolve_embed_model()
    base_embed.get_text_embedding("warm-up")  # model load is not any method's index time
    embed_cache = config.embed_cache or os.environ.get("GRAPHRAG_EMBED_CACHE")
    embed_model = base_embed
    if embed_cache:
        from ..core.embed_cache import CachedEmbedding

        logger.warning("embedding cache %s: index_seconds exclude cached embeddings", embed_cache)
        embed_model = CachedEmbedding(base_embed, embed_cache, cache_queries=False)
    llm_cache: dict[str, LLM | None] = {}

    def llm_factory() -> LLM | None:
        if "llm" not in llm_cache:
            llm_cache["llm"] = llm if llm is not None else resolve_llm(config.llm)
        return llm_cache["llm"]

    report: dict[str, Any] = {
        "bench": bench.name,
        "questions": len(bench.questions),
        "passages": len(bench.passages),
        "methods": {},
        "run": {
            "data": str(config.data),
            "corpus_passages": len(full.passages),
            "corpus_questions": len(full.questions),
            "sampled": sampled,
            "sample_passages": sample_size,
            "titles_dropped": config.no_titles,
            "passages_joined": config.join_passages,
            "top_k": config.top_k,
            "answer": config.answer,
            "options": config.options,
            "embed_model": describe_embed_model(base_embed),
            "embed_cache": embed_cache,
            "model_load_seconds": round(time.perf_counter() - load_start, 2),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }
    documents = bench.documents()
    report["run"].update(_window_facts(base_embed, documents))
    if server is not None:  # the unit of the cost table's per-1k-token figures
        from ..core.text import count_tokens

        report["run"]["corpus_tokens"] = sum(count_tokens(d.text) for d in documents)
    if config.floor:
        floor = embedding_floor_seconds(base_embed, documents)
        if floor is not None:
            report["run"]["embed_floor_seconds"] = round(floor, 3)
    for name, tier in tiers.items():
        logger.info("method %s (%s)", name, tier)
        ctx = BenchContext(
            embed_model=embed_model,
            llm_factory=llm_factory if tier != "llm-free" or config.answer else (lambda: None),
            top_k=max(config.top_k, max(RECALL_KS)),
            options=dict(config.options),
            cache_dir=Path(config.cache_dir) if config.cache_dir else None,
            show_progress=config.show_progress,
        )
        llm = ctx.llm() if (tier != "llm-free" or config.answer) else None
        answer_fn = _answer_with_synthesis(llm) if (config.answer and llm is not None) else None
        try:
            with count_llm_calls() as usage:
                row = evaluate_method(
                    name,
                    lambda name=name, ctx=ctx: build_system(name, documents, ctx),
                    bench.questions,
                    usage,
                    tier=tier,
                    answer_fn=answer_fn,
                    show_progress=config.show_progress,
                    server=server,
                )
            if llm is not None:
                row["llm"] = describe_llm(llm)
            judge_fallbacks(row, config.allow_fallback)
        except Exception as exc:  # one broken method must not lose the others' results
            logger.exception("method %s failed", name)
            row = {"tier": tier, "error": f"{type(exc).__name__}: {exc}"}
        floor = report["run"].get("embed_floor_seconds")
        if floor and "index_seconds" in row:
            row["index_vs_embed"] = round(row["index_seconds"] / floor, 3)
        report["methods"][name] = row
    add_paired_intervals(report, bench.questions)
    if "embed_window" in report["run"] and hasattr(base_embed, "stats"):
        report["run"]["embed_window"]["stats"] = base_embed.stats  # texts pooled, windows
    return report


def _window_facts(embed_model, documents) -> dict[str, Any]:
    """How many passages (as the embedder reads them) exceed its window, and whether pooled."""
    from llama_index.core.schema import MetadataMode

    from ..core.pooling import count_over_window, find_window

    window = find_window(embed_model)
    if window is None:
        return {}
    texts = [d.get_content(metadata_mode=MetadataMode.EMBED) for d in documents]
    return {
        "embed_window": {
            "tokens": window.max_tokens,
            "passages_over": count_over_window(embed_model, texts),
            "pooled": bool(getattr(embed_model, "pooling", False)),
        }
    }


def add_paired_intervals(report: dict[str, Any], questions: Sequence[Question], k: int = 5) -> None:
    """Give each method's row its R@k difference from :data:`REFERENCE`, with a 95% interval.

    A paired bootstrap over the questions both ran (see
    :func:`~.metrics.paired_bootstrap`): with 100 questions one gold passage
    of a two-passage question is 0.005 of R@5, and a difference inside the
    interval is not evidence that one method retrieves better. Stored as
    ``row["vs_dense"]``; nothing is added when the reference is not in the run.
    """
    rows = report["methods"]
    reference = rows.get(REFERENCE, {}).get("per_question")
    if not reference:
        return
    gold = {q.id: q.gold_ids for q in questions if q.gold_ids}
    ref_ranked = {o["id"]: o["ranked"] for o in reference}
    for row in rows.values():
        if "per_question" not in row:
            continue
        ranked = {o["id"]: o["ranked"] for o in row["per_question"]}
        ids = [i for i in ranked if i in ref_ranked and i in gold]
        if not ids:
            continue
        mine = [recall_at_k(ranked[i], gold[i], k) for i in ids]
        theirs = [recall_at_k(ref_ranked[i], gold[i], k) for i in ids]
        result = paired_bootstrap(mine, theirs, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
        row[f"vs_{REFERENCE}"] = {
            "metric": f"recall@{k}",
            **{key: round(result[key], 4) for key in ("mean", "low", "high")},
            "n": result["n"],
            "resamples": BOOTSTRAP_RESAMPLES,
            "seed": BOOTSTRAP_SEED,
        }


def embedding_floor_seconds(embed_model, documents) -> float | None:
    """Seconds sentence-transformers takes to encode the passages directly.

    This is the floor for any index that embeds each passage once: the runner
    reports every method's index time as a multiple of it (``index_vs_embed``).
    Returns None when the embedder is not a sentence-transformers model.
    """
    from llama_index.core.schema import MetadataMode

    model = getattr(getattr(embed_model, "inner", embed_model), "_model", None)
    if model is None or not hasattr(model, "encode"):
        logger.warning("embedding floor needs a sentence-transformers embedder; skipped")
        return None
    texts = [d.get_content(metadata_mode=MetadataMode.EMBED) for d in documents]
    start = time.perf_counter()
    model.encode(texts, batch_size=32, normalize_embeddings=True)
    return time.perf_counter() - start


def write_report(report: dict[str, Any], path: str | os.PathLike) -> None:
    """Write the JSON report."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
