"""Pairwise LLM judging of two systems' answers [FG-RAG P §6.1, after LightRAG].

A judge LLM compares the two answers on comprehensiveness, diversity,
empowerment and overall. Every pair is judged twice, once in each order, so
position bias cancels out; unparsed verdicts are left out and counted, as in
the authors' evaluator. Systems (``SYSTEMS``): ``fgrag``
([`FGRAGQueryEngine`][llama_index_graphrag_ext.fgrag.engine.FGRAGQueryEngine])
and ``naive`` (dense top-10 chunks, same LLM and answer instructions).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.schema import Document, MetadataMode

from ..core.defaults import resolve_embed_model
from ..core.llm import (
    LLMCaller,
    LLMSettings,
    UsageMeter,
    count_llm_calls,
    describe_llm,
    resolve_llm,
    run_sync,
)
from ..core.llm.parse import json_candidates
from ..core.text import truncate_tokens
from ..fgrag.prompts import JUDGE_PROMPT, NAIVE_ANSWER_PROMPT
from .data import load_benchmark

logger = logging.getLogger(__name__)

CRITERIA = ("comprehensiveness", "diversity", "empowerment", "overall")

#: Answerer: question -> answer text.
Answerer = Callable[[str], str]


def _winner(value: Any) -> int | None:
    """1 or 2 from a verdict field ("Answer 2", 2, {"winner": "2"}), else None."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if str(key).lower() in ("winner", "better", "choice"):
                return _winner(inner)
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and value in (1, 2):
        return int(value)
    found = re.findall(r"[12]", str(value))
    return int(found[0]) if len(set(found)) == 1 else None


def parse_verdict(text: str) -> dict[str, int | None]:
    """Read a judge's answer into ``{criterion: 1 | 2 | None}``.

    JSON is read leniently (fences, single quotes, trailing commas,
    ``"Overall Winner"`` keys); failing that, each criterion's name followed
    within a short span by "1" or "2" is taken. Anything unreadable is None.
    """
    verdict: dict[str, int | None] = dict.fromkeys(CRITERIA)
    # The first JSON object of the reply (prose with brackets before it is skipped).
    data = next((c for c in json_candidates(text or "") if isinstance(c, dict)), None)
    in_json: set[str] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            name = str(key).lower()
            for criterion in CRITERIA:
                if name.startswith(criterion):
                    verdict[criterion] = _winner(value)
                    in_json.add(criterion)
    for criterion in CRITERIA:
        if criterion not in in_json:  # an ambiguous JSON field stays unparsed
            match = re.search(
                rf"{criterion}[^12\n]{{0,40}}?(?:answer\s*)?([12])\b", text or "", re.IGNORECASE
            )
            if match:
                verdict[criterion] = int(match.group(1))
    return verdict


@dataclass
class Judgement:
    """One judged pair in one order (``"ab"``: system A was Answer 1).

    Attributes:
        winners: Per criterion ``"a"``, ``"b"`` or ``None`` (unparsed), order undone.
    """

    query_id: str
    order: str
    winners: dict[str, str | None]
    raw: str = ""


def unswap(verdict: dict[str, int | None], order: str) -> dict[str, str | None]:
    """Map "Answer 1/2" back to systems ``a``/``b`` for the order shown to the judge."""
    first, second = ("a", "b") if order == "ab" else ("b", "a")
    return {c: (None if w is None else (first if w == 1 else second)) for c, w in verdict.items()}


async def ajudge_pair(
    judge: LLMCaller,
    query_id: str,
    question: str,
    answer_a: str,
    answer_b: str,
    prompt: BasePromptTemplate = JUDGE_PROMPT,
) -> list[Judgement]:
    """Judge one pair twice, A first then B first, and undo the swap."""
    out = []
    for order, first, second in (("ab", answer_a, answer_b), ("ba", answer_b, answer_a)):
        reply = await judge.acomplete(
            prompt.format(query_str=question, answer_1=first, answer_2=second), max_tokens=600
        )
        verdict = unswap(parse_verdict(reply.text), order)
        out.append(Judgement(query_id, order, verdict, reply.raw))
    return out


