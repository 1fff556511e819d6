"""Batches of neighbouring chunks and the queries written for them (LP-RAG §3.2, App. A.2).

For every chunk ``v`` the paper samples a batch: ``v`` plus ``k_v`` of its
mutual-kNN neighbours, ``k_v ~ Uniform{0, ..., deg(v)}`` (A.2). An LLM writes
``n_B = 2`` human-like questions about the batch (Eq. 3) and every question is
linked to *every* chunk of its batch (§3.2). Those links are what the link
predictor learns.

Two query sources:

* :class:`SyntheticQueryGenerator` — the paper's LLM step (our prompt, same
  bracketed output format), concurrent, cached, retried; batches whose call
  fails or whose reply holds no question are counted and get pseudo-queries.
* :func:`pseudo_queries` — the LLM-free stand-in (the paper has none). Honestly:
  these are *not* questions. Query 1 of a batch is a window of at most
  ``max_words`` words of one sentence of the target chunk; query 2 joins such a
  window with one from another chunk of the batch (a crude imitation of a
  multi-hop question that mentions two passages). They teach the predictor
  which chunks a piece of text about the batch should reach, nothing more.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from spacy.language import Language

from ..core.arrays import csr
from ..core.llm import LLMSettings, UsageMeter, reason_of
from ..core.text import split_sentences_batch
from .chunker import parse_bracketed_items, rule_sentencizer
from .prompts import SYNTHETIC_QUERY_PROMPT

logger = logging.getLogger(__name__)


def neighbor_lists(num_chunks: int, rows: np.ndarray, cols: np.ndarray) -> list[np.ndarray]:
    """Sorted neighbour arrays of every chunk from undirected edges ``(rows, cols)``."""
    src = np.concatenate([rows, cols]).astype(np.int64)
    dst = np.concatenate([cols, rows]).astype(np.int64)
    bounds, dst = csr(src, dst, num_chunks, dtype=np.int64)
    return [dst[bounds[i] : bounds[i + 1]] for i in range(num_chunks)]


def sample_batches(
    neighbors: Sequence[np.ndarray], targets: Sequence[int], rng: np.random.Generator
) -> list[np.ndarray]:
    """One batch per target chunk: the target plus ``k_v ~ U{0..deg}`` neighbours (App. A.2).

    Args:
        neighbors: Neighbour arrays of every chunk (mutual kNN graph).
        targets: The chunks to build batches for (all chunks, or the new ones).
        rng: Random generator (seeded by the caller).

    Returns:
        One int array per target, the target first, neighbours in sampled order.
        An isolated chunk gets the batch ``[v]`` (gap G12).
    """
    out = []
    for v in targets:
        nb = neighbors[v]
        k = int(rng.integers(0, len(nb) + 1))
        chosen = rng.choice(nb, size=k, replace=False) if k else np.zeros(0, np.int64)
        out.append(np.concatenate([[v], chosen]).astype(np.int64))
    return out


def _window(sentence: str, max_words: int, rng: np.random.Generator) -> str:
    words = sentence.split()
    if len(words) <= max_words:
        return sentence
    start = int(rng.integers(0, len(words) - max_words + 1))
    return " ".join(words[start : start + max_words])


def chunk_sentences(texts: Sequence[str], nlp: Language | None = None) -> list[list[str]]:
    """Sentences of each text (rule-based splitter; the text itself if it has none).

    Args:
        texts: The texts.
        nlp: The splitter (default: the shared :func:`.chunker.rule_sentencizer`).
    """
    split = split_sentences_batch(list(texts), nlp=nlp or rule_sentencizer())
    return [s or ([t.strip()] if t.strip() else []) for s, t in zip(split, texts, strict=True)]


class ChunkSentences:
    """The :func:`chunk_sentences` of many chunks, kept as offsets into their texts.

    Sentence strings of every chunk at once were the pseudo-query step's
    working set; they died after it, but the index's long-lived objects made
    meanwhile were placed among them and kept their memory resident. Here the
    splitter runs ``block`` texts at a time and keeps only each sentence's
    ``(start, end)`` in one integer array; the strings are cut from the chunk's
    text when a batch asks for them.

    Args:
        texts: Text of each chunk, by chunk row (the rows this object answers for).
        nlp: The sentence splitter.
        block: Texts split per call.
    """

    def __init__(self, texts: Mapping[int, str], nlp: Language, *, block: int = 512) -> None:
        self._texts = texts
        rows = sorted(texts)
        ptr, bounds = array("q", [0]), array("q")
        for start in range(0, len(rows), block):
            part = [texts[r] for r in rows[start : start + block]]
            for text, sentences in zip(part, chunk_sentences(part, nlp), strict=True):
                cursor = 0
                for sentence in sentences:
                    # Sentences come in text order, separated by whitespace only.
                    at = text.find(sentence, cursor)
                    if at < 0:
                        raise RuntimeError(f"sentence not found in its text: {sentence[:60]!r}")
                    cursor = at + len(sentence)
                    bounds.extend((at, cursor))
                ptr.append(len(bounds) // 2)
        self._rows = np.asarray(rows, np.int64)
        self._ptr = np.frombuffer(ptr, np.int64)
        self._bounds = np.frombuffer(bounds, np.int64).reshape(-1, 2)

    def __getitem__(self, row: int) -> list[str]:
        """Sentences of chunk ``row`` (``[]`` for a row not given)."""
        k = int(np.searchsorted(self._rows, row))
        if k == len(self._rows) or self._rows[k] != row:
            return []
        text = self._texts[int(row)]
        spans = self._bounds[self._ptr[k] : self._ptr[k + 1]].tolist()
        return [text[start:end] for start, end in spans]


def pseudo_queries(
    batches: Sequence[np.ndarray],
    sentences: Sequence[Sequence[str]],
    rng: np.random.Generator,
    *,
    per_batch: int = 2,
    max_words: int = 20,
) -> list[list[str]]:
    """LLM-free pseudo-queries for each batch (see the module docs for what they are).

    Args:
        batches: Batches from :func:`sample_batches` (chunk indices, target first).
        sentences: Sentences of every chunk, by chunk index.
        rng: Random generator.
        per_batch: Pseudo-queries per batch (the paper's ``n_B``).
        max_words: Longest window taken from one sentence.

    Returns:
        Distinct pseudo-queries per batch (fewer than ``per_batch`` when the batch
        has too little text).
    """
    out: list[list[str]] = []
    for batch in batches:
        target = sentences[batch[0]]
        queries: dict[str, None] = {}
        if target:
            order = rng.permutation(len(target))
            for j in range(per_batch):
                text = _window(target[order[j % len(order)]], max_words, rng)
                others = [c for c in batch[1:] if sentences[c]]
                if j % 2 == 1 and others:
                    partner = sentences[others[int(rng.integers(0, len(others)))]]
                    extra = _window(partner[int(rng.integers(0, len(partner)))], max_words, rng)
                    text = f"{text} {extra}"
                queries.setdefault(text, None)
        out.append(list(queries))
    return out


class SyntheticQueryGenerator(PromptMixin):
    """LLM-written questions for batches of chunks (LP-RAG Eq. 3, Box D.3 format).

    Args:
        llm: Any LlamaIndex LLM (the index picks it by the suite's rule).
        per_batch: Questions kept per batch (``n_B = 2``; extra ones are dropped,
            conflict C3).
        max_chunk_chars: Each chunk is clipped to this many characters in the prompt.
        min_words: Shortest question kept.
        settings: The LLM call settings (concurrency, retries, time-out, cache;
            see :class:`~..core.llm.LLMSettings`).
        meter: Where calls and tokens are counted (default: a meter of its own,
            :attr:`usage`).
    """

    def __init__(
        self,
        llm: LLM,
        *,
        per_batch: int = 2,
        max_chunk_chars: int = 600,
        min_words: int = 3,
        settings: LLMSettings | None = None,
        meter: UsageMeter | None = None,
    ) -> None:
        if llm is None:
            raise ValueError("SyntheticQueryGenerator needs an LLM")
        if per_batch <= 0 or max_chunk_chars <= 0 or min_words <= 0:
            raise ValueError("per_batch, max_chunk_chars and min_words must be > 0")
        self.llm = llm
        self.per_batch = per_batch
        self.max_chunk_chars = max_chunk_chars
        self.min_words = min_words
        self.prompt: BasePromptTemplate = SYNTHETIC_QUERY_PROMPT
        self.caller = (settings or LLMSettings()).new_caller(llm, meter=meter)
        self.stats: dict[str, int] = {}
        #: One reason per batch that got no question (the caller counts them as fallbacks).
        self.failures: list[str] = []

    def _get_prompts(self) -> PromptDictType:
        return {"synthetic_query_prompt": self.prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "synthetic_query_prompt" in prompts:
            self.prompt = prompts["synthetic_query_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    @property
    def usage(self) -> UsageMeter:
        """LLM calls and tokens spent by this generator."""
        return self.caller.meter

    def format(self, chunk_texts: Sequence[str]) -> str:
        """The prompt for one batch."""
        body = "\n".join(
            f"[Passage {i + 1}] {' '.join(t.split())[: self.max_chunk_chars]}"
            for i, t in enumerate(chunk_texts)
        )
        return self.prompt.format(
            chunks=body, num_chunks=len(chunk_texts), num_queries=self.per_batch
        )

    def parse(self, answer: str) -> list[str]:
        """Questions in a reply (bracketed or listed lines), at most ``per_batch``."""
        items = [q for q in parse_bracketed_items(answer) if len(q.split()) >= self.min_words]
        return items[: self.per_batch]

    def generate(
        self, batch_texts: Sequence[Sequence[str]], *, show_progress: bool = False
    ) -> list[list[str]]:
        """Questions for each batch; ``[]`` where the call failed or gave nothing usable.

        Failures and unusable replies are counted in :attr:`stats`, their reasons
        kept in :attr:`failures`.
        """
        prompts = [self.format(texts) for texts in batch_texts]
        budget = 48 * self.per_batch + 48

        async def ask(prompt: str) -> str:
            # Unusable replies stay out of the cache, so a rerun asks again.
            reply = await self.caller.acomplete(
                prompt, max_tokens=budget, accept=lambda a: bool(self.parse(a))
            )
            return reply.text

        answers: list[Any] = self.caller.map(
            prompts, ask, show_progress=show_progress, desc="Synthetic queries"
        )
        out: list[list[str]] = []
        failed = empty = 0
        self.failures = []
        for answer in answers:
            if isinstance(answer, BaseException):
                failed += 1
                self.failures.append(reason_of(answer))
                out.append([])
                continue
            questions = self.parse(answer)
            if not questions:
                empty += 1
                self.failures.append("unusable reply")
            out.append(questions)
        self.stats = {
            "batches": len(prompts),
            "failed_calls": failed,
            "unusable_answers": empty,
            "queries": sum(len(q) for q in out),
        }
        return out
