"""``graphrag-ext``: the demo, your own documents (index, query, info), benchmarks, the graph viewer."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

#: What --reranker takes (index, query, serve).
RERANK_HELP = (
    "a local cross-encoder folder or cached model id (FlagEmbedding: BAAI/bge-reranker-v2-m3), "
    "or package.module:Class[,key=value...] of any LlamaIndex node postprocessor"
)


def _configure_logging(verbose: int) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "sentence_transformers", "urllib3", "filelock", "bm25s"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def _parse_sets(pairs: Sequence[str]) -> dict[str, str]:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set expects key=value, got {pair!r}")
        options[key.strip()] = value.strip()
    return options


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    methods = args.methods.split(",") if args.methods else None
    run_demo(methods, llm=args.llm, top_k=args.top_k)
    return 0


def bench_config(args: argparse.Namespace):
    """The runner's ``RunConfig`` from ``graphrag-ext bench`` arguments."""
    from .eval.runner import RunConfig

    if not args.data or not args.methods:
        raise SystemExit("bench needs --data DIR and --methods m1,m2 (or --list)")
    return RunConfig(
        data=args.data,
        methods=[m.strip() for m in args.methods.split(",") if m.strip()],
        limit=args.limit,
        max_passages=args.max_passages,
        no_titles=args.no_titles,
        join_passages=args.join_passages,
        answer=args.answer,
        top_k=args.top_k,
        options=_parse_sets(args.set),
        cache_dir=args.cache_dir,
        llm=args.llm,
        show_progress=not args.quiet,
        floor=args.floor,
        embed_cache=args.embed_cache,
        allow_fallback=args.allow_fallback,
    )


def print_report(report: dict, args: argparse.Namespace) -> int:
    """Print (and write, with ``--out`` / ``--plot``) a run's table; 1 when a method failed."""
    from .eval.plot import plot_recall
    from .eval.runner import write_report
    from .eval.table import format_table

    for key in ("title", "note"):
        if getattr(args, key):
            report[key] = getattr(args, key)
    print(format_table(report))
    if args.out:
        write_report(report, args.out)
        print(f"wrote {args.out}")
    if args.plot:
        plot_recall(report, args.plot)
        print(f"wrote {args.plot}")
    failed = any("error" in row or "failed" in row for row in report["methods"].values())
    return 1 if failed else 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .core.config import ConfigError

    if args.list:
        from .eval.registry import describe_methods

        print(describe_methods())
        return 0
    from .eval.runner import run_benchmark

    try:
        report = run_benchmark(bench_config(args))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return print_report(report, args)


def cmd_judge(args: argparse.Namespace) -> int:
    from .eval.judge import format_judge_table, run_judge
    from .eval.runner import write_report

    report = run_judge(
        args.data,
        a=args.a,
        b=args.b,
        limit=args.limit,
        llm=args.llm,
        judge_llm=args.judge_llm,
        max_documents=args.max_documents,
        cache_dir=args.cache_dir,
        options=_parse_sets(args.set),
        show_progress=not args.quiet,
    )
    print(format_judge_table(report))
    if args.out:
        write_report(report, args.out)
        print(f"wrote {args.out}")
    return 0


def cmd_scale(args: argparse.Namespace) -> int:
    from .eval.scale import config_from_args, format_scale_table, plot_scale, run_scale

    report = run_scale(config_from_args(args, _parse_sets(args.set)), out=args.out)
    print(format_scale_table(report))
    if args.out:
        print(f"wrote {args.out}")
    if args.plot:
        plot_scale(report, args.plot)
        print(f"wrote {args.plot}")
    return 1 if any("error" in row for row in report["cells"].values()) else 0


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .eval.report import render_page

    page = render_page(args.reports, plots_dir=args.plots, page_dir=Path(args.out).parent)
    Path(args.out).write_text(page, encoding="utf-8")
    print(f"wrote {args.out} from {len(args.reports)} reports")
    return 0