def win_rates(judgements: Sequence[Judgement]) -> dict[str, dict[str, Any]]:
    """Per criterion: wins and win rates of ``a`` and ``b`` over parsed verdicts.

    Returns:
        ``{criterion: {"a": rate, "b": rate, "a_wins", "b_wins", "judged", "unparsed"}}``;
        rates are None when nothing was parsed.
    """
    table: dict[str, dict[str, Any]] = {}
    for criterion in CRITERIA:
        winners = [j.winners.get(criterion) for j in judgements]
        a, b = winners.count("a"), winners.count("b")
        n = a + b
        table[criterion] = {
            "a": a / n if n else None,
            "b": b / n if n else None,
            "a_wins": a,
            "b_wins": b,
            "judged": n,
            "unparsed": len(winners) - n,
        }
    return table


@dataclass
class JudgeContext:
    """What a system builder gets (chunk sizes in tokens; the paper's 1200/100)."""

    llm: LLM
    embed_model: BaseEmbedding
    chunk_size: int = 1200
    chunk_overlap: int = 100
    cache_dir: Path | None = None
    options: dict[str, str] = field(default_factory=dict)
    show_progress: bool = False

    def option(self, name: str, default: Any) -> Any:
        """An option converted like ``default``."""
        if name not in self.options:
            return default
        return type(default)(self.options[name])

    def cache_path(self, name: str) -> str | None:
        """A cache file under ``cache_dir`` (None without one)."""
        if self.cache_dir is None:
            return None
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        return str(self.cache_dir / f"{name}.sqlite")

    def splitter(self):
        """The chunker both systems share."""
        from ..core.splitting import sentence_splitter

        return sentence_splitter(self.chunk_size, self.chunk_overlap)


def build_fgrag(documents: Sequence[Document], ctx: JudgeContext) -> Answerer:
    """FG-RAG's ``paper`` preset (noun-chunk entities where the graph falls back to
    co-occurrence, e.g. with the embedded LLM); options are its config fields by name."""
    from ..fgrag import FGRAGConfig, FGRAGIndex, FGRAGQueryEngine

    known = FGRAGConfig.field_sections()
    config = FGRAGConfig.resolve(
        "paper", include_noun_chunks=True, cache_path=ctx.cache_path("fgrag-llm")
    ).updated({k: v for k, v in ctx.options.items() if k in known})
    index = FGRAGIndex.from_documents(
        documents,
        config=config,
        llm=ctx.llm,
        embed_model=ctx.embed_model,
        transformations=[ctx.splitter()],
        show_progress=ctx.show_progress,
    )
    engine = FGRAGQueryEngine(index, llm=ctx.llm)  # the map-reduce, whatever built the graph
    return lambda question: str(engine.query(question))


def build_naive(documents: Sequence[Document], ctx: JudgeContext) -> Answerer:
    """NaiveRAG: dense top-k chunks (authors: 10), answered by the same LLM."""
    from llama_index.core import VectorStoreIndex

    nodes = ctx.splitter().get_nodes_from_documents(documents)
    index = VectorStoreIndex(nodes, embed_model=ctx.embed_model, show_progress=ctx.show_progress)
    retriever = index.as_retriever(similarity_top_k=ctx.option("naive_top_k", 10))
    llm = LLMSettings(cache_path=ctx.cache_path("naive")).new_caller(ctx.llm)
    window = getattr(ctx.llm.metadata, "context_window", 4096) or 4096
    budget = ctx.option("max_context_tokens", 0) or max(256, min(8000, window - 700))

    def answer(question: str) -> str:
        chunks = [
            n.node.get_content(metadata_mode=MetadataMode.LLM) for n in retriever.retrieve(question)
        ]
        context = truncate_tokens("\n--New Chunk--\n".join(chunks), budget)
        prompt = NAIVE_ANSWER_PROMPT.format(context_str=context, query_str=question)
        return llm.complete(prompt, max_tokens=1000, allow_cut=True).text.strip()

    return answer


