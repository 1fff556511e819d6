"""Answer and context integration (ChainRAG §3.4).

- Sub-answer integration (AnsInt, ``integration="answer"``): the LLM sees the
  question and each sub-question with its answer, no retrieved text.
- Sub-context integration (CxtInt, ``integration="context"``): every
  sub-question's sentences, deduplicated and reranked to the original question
  (the paper leaves the rerank query open), cut at the word budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.schema import NodeWithScore

from ..core.embeddings import embed_query
from ..core.nodes import with_evidence
from .chain import ChainStep
from .search import SearchState, SentenceSearch, word_count


def merged_rows(
    search: SentenceSearch,
    embed_model: BaseEmbedding,
    question: str,
    states: Sequence[SearchState],
) -> list[tuple[int, float]]:
    """CxtInt's context: all sub-questions' sentences, deduplicated, reranked to the question."""
    if not states:
        return []
    sg = states[0].graph
    rows = list(dict.fromkeys(r for st in states for r in st.gathered))
    if not rows:
        return []
    qv = embed_query(embed_model, question)
    probe = SearchState(query=question, graph=sg, query_vector=qv, candidates=[])
    return search._rerank(probe, rows, sg.vectors[rows] @ qv)


def final_prompt(
    prompts: dict[str, BasePromptTemplate],
    integration: str,
    question: str,
    chain: Sequence[ChainStep],
    merged: Sequence[tuple[int, float]],
    states: Sequence[SearchState],
    *,
    index: Any,
    word_budget: int,
) -> str:
    """The final prompt: the sub-answers (AnsInt) or the merged sentences within the budget (CxtInt)."""
    if integration == "answer":
        lines = "\n".join(f"{i}. {s.question} -> {s.answer}" for i, s in enumerate(chain, 1))
        return prompts["answer_integration"].format(chain_str=lines, query_str=question)
    sg = states[0].graph if states else index.sentence_graph
    kept, words = [], 0
    for row, _ in merged:
        text = sg.text(row)
        words += word_count(text)
        if words > word_budget and kept:
            break
        kept.append(text)
    return prompts["context_integration"].format(context_str="\n".join(kept), query_str=question)


def sources(
    index: Any,
    merged: Sequence[tuple[int, float]],
    states: Sequence[SearchState],
    top_k: int,
) -> list[NodeWithScore]:
    """The chunks of the merged sentences, best first, each with its sentences as evidence."""
    if not states:
        return []
    sg = states[0].graph
    best: dict[str, tuple[float, list[str]]] = {}
    for row, score in merged:
        chunk_id = sg.chunk_id(row)
        if chunk_id not in best:
            best[chunk_id] = (score, [])
        best[chunk_id][1].append(sg.text(row))
    order = list(best)[:top_k]
    chunks = {n.node_id: n for n in index.get_chunks(order)}
    return [
        with_evidence(
            chunks[c],
            best[c][0],
            {"method": "chainrag-engine", "rank": i, "sentences": best[c][1]},
        )
        for i, c in enumerate(order, start=1)
    ]
