"""The full tier's cost, measured on the wire: ``python tests/support/wire_bench.py``.

It takes the arguments of ``graphrag-ext bench`` and runs the runner with the
loopback server below as the LLM.

No capable model is reachable from the machines this suite is measured on, so
the cost of each method's full-LLM tier is measured over a real HTTP wire: the
runner starts the loopback OpenAI-compatible server of the wire tests
(``support.wire.WireServer``) answering like a
capable model (``support.replies.ModelReplies``),
points ``OpenAILike`` at it, and reads the *server's* counts of requests and
tokens (tiktoken ``cl100k_base``, as OpenAI bills) for each method's indexing
and querying.

What the figures mean: the calls made and the prompt tokens sent are the
method's own (its prompts, its chunks, its number of steps, its retries and
re-asks); the completion tokens are those of the stand-in model's replies,
which are shaped like a capable model's but are not one's, so they indicate
rather than measure what a real model would write.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `support` as a script

from llama_index_graphrag_ext.core.text import count_tokens  # noqa: E402

#: LightRAG's published and public extraction costs, beside which ours are reported:
#: FG-RAG's paper, Table 5 (the Mix set, about 600,000 tokens in 1,200/100-token
#: chunks, so about 546 chunks; 125 queries), and the size of LightRAG's own
#: extraction prompt (its public ``prompt.py``: template and three examples,
#: counted in cl100k tokens before the chunk's text).
LIGHTRAG_REFERENCE = {
    "indexing_tokens_per_chunk": round(5_111_680 / 546),
    "indexing_tokens_per_1k": round(5_111_680 / 600),
    "query_tokens_per_question": round(2_884_462 / 125),
    "extraction_prompt_tokens": 2_308,
    "source": "FG-RAG paper Table 5 (LightRAG on Mix); LightRAG prompt.py counted",
}


@contextlib.contextmanager
def wire_llm(context_window: int = 16_000) -> Iterator[tuple[Any, Any]]:
    """Start the loopback model server; yield ``(server, OpenAILike client of it)``."""
    try:
        from llama_index.llms.openai_like import OpenAILike

        from support.replies import ModelReplies
        from support.wire import WireServer
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "the wire server needs its packages (starlette, uvicorn): "
            "`pip install -e .[dev]` or `make install`"
        ) from exc
    server = WireServer(ModelReplies()).start()
    llm = OpenAILike(
        model="wire-model",
        api_base=server.base_url,
        api_key=server.api_key,
        is_chat_model=True,
        context_window=context_window,
        timeout=60.0,
    )
    try:
        yield server, llm
    finally:
        server.stop()


def format_cost_table(report: dict[str, Any]) -> str:
    """Per method: the server's calls and tokens per passage at indexing and per question."""
    passages, questions = report["passages"], report["questions"]
    corpus_k = report["run"].get("corpus_tokens", 0) / 1000 or float("nan")
    header = (
        "| method | calls / passage | prompt tok / passage | completion tok / passage "
        "| index tok / 1k corpus tok | calls / question | prompt tok / question "
        "| completion tok / question |"
    )
    lines = [
        f"Full-tier cost on the wire ({passages} passages of {corpus_k * 1000:.0f} tokens, "
        f"{questions} questions; the loopback server's counts, cl100k tokens)",
        "",
        header,
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in report["methods"].items():
        wire = row.get("server")
        if not wire:
            continue
        idx, qry = wire["index"], wire["query"]
        cells = [
            name,
            f"{idx['requests'] / passages:.2f}",
            f"{idx['prompt_tokens'] / passages:.0f}",
            f"{idx['completion_tokens'] / passages:.0f}",
            f"{(idx['prompt_tokens'] + idx['completion_tokens']) / corpus_k:.0f}",
            f"{qry['requests'] / questions:.2f}",
            f"{qry['prompt_tokens'] / questions:.0f}",
            f"{qry['completion_tokens'] / questions:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    ref = LIGHTRAG_REFERENCE
    lines.append(
        f"| LightRAG (published) | | | | {ref['indexing_tokens_per_1k']} | | "
        f"{ref['query_tokens_per_question']} (all tokens) | |"
    )
    lines += [
        "",
        f"LightRAG's extraction prompt alone is {ref['extraction_prompt_tokens']} tokens before "
        f"the chunk ({ref['source']}).",
    ]
    return "\n".join(lines)


def prompt_tokens(text: str) -> int:
    """cl100k tokens of a prompt (the unit of every figure here)."""
    return count_tokens(text)


def main(argv: list[str] | None = None) -> int:
    """``graphrag-ext bench`` with the loopback server as the LLM, plus the cost table."""
    from llama_index_graphrag_ext.cli import bench_config, build_parser, print_report
    from llama_index_graphrag_ext.eval.runner import run_benchmark

    args = build_parser().parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    with wire_llm() as (server, llm):
        report = run_benchmark(bench_config(args), llm=llm, server=server)
    report["run"]["llm_note"] = (
        "loopback wire server (tests/support/replies.py): calls and prompt tokens are the "
        "methods' own; completion tokens are the stand-in model's"
    )
    failed = print_report(report, args)
    print()
    print(format_cost_table(report))
    return failed


if __name__ == "__main__":
    sys.exit(main())