#: System name -> builder ``(documents, JudgeContext) -> answerer``.
SYSTEMS: dict[str, Callable[[Sequence[Document], JudgeContext], Answerer]] = {
    "fgrag": build_fgrag,
    "naive": build_naive,
}


def _answers(
    name: str, documents: Sequence[Document], questions, ctx: JudgeContext, usage: UsageMeter
) -> tuple[list[str | None], dict[str, Any]]:
    """One system's answers (``None`` for a question it failed on, counted in the stats)."""
    if name not in SYSTEMS:
        raise KeyError(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}")
    usage.take()
    start = time.perf_counter()
    answerer = SYSTEMS[name](documents, ctx)
    stats: dict[str, Any] = {"index_seconds": round(time.perf_counter() - start, 2)}
    stats["llm_calls_index"], stats["llm_tokens_index"] = usage.take()
    answers, start = [], time.perf_counter()
    for q in questions:
        try:
            answers.append(answerer(q.question))
        except Exception:  # one failed answer must not lose the run; it is counted
            logger.exception("%s failed on %s", name, q.id)
            answers.append(None)  # never judged as an empty answer: the pair is skipped
            stats["failed_answers"] = stats.get("failed_answers", 0) + 1
    stats["query_seconds"] = round(time.perf_counter() - start, 2)
    stats["llm_calls_query"], stats["llm_tokens_query"] = usage.take()
    return answers, stats


