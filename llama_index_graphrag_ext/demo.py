"""``graphrag-ext demo``: index a small real corpus, answer multi-hop questions, show why.

The corpus ships in the package (``data/demo``: a CC BY 4.0 slice of MuSiQue).
Each registered demo method indexes it through the same code path as the
benchmark runner, then for each question the demo prints the retrieved
passages, the evidence the retriever recorded for each, and the answer of the
configured LLM (the embedded SmolLM2 unless the environment selects a provider).
Each method's LLM steps (tier, LLM, fallbacks to the LLM-free stand-in) are
printed after it is built, so a run never silently shows the wrong tier.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from llama_index.core.llms import LLM

from .core.defaults import describe_embed_model, resolve_embed_model
from .core.llm import LLMOutputError, choose_llm, count_llm_calls, is_embedded
from .core.llm.answering import answering
from .core.nodes import EVIDENCE_KEY
from .core.prompts import SHORT_ANSWER_PROMPT
from .eval.data import load_benchmark
from .eval.metrics import accuracy
from .eval.registry import BenchContext, build_system, resolve
from .eval.table import step_notes

DEMO_DATA = Path(__file__).parent / "data" / "demo"

#: The methods the demo shows, in order, each with its ``default`` preset (LLM-free).
DEMO_METHODS: tuple[str, ...] = ("dense", "qcg", "cue", "chainrag", "lprag", "fgrag")


#: Evidence keys not worth a place on the one "why" line (the question itself, ...).
_QUIET_KEYS = frozenset({"method", "query"})
#: What a nested evidence record is shown by: its text (a matched query, a sentence, ...).
_TEXT_KEYS = ("query", "sentence", "text", "units", "entity", "name", "description")


def _brief(value: Any) -> str:
    """A compact rendering of one evidence value."""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, dict):
        text = next((value[k] for k in _TEXT_KEYS if value.get(k)), None)
        if text is not None:  # a matched query, a sentence: what a reader wants to see
            return _brief(text)
        parts = [f"{k}={_brief(v)}" for k, v in value.items() if not isinstance(v, (dict, list))]
        return "(" + ", ".join(parts) + ")"
    if isinstance(value, (list, tuple)):
        shown = ", ".join(_brief(v) for v in value[:3])
        more = f", ... {len(value)} in all" if len(value) > 3 else ""
        return f"[{shown}{more}]"
    text = str(value)
    return f"'{textwrap.shorten(text, 48, placeholder='...')}'" if " " in text else text


def format_evidence(evidence: dict[str, Any] | None, width: int = 140) -> str:
    """One readable line of a retriever's evidence dict."""
    if not evidence:
        return "(no evidence recorded)"
    items = [(k, v) for k, v in evidence.items() if k not in _QUIET_KEYS]
    # The nested records first (QCG-RAG's matched queries, ChainRAG's sentences, CUE-RAG's
    # paths), shown by their text, then the short facts (rank, scores, counts).
    items.sort(
        key=lambda kv: (
            not (isinstance(kv[1], (list, tuple)) and bool(kv[1]) and isinstance(kv[1][0], dict))
        )
    )
    parts = [f"{k}={_brief(v)}" for k, v in items]
    line = f"{evidence.get('method', '?')}: " + "; ".join(parts)
    return textwrap.shorten(line, width=width, placeholder=" ...")


