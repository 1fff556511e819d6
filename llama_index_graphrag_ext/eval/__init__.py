"""Benchmark loading, metrics, the runner and the pairwise judge; methods come from their specs."""

from .._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "Benchmark": ".data",
    "Passage": ".data",
    "Question": ".data",
    "load_benchmark": ".data",
    "accuracy": ".metrics",
    "all_at_k": ".metrics",
    "exact_match": ".metrics",
    "normalize_answer": ".metrics",
    "recall_at_k": ".metrics",
    "token_f1": ".metrics",
    "BenchContext": ".registry",
    "BenchSystem": ".registry",
    "build_system": ".registry",
    "resolve": ".registry",
    "RunConfig": ".runner",
    "run_benchmark": ".runner",
    "write_report": ".runner",
    "format_table": ".table",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

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