def _documents(run):
    """Run a document command: bad input is one ``error:`` line and exit status 2, no traceback."""

    def command(args: argparse.Namespace) -> int:
        from .core.persist import IndexFormatError
        from .documents import UserError

        try:
            return run(args)
        except (UserError, IndexFormatError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("interrupted: the index folder is as it was before this run", file=sys.stderr)
            return 130
        except Exception as exc:
            if args.verbose:
                raise
            print(f"error: {type(exc).__name__}: {exc} (-v shows the traceback)", file=sys.stderr)
            return 1

    return command


def cmd_index(args: argparse.Namespace) -> int:
    from .documents import IndexRequest, run_index

    request = IndexRequest(
        paths=args.paths,
        method=args.method,
        out=args.out,
        update=args.update,
        exclude=args.exclude,
        include=args.include,
        reranker=args.reranker,
        chunk_size=args.chunk_size,
        chunk_overlap=args.chunk_overlap,
        llm=args.llm,
        options=_parse_sets(args.set),
        embed_model=args.embed_model,
        show_progress=not args.quiet,
        wait=args.wait,
    )
    return run_index(request)


def cmd_query(args: argparse.Namespace) -> int:
    from .documents import run_query

    return run_query(
        args.index_dir,
        args.question,
        top_k=args.top_k,
        answer=not args.no_answer,
        as_json=args.json,
        stream=args.stream,
        provider=args.llm,
        reranker=args.reranker,
    )


def cmd_serve(args: argparse.Namespace) -> int:
    from .core.llm import choose_llm
    from .documents import UserError
    from .serve import serve

    try:
        llm = choose_llm(args.llm).llm
    except (ValueError, ImportError, RuntimeError) as exc:
        raise UserError(f"--llm {args.llm or '(environment)'}: {exc}") from exc
    serve(args.index_dirs, host=args.host, port=args.port, llm=llm, reranker=args.reranker)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from .documents import run_info

    return run_info(args.index_dir, as_json=args.json, verify=args.verify)


def _add_document_commands(sub) -> None:
    llm_help = "embedded, openai, openai-like or none (default: from the environment)"
    index = sub.add_parser(
        "index", help="index your own files and folders with any method (or --update an index)"
    )
    index.add_argument("paths", nargs="+", metavar="PATH", help="files and folders (recursive)")
    index.add_argument(
        "--method", help="NAME[:PRESET][/FIELD=VALUE...], e.g. cue or qcg:paper (bench --list)"
    )
    index.add_argument("--out", metavar="DIR", help="folder to write the index to")
    index.add_argument(
        "--update", metavar="DIR", help="update this index: add new and changed files, drop removed"
    )
    index.add_argument(
        "--exclude", action="append", default=[], metavar="GLOB", help="skip matching files"
    )
    index.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="index only matching files (repeatable; files without an extension are read as "
        "text when they decode as text)",
    )
    index.add_argument("--chunk-size", type=int, help="tokens per chunk (default: the paper's)")
    index.add_argument("--chunk-overlap", type=int, help="tokens of overlap (default: the paper's)")
    index.add_argument(
        "--llm", choices=("embedded", "openai", "openai-like", "none"), help=llm_help
    )
    index.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a config field, repeatable",
    )
    index.add_argument(
        "--embed-model",
        metavar="EMBEDDER",
        help="'default' (the embedded MiniLM), a local model folder, a Hugging Face model id "
        "in the local cache, package.module:Class[,key=value...] of any LlamaIndex embedding, "
        "or 'hash:<dim>' (a near-free stand-in for trials); recorded with the index",
    )
    index.add_argument("--reranker", metavar="RERANKER",
                       help=f"record a reranker that query and serve apply: {RERANK_HELP}")  # fmt: skip
    index.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="another run is writing DIR: wait this long for it (default: fail at once)",
    )
    index.add_argument("--quiet", action="store_true", help="no progress bars")
    index.set_defaults(func=_documents(cmd_index))

    query = sub.add_parser("query", help="ask a question of an index built by graphrag-ext index")
    query.add_argument("index_dir", metavar="DIR")
    query.add_argument("question")
    query.add_argument("--top-k", type=int, default=5, help="passages retrieved")
    query.add_argument("--no-answer", action="store_true", help="retrieval only (no LLM)")
    query.add_argument("--json", action="store_true", help="one JSON object (for scripts)")
    query.add_argument("--stream", action="store_true", help="print the answer as it is written")
    query.add_argument(
        "--llm", choices=("embedded", "openai", "openai-like", "none"), help=llm_help
    )
    query.add_argument("--reranker", metavar="RERANKER", help=f"rerank with {RERANK_HELP} "
                       "(default: the one recorded with the index, if any)")  # fmt: skip
    query.set_defaults(func=_documents(cmd_query))

    info = sub.add_parser("info", help="describe an index built by graphrag-ext index")
    info.add_argument("index_dir", metavar="DIR")
    info.add_argument("--json", action="store_true", help="the stored description as JSON")
    info.add_argument(
        "--verify",
        action="store_true",
        help="check every file of the index against the checksums its manifests hold",
    )
    info.set_defaults(func=_documents(cmd_info))

    serve = sub.add_parser(
        "serve", help="keep index folders loaded: a JSON API and a page to ask them side by side"
    )
    serve.add_argument("index_dirs", nargs="+", metavar="DIR")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on")
    serve.add_argument(
        "--llm", choices=("embedded", "openai", "openai-like", "none"), help=llm_help
    )
    serve.add_argument("--reranker", metavar="RERANKER", help=f"rerank with {RERANK_HELP} "
                       "(default: each index's recorded one)")  # fmt: skip
    serve.set_defaults(func=_documents(cmd_serve))


