"""Defaults, the issue's targets and :class:`ScaleConfig`, the options of a scale run."""

from __future__ import annotations

from dataclasses import dataclass, field

#: The LLM-free methods measured by default (the paper's LP-RAG settings, LLM-free).
DEFAULT_METHODS = ("dense", "bm25", "qcg", "cue", "chainrag", "lprag:pseudo", "fgrag")
DEFAULT_SIZES = (1000, 4000, 16000, 64000)
#: The issue's targets.
TARGET_TIME_EXPONENT = 1.3
TARGET_P50_MS = 100.0
TARGET_MEMORY_RATIO = 2.0


@dataclass
class ScaleConfig:
    """Options of a scale run (the CLI's flags)."""

    methods: list[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    sizes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES))
    benchmarks: list[str] = field(default_factory=lambda: [str(p) for p in _default_dirs()])
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


def _default_dirs() -> list:
    from .corpus import default_benchmark_dirs  # imports spaCy: only when a run needs it

    return default_benchmark_dirs()