def run_demo(
    methods: Sequence[str] | None = None,
    *,
    llm: LLM | str | None = None,
    top_k: int = 3,
    data: str | Path = DEMO_DATA,
    out: TextIO = sys.stdout,
) -> dict[str, Any]:
    """Run the demo and print it; return a summary (used by the tests).

    Args:
        methods: Registered method names; defaults to :data:`DEMO_METHODS`.
        llm: An LLM, a provider name (``embedded``, ``openai``, ``openai-like``,
            ``none``), or None for the suite's rule (``Settings.llm``, the
            environment, the embedded SmolLM2).
        top_k: Passages shown and handed to the answer step.
        data: A benchmark folder (the shipped demo corpus by default).
        out: Where to print.
    """
    started = time.perf_counter()
    bench = load_benchmark(data)
    documents = bench.documents()
    print(
        f"Demo corpus: {len(documents)} passages, {len(bench.questions)} multi-hop questions "
        f"({bench.meta.get('license', 'see meta.json')})",
        file=out,
    )
    embed_model = resolve_embed_model()
    choice = choose_llm(llm)
    the_llm = choice.llm
    print(f"Embedder: {describe_embed_model(embed_model)}", file=out)
    print(f"LLM: {choice.describe()} ({choice.tier})", file=out)
    if is_embedded(the_llm):
        print(
            "  The embedded LLM is SmolLM2-135M: a 135-million-parameter model that runs "
            "offline anywhere\n  and reads passages poorly, so expect few right answers even "
            "when the right passage is found.\n  `--llm openai` or `--llm openai-like` "
            "(a vLLM, Ollama or llama.cpp server) answers for real.",
            file=out,
        )
    synthesize = (
        answering(the_llm, response_mode="compact", text_qa_template=SHORT_ANSWER_PROMPT)
        if the_llm is not None
        else None
    )
    summary: dict[str, Any] = {"methods": {}, "llm": choice.describe(), "tier": choice.tier}
    with count_llm_calls() as usage:
        for name in methods or DEMO_METHODS:
            resolved = resolve(name)
            summary_line = resolved.spec.summary if resolved.spec else name
            print(f"\n=== {name} ({resolved.tier}): {summary_line}", file=out)
            # An LLM-free method is built without the LLM (no engine of its own): the
            # demo's one answer step shows its passages and why it chose them.
            needs = resolved.tier != "llm-free"
            ctx = BenchContext(
                embed_model=embed_model,
                llm_factory=(lambda: the_llm) if needs else (lambda: None),
                top_k=top_k,
                show_progress=True,
            )
            t0 = time.perf_counter()
            system = build_system(name, documents, ctx)
            index_seconds = time.perf_counter() - t0
            print(f"indexed in {index_seconds:.1f} s", file=out)
            records = [r.to_dict() for ledger in system.steps for r in ledger.records()]
            for line in step_notes({"llm_steps": records}):
                print(f"  LLM step {line}", file=out)
            answers, gold_found, gold_total, right = [], 0, 0, 0
            for q in bench.questions:
                print(f"\nQ: {q.question}", file=out)
                if system.answerer is not None:
                    answer, _ = system.answerer(q.question)
                    results = []
                else:
                    _, results = system.retrieve(q.question)
                    results = results[:top_k]
                    answer = _answer(synthesize, q.question, results)
                for rank, result in enumerate(results, 1):
                    node = result.node
                    title = node.metadata.get("title") or node.ref_doc_id
                    mark = "*" if node.ref_doc_id in q.gold_ids else " "
                    print(f"  {mark}{rank}. [{node.ref_doc_id}] {title}", file=out)
                    print(
                        f"       why: {format_evidence(node.metadata.get(EVIDENCE_KEY))}", file=out
                    )
                print(f"A: {answer}", file=out)
                print(f"   gold: {' | '.join(q.answers)}", file=out)
                answers.append(answer)
                shown = {r.node.ref_doc_id for r in results}
                gold_found += len(shown & set(q.gold_ids))
                gold_total += len(q.gold_ids)
                right += int(accuracy(answer, q.answers)) if the_llm is not None else 0
            summary["methods"][name] = {
                "index_seconds": index_seconds,
                "answers": answers,
                "llm_steps": records,
                "gold_in_top_k": None if system.answerer else (gold_found, gold_total),
                "answers_with_gold": right if the_llm is not None else None,
            }
        calls, tokens = usage.take()
    elapsed = time.perf_counter() - started
    _print_table(summary["methods"], len(bench.questions), top_k, out)
    print(
        f"\nDone in {elapsed:.1f} s. LLM: {calls} calls, {tokens} tokens "
        "(* marks a gold supporting passage).",
        file=out,
    )
    summary.update(seconds=elapsed, llm_calls=calls, llm_tokens=tokens)
    return summary


def _print_table(methods: dict[str, Any], questions: int, top_k: int, out: TextIO) -> None:
    """One line per method: gold passages in the top k, answers holding the gold, build time."""
    print(f"\n{'method':<10} {f'gold passages in top {top_k}':>24} {'answers with gold':>18} "
          f"{'index s':>8}", file=out)  # fmt: skip
    for name, m in methods.items():
        found = m["gold_in_top_k"]
        shown = f"{found[0]} of {found[1]}" if found else "(own engine)"
        right = (
            "-" if m["answers_with_gold"] is None else f"{m['answers_with_gold']} of {questions}"
        )
        print(f"{name:<10} {shown:>24} {right:>18} {m['index_seconds']:>8.1f}", file=out)


def _answer(synthesize: Any, question: str, results: list) -> str:
    """The answer step's reply, or what went wrong with it (said, never an empty answer)."""
    if synthesize is None:
        return "(no LLM: retrieval only)"
    try:
        return str(synthesize(question, results)).strip()
    except LLMOutputError as exc:
        return f"(no answer: {exc})"