def cmd_viz(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .core.viz import export_index, method_folder
    from .documents import UserError

    center = list(args.center or [])
    if args.query:
        from .documents.querying import OpenIndex

        if method_folder(args.index_dir) == Path(args.index_dir):
            raise UserError(
                f"--query needs a folder written by `graphrag-ext index` ({args.index_dir} "
                "was written by persist(): centre with --center ID instead)"
            )
        reply = OpenIndex(args.index_dir).ask(args.query, top_k=args.top_k, answer=False)
        center += [p["chunk_id"] for p in reply["passages"]]
        print(f"centred on the {len(reply['passages'])} passage(s) retrieved for the question")
    try:
        shown = export_index(
            args.index_dir,
            args.out,
            max_nodes=args.max_nodes,
            center=center or None,
            strict=not args.query,
        )
    except (ValueError, KeyError) as exc:
        raise UserError(f"{args.index_dir}: {str(exc).strip(chr(39))}") from exc
    print(f"wrote {args.out}: {shown.caption}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphrag-ext",
        description="Graph-RAG methods as LlamaIndex components: demo, your own documents "
        "(index, query, info), benchmarks, graph viewer.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv)")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="index the shipped corpus and answer its questions")
    demo.add_argument("--methods", help="comma-separated method names (default: the demo set)")
    demo.add_argument(
        "--llm", help="provider: embedded, openai, openai-like or none (default: from environment)"
    )
    demo.add_argument("--top-k", type=int, default=3, help="passages shown per question")
    demo.set_defaults(func=cmd_demo)

    _add_document_commands(sub)

    bench = sub.add_parser("bench", help="run methods side by side on a benchmark folder")
    bench.add_argument("--data", help="benchmark folder (corpus.jsonl, questions.jsonl)")
    bench.add_argument("--methods", help="comma-separated method names (see --list)")
    bench.add_argument("--limit", type=int, help="first N questions only")
    bench.add_argument(
        "--max-passages", type=int, help="corpus sample: gold passages plus others up to M"
    )
    bench.add_argument(
        "--no-titles",
        action="store_true",
        help="drop every passage's title (a corpus whose passages nobody names)",
    )
    bench.add_argument(
        "--join-passages",
        type=int,
        metavar="N",
        help="join the passages N at a time (shuffled, seed 0) into long untitled documents; "
        "gold becomes the documents holding the gold passages",
    )
    bench.add_argument("--answer", action="store_true", help="also answer (EM, F1, Acc)")
    bench.add_argument("--top-k", type=int, default=10, help="passages retrieved per question")
    bench.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a config field, for every method of the run that has it; repeatable",
    )
    bench.add_argument(
        "--llm",
        help="provider for LLM methods: openai, openai-like, embedded, none (default: the "
        "environment)",
    )
    bench.add_argument("--cache-dir", help="folder for LLM response caches")
    bench.add_argument("--out", help="write the JSON report here")
    bench.add_argument("--plot", help="write a recall bar chart here (PNG)")
    bench.add_argument(
        "--floor",
        action="store_true",
        help="also time encoding the passages directly (reports index time / that floor)",
    )
    bench.add_argument(
        "--embed-cache",
        help="sqlite file caching passage embeddings across runs (index times then exclude them)",
    )
    bench.add_argument(
        "--allow-fallback",
        action="store_true",
        help="accept a method whose full-LLM steps fell back to the LLM-free stand-in on "
        "more than 5%% of their items (it fails the run otherwise)",
    )
    bench.add_argument("--title", help="section title for the results page (stored in the JSON)")
    bench.add_argument("--note", help="a sentence on the run for the results page (stored)")
    bench.add_argument("--quiet", action="store_true", help="no progress bars")
    bench.add_argument("--list", action="store_true", help="list registered methods")
    bench.set_defaults(func=cmd_bench)

    systems = ("fgrag", "naive")  # eval.judge.SYSTEMS (a test keeps them equal)
    judge = sub.add_parser(
        "judge", help="pairwise LLM judging of two systems' answers (query-focused summarization)"
    )
    judge.add_argument("--data", required=True, help="benchmark folder (ultradomain-mix format)")
    judge.add_argument("--a", default="fgrag", choices=systems, help="first system")
    judge.add_argument("--b", default="naive", choices=systems, help="second system")
    judge.add_argument("--limit", type=int, help="first N queries only")
    judge.add_argument("--max-documents", type=int, help="index only the first M documents")
    judge.add_argument("--llm", help="provider answering for both systems (default: environment)")
    judge.add_argument("--judge-llm", help="provider judging (default: the answering LLM)")
    judge.add_argument("--cache-dir", help="folder for LLM response caches")
    judge.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="system option, repeatable (e.g. max_query_entities=2)",
    )
    judge.add_argument("--out", help="write the JSON report here")
    judge.add_argument("--quiet", action="store_true", help="no progress bars")
    judge.set_defaults(func=cmd_judge)

    from .eval.scale import add_arguments as add_scale_arguments

    scale = sub.add_parser(
        "scale", help="growth curves of the LLM-free methods on synthetic corpora (1k-64k chunks)"
    )
    add_scale_arguments(scale)
    scale.set_defaults(func=cmd_scale)

    report = sub.add_parser("report", help="render runner JSON reports as the docs' results page")
    report.add_argument("reports", nargs="+", help="JSON reports written by bench --out")
    report.add_argument("--out", default="docs/results.md", help="the Markdown page to write")
    report.add_argument("--plots", help="folder for one recall plot per report (PNG)")
    report.set_defaults(func=cmd_report)

    viz = sub.add_parser("viz", help="export an index's graph (GraphML or an offline HTML page)")
    viz.add_argument(
        "index_dir", metavar="DIR", help="a folder written by graphrag-ext index, or by persist()"
    )
    viz.add_argument("--out", required=True, help="FILE.graphml or FILE.html")
    viz.add_argument("--max-nodes", type=int, default=300, help="cap on nodes shown")
    viz.add_argument(
        "--center",
        action="append",
        metavar="ID",
        help="node id to centre on, repeatable (a chunk_id of `query --json`, entity:NAME, ...)",
    )
    viz.add_argument("--query", help="centre on the passages retrieved for this question")
    viz.add_argument("--top-k", type=int, default=5, help="passages --query centres on")
    viz.set_defaults(func=_documents(cmd_viz))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``graphrag-ext`` command."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
