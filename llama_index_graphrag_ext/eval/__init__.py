"""Benchmark loading, metrics, the method registry and the runner."""

from .data import Benchmark, Passage, Question, load_benchmark
from .metrics import accuracy, all_at_k, exact_match, normalize_answer, recall_at_k, token_f1
from .registry import REGISTRY, BenchContext, BenchSystem, MethodSpec, register_method
from .runner import RunConfig, run_benchmark, write_report
from .table import format_table

__all__ = [
    "REGISTRY",
    "BenchContext",
    "BenchSystem",
    "Benchmark",
    "MethodSpec",
    "Passage",
    "Question",
    "RunConfig",
    "accuracy",
    "all_at_k",
    "exact_match",
    "format_table",
    "load_benchmark",
    "normalize_answer",
    "recall_at_k",
    "register_method",
    "run_benchmark",
    "token_f1",
    "write_report",
]
