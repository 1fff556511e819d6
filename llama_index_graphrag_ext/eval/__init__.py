"""Benchmark loading, metrics, the runner and the pairwise judge; methods come from their specs."""

from .data import Benchmark, Passage, Question, load_benchmark
from .metrics import accuracy, all_at_k, exact_match, normalize_answer, recall_at_k, token_f1
from .registry import BenchContext, BenchSystem, build_system, resolve
from .runner import RunConfig, run_benchmark, write_report
from .table import format_table

__all__ = [
    "BenchContext",
    "BenchSystem",
    "Benchmark",
    "Passage",
    "Question",
    "RunConfig",
    "accuracy",
    "all_at_k",
    "exact_match",
    "build_system",
    "format_table",
    "load_benchmark",
    "normalize_answer",
    "recall_at_k",
    "resolve",
    "run_benchmark",
    "token_f1",
    "write_report",
]
