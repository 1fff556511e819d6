"""Run the benchmark runner from Python on the demo corpus: dense and BM25 side by side.

    python examples/benchmark_runner.py

The same as ``graphrag-ext bench --data <demo corpus> --methods dense,bm25``;
swap in any registered method names (``graphrag-ext bench --list``).
"""

from __future__ import annotations

from llama_index_graphrag_ext.demo import DEMO_DATA
from llama_index_graphrag_ext.eval import RunConfig, format_table, run_benchmark


def main() -> None:
    config = RunConfig(data=str(DEMO_DATA), methods=["dense", "bm25"], show_progress=False)
    report = run_benchmark(config)
    print(format_table(report))
    best = max(report["methods"], key=lambda name: report["methods"][name]["recall@5"])
    print(f"\nbest recall@5 on the demo corpus: {best}")


if __name__ == "__main__":
    main()
