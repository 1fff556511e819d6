"""``graphrag-ext scale``: its flags, and the :class:`ScaleConfig` they make."""

from __future__ import annotations

import argparse

from .config import DEFAULT_METHODS, DEFAULT_SIZES, ScaleConfig


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
        help="comma-separated benchmark folders (default: every set of the checkout's benchmarks/)",
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