def run_judge(
    data: str | Path,
    a: str = "fgrag",
    b: str = "naive",
    limit: int | None = None,
    *,
    llm: LLM | str | None = None,
    judge_llm: LLM | str | None = None,
    embed_model: BaseEmbedding | None = None,
    max_documents: int | None = None,
    chunk_size: int = 1200,
    chunk_overlap: int = 100,
    cache_dir: str | Path | None = None,
    options: dict[str, str] | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Answer a benchmark's questions with two systems and judge them pairwise.

    Args:
        data: A benchmark folder (``corpus.jsonl``, ``questions.jsonl``).
        a: First system (``fgrag`` or ``naive``).
        b: Second system.
        limit: First N questions only.
        llm: The answering LLM or provider name (default: from the environment).
        judge_llm: The judge LLM or provider name (default: ``llm``).
        max_documents: Index only the first M documents (reported, since QFS
            questions span the whole corpus).
        cache_dir: Folder for LLM response caches.
        options: ``key=value`` system options: ``max_query_entities``,
            ``max_questions``, ``max_context_tokens``, ``naive_top_k``,
            ``noun_chunks``.

    Returns:
        The report: run facts, per-system token counts, win rates per
        criterion and every verdict.
    """
    if a == b:
        raise ValueError("judge two different systems")
    for name in (a, b):
        if name not in SYSTEMS:
            raise KeyError(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}")
    bench = load_benchmark(data)
    questions = bench.questions[:limit] if limit else list(bench.questions)
    passages = bench.passages[:max_documents] if max_documents else bench.passages
    documents = [p.to_document() for p in passages]
    answer_llm = resolve_llm(llm)
    if answer_llm is None:
        raise ValueError("the judge needs an answering LLM (got provider 'none')")
    judge = resolve_llm(judge_llm) if judge_llm is not None else answer_llm
    if judge is None:
        raise ValueError("the judge needs a judge LLM (got provider 'none')")
    if judge_llm is None:
        # The paper judged every generator's answers with gpt-4o-mini [P §6.1].
        logger.warning(
            "judge: no judge_llm given, %s judges its own answers (the paper judged with "
            "gpt-4o-mini; pass judge_llm / --judge-llm)",
            describe_llm(answer_llm),
        )
    ctx = JudgeContext(
        llm=answer_llm,
        embed_model=resolve_embed_model(embed_model),
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        cache_dir=Path(cache_dir) if cache_dir else None,
        options=dict(options or {}),
        show_progress=show_progress,
    )
    report: dict[str, Any] = {
        "bench": bench.name,
        "questions": len(questions),
        "documents": len(documents),
        "corpus_documents": len(bench.passages),
        "systems": {"a": a, "b": b},
        "llm": describe_llm(answer_llm),
        "judge": describe_llm(judge),
        "judge_is_answer_llm": judge is answer_llm,
    }
    judge_s = LLMSettings(cache_path=ctx.cache_path("judge")).new_caller(judge)
    judgements: list[Judgement] = []
    with count_llm_calls() as usage:  # every LLM call in the process, phase by phase
        answers_a, report["a_stats"] = _answers(a, documents, questions, ctx, usage)
        answers_b, report["b_stats"] = _answers(b, documents, questions, ctx, usage)
        usage.take()
        skipped = []
        for q, ans_a, ans_b in zip(questions, answers_a, answers_b, strict=True):
            if ans_a is None or ans_b is None:
                skipped.append(q.id)  # a failed answer is not a losing answer
                continue
            judgements.extend(_run_pair(judge_s, q.id, q.question, ans_a, ans_b))
        report["pairs_skipped_failed_answer"] = skipped
        if skipped:
            logger.warning(
                "judge: %d question(s) not judged, a system failed to answer: %s",
                len(skipped),
                skipped[:5],
            )
        report["judge_calls"], report["judge_tokens"] = usage.take()
    report["win_rates"] = win_rates(judgements)
    report["verdicts"] = [
        {"query_id": j.query_id, "order": j.order, "winners": j.winners, "raw": j.raw[:500]}
        for j in judgements
    ]
    report["answers"] = [
        {"query_id": q.id, "question": q.question, a: x, b: y}
        for q, x, y in zip(questions, answers_a, answers_b, strict=True)
    ]
    return report


def _run_pair(judge: LLMCaller, qid: str, question: str, x: str, y: str) -> list[Judgement]:
    return run_sync(lambda: ajudge_pair(judge, qid, question, x, y))


def format_judge_table(report: dict[str, Any]) -> str:
    """The report as Markdown: win rates per criterion, then token counts per system."""
    a, b = report["systems"]["a"], report["systems"]["b"]
    lines = [
        f"{report['bench']}: {report['questions']} questions, {report['documents']} of "
        f"{report['corpus_documents']} documents; answers by {report['llm']}, judged by "
        f"{report['judge']} (each pair judged twice, order swapped)",
        "",
        f"| criterion | {a} | {b} | judged | unparsed |",
        "|---|---|---|---|---|",
    ]
    for criterion in CRITERIA:
        row = report["win_rates"][criterion]

        def pct(x: float | None) -> str:
            return "" if x is None else f"{100 * x:.1f}%"

        lines.append(
            f"| {criterion} | {pct(row['a'])} | {pct(row['b'])} | {row['judged']} | "
            f"{row['unparsed']} |"
        )
    lines += [
        "",
        "| system | index s | LLM calls idx | LLM tok idx | query s | LLM calls q | LLM tok q |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, key in ((a, "a_stats"), (b, "b_stats")):
        s = report[key]
        lines.append(
            f"| {name} | {s['index_seconds']} | {s['llm_calls_index']} | {s['llm_tokens_index']} "
            f"| {s['query_seconds']} | {s['llm_calls_query']} | {s['llm_tokens_query']} |"
        )
    lines.append("")
    lines.append(f"judge: {report['judge_calls']} calls, {report['judge_tokens']} tokens")
    skipped = report.get("pairs_skipped_failed_answer") or []
    if skipped:
        lines.append(f"not judged (a system failed to answer): {len(skipped)} question(s)")
    return "\n".join(lines)
