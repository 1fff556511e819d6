"""Query nodes of the query-centric graph: generated question-answer pairs or sentences.

Paper §3.3 (indexing steps 1-2):

1. *Extended Doc2Query*: an LLM writes ``M`` question-answer pairs grounded in
   each chunk (:class:`Doc2QueryGenerator`).
2. *Extended Doc2Query--*: the pairs are embedded as ``query ⊕ answer`` and only
   the top ``alpha`` fraction per chunk by cosine to the chunk is kept
   (:func:`doc2query_minus`).

The paper's "Sentence Nodes" ablation (§4.2, Fig. 4) replaces the LLM pairs by
the chunk's sentences: :class:`SentenceQueryGenerator`, the LLM-free tier.

Both are LlamaIndex ``TransformComponent`` s: inside an ``IngestionPipeline``
they write the kept nodes into each chunk's metadata under :data:`QUERY_NODES_KEY`
(excluded from what the embedder and the LLM see), and
:class:`~llama_index_graphrag_ext.qcg.index.QueryCentricGraphIndex` reuses them
instead of generating again.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent
from pydantic import Field, PrivateAttr

from ..core.defaults import resolve_embed_model
from ..core.embeddings import embed_texts
from ..core.llm import (
    LLMCaller,
    LLMChoice,
    LLMOutputError,
    LLMSettings,
    LLMSteps,
    UsageMeter,
    choose_llm,
    is_embedded,
    reason_of,
    run_sync,
)
from ..core.text import load_spacy, split_sentences_batch
from .parsing import QAPairs, dedupe_pairs, parse_pairs
from .prompts import DOC2QUERY_LINES_PROMPT, DOC2QUERY_PROMPT, DOC2QUERY_REPAIR_NOTE

logger = logging.getLogger(__name__)

#: Chunk metadata key holding the kept query nodes (written by the generators).
QUERY_NODES_KEY = "qcg_query_nodes"
#: The LLM step's name in the step ledger.
STEP = "doc2query"

NodeFormat = Literal["query+answer", "query", "answer"]


@dataclass(frozen=True, slots=True)  # slots: one per query node, a quarter of a million at 64k
class QueryPair:
    """One query node before embedding.

    Attributes:
        chunk_id: The chunk it was generated from (its ``E_inter`` edge).
        index: Position among the chunk's generated pairs (the paper's ``z`` in ``x-y-z``).
        query: The question (or the sentence, for sentence nodes).
        answer: The answer ("" for sentence nodes).
        kind: ``"qa"`` (LLM pair) or ``"sentence"``.
        filter_score: Cosine of the node text to its chunk (Doc2Query--), if computed.
    """

    chunk_id: str
    index: int
    query: str
    answer: str = ""
    kind: str = "qa"
    filter_score: float | None = None

    @property
    def node_id(self) -> str:
        """``<chunk id>::q<index>`` (``::s<index>`` for sentences)."""
        return f"{self.chunk_id}::{'s' if self.kind == 'sentence' else 'q'}{self.index}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (stored in chunk metadata and in the persisted index)."""
        return {
            "index": self.index,
            "query": self.query,
            "answer": self.answer,
            "kind": self.kind,
            "score": self.filter_score,
        }

    @classmethod
    def from_dict(cls, chunk_id: str, data: dict[str, Any]) -> QueryPair:
        """Inverse of :meth:`to_dict`."""
        return cls(
            chunk_id=chunk_id,
            index=int(data["index"]),
            query=str(data["query"]),
            answer=str(data.get("answer") or ""),
            kind=str(data.get("kind") or "qa"),
            filter_score=None if data.get("score") is None else float(data["score"]),
        )


def node_text(pair: QueryPair, node_format: str = "query+answer", separator: str = " ") -> str:
    """The text a query node is embedded as (paper §3.3: ``q ⊕ a``).

    The paper leaves the concatenation format open (digest §8.12); we join with
    ``separator``. ``node_format`` selects the ablation variants of Fig. 4:
    ``query+answer`` (default), ``query`` or ``answer``. Sentence nodes are
    always their sentence.
    """
    if pair.kind == "sentence" or not pair.answer:
        return pair.query
    if node_format == "query":
        return pair.query
    if node_format == "answer":
        return pair.answer
    return f"{pair.query}{separator}{pair.answer}"


def keep_count(m: int, alpha: float) -> int:
    """How many of ``m`` pairs the top-``alpha`` filter keeps: ``round(alpha * m)``, at least 1.

    Rounding is half-up (the paper, with ``M=20`` and ``alpha=0.8``, keeps an
    integer 16; digest §8.13).
    """
    if m <= 0:
        return 0
    return max(1, min(m, math.floor(alpha * m + 0.5)))


def doc2query_minus(
    pair_vectors: np.ndarray, chunk_vector: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """Extended Doc2Query-- (paper §3.3 step 2): the top ``alpha`` of a chunk's pairs.

    Args:
        pair_vectors: ``(m, d)`` unit rows, the embedded ``query ⊕ answer`` texts.
        chunk_vector: ``(d,)`` unit vector of the chunk.
        alpha: Fraction kept, in ``(0, 1]``.

    Returns:
        ``(kept, scores)``: indices of the kept pairs in their original order,
        and every pair's cosine to the chunk.
    """
    scores = pair_vectors @ chunk_vector if len(pair_vectors) else np.zeros(0, np.float32)
    n_keep = keep_count(len(scores), alpha)
    # Stable: equal scores keep the earlier pair.
    order = np.argsort(-scores, kind="stable")[:n_keep]
    return np.sort(order), scores.astype(np.float32)


@dataclass
class GeneratedNodes:
    """What a generator produced for a batch of chunks.

    Attributes:
        pairs: The kept query nodes, grouped by chunk in input order.
        vectors: Their embeddings (``(len(pairs), d)`` unit rows) when the
            generator computed them (Doc2Query-- needs them), else None.
        stats: Counts for logs and reports.
        chunk_vectors: Embeddings of the input chunks, in input order, when the
            generator computed them (Doc2Query-- does), else None.
    """

    pairs: list[QueryPair]
    vectors: np.ndarray | None = None
    stats: dict[str, int] = field(default_factory=dict)
    chunk_vectors: np.ndarray | None = None


def _chunk_text(node: BaseNode) -> str:
    return node.get_content(metadata_mode=MetadataMode.EMBED)


def _exclude_key(node: BaseNode) -> None:
    for attr in ("excluded_embed_metadata_keys", "excluded_llm_metadata_keys"):
        keys = list(getattr(node, attr))
        if QUERY_NODES_KEY not in keys:
            setattr(node, attr, [*keys, QUERY_NODES_KEY])


class QueryNodeGenerator(TransformComponent):
    """Base of the two query-node sources; see the module docs."""

    node_format: NodeFormat = Field(
        default="query+answer", description="Node text: query+answer (paper), query or answer."
    )
    separator: str = Field(default=" ", description="Joins query and answer in the node text.")
    show_progress: bool = Field(default=False, description="Show progress bars.")

    def text_of(self, pair: QueryPair) -> str:
        """The embedded text of a query node."""
        return node_text(pair, self.node_format, self.separator)

    def generate(self, chunks: Sequence[BaseNode]) -> GeneratedNodes:
        """Build the query nodes of ``chunks``."""
        raise NotImplementedError

    async def agenerate(self, chunks: Sequence[BaseNode]) -> GeneratedNodes:
        """Async :meth:`generate` (default: the sync one)."""
        return self.generate(chunks)

    def config(self) -> dict[str, Any]:
        """Plain settings (persisted with an index, to rebuild the generator on load)."""
        data = self.model_dump(
            exclude={"llm", "embed_model", "callback_manager", "prompt", "lines_prompt"}
        )
        data.pop("show_progress", None)
        data.pop("class_name", None)
        return data

    @staticmethod
    def _annotate(chunks: Sequence[BaseNode], result: GeneratedNodes) -> list[BaseNode]:
        by_chunk: dict[str, list[dict[str, Any]]] = {c.node_id: [] for c in chunks}
        for pair in result.pairs:
            by_chunk[pair.chunk_id].append(pair.to_dict())
        for chunk in chunks:
            chunk.metadata[QUERY_NODES_KEY] = by_chunk[chunk.node_id]
            _exclude_key(chunk)
        return list(chunks)

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Write each chunk's query nodes into its metadata (``IngestionPipeline`` use)."""
        return self._annotate(nodes, self.generate(nodes))

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Async :meth:`__call__`."""
        return self._annotate(nodes, await self.agenerate(nodes))


#: Chunks split per spaCy stream by :class:`SentenceQueryGenerator`.
_SPLIT_BATCH = 256


class SentenceQueryGenerator(QueryNodeGenerator):
    """LLM-free query nodes: each sentence of a chunk (the paper's "Sentence Nodes").

    Our additions to the ablation, both optional and documented on the docs page:
    ``title_prefix`` prepends the chunk's ``metadata[title_key]`` to every
    sentence (a sentence such as "It was founded in 1963." is otherwise
    unanchored), and ``alpha < 1`` applies the Doc2Query-- filter to sentences.

    Args:
        title_prefix: Prefix each sentence with the chunk's title, when it has one.
        title_key: Metadata key of the title.
        min_chars: Sentences shorter than this are merged into the next one.
        splitter: ``spacy`` (the dependency parse of ``en_core_web_sm``) or
            ``rule`` (spaCy's punctuation sentencizer; several times faster).
        alpha: Fraction of sentences kept per chunk by cosine to the chunk (1 keeps all).
        embed_model: Embedder for the filter (only used when ``alpha < 1``).
    """

    title_prefix: bool = Field(default=True, description="Prefix sentences with the title.")
    title_key: str = Field(default="title", description="Metadata key of the chunk title.")
    min_chars: int = Field(default=12, ge=0, description="Shorter sentences join the next.")
    splitter: Literal["spacy", "rule"] = Field(default="rule", description="Sentence splitter.")
    alpha: float = Field(default=1.0, gt=0, le=1, description="Fraction of sentences kept.")
    embed_model: BaseEmbedding | None = Field(
        default=None, description="Embedder for the alpha filter (Settings fallback).", exclude=True
    )

    @classmethod
    def class_name(cls) -> str:
        return "SentenceQueryGenerator"

    def _nlp(self):
        if self.splitter == "spacy":
            return load_spacy()
        import spacy

        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        return nlp

    def _sentences(self, chunk: BaseNode, sentences: list[str]) -> list[str]:
        title = str(chunk.metadata.get(self.title_key) or "").strip() if self.title_prefix else ""
        out: list[str] = []
        carry = ""
        for sentence in sentences:
            # The benchmark convention puts the title on the text's first line.
            if title and not out and not carry and sentence.startswith(title + "\n"):
                sentence = sentence[len(title) + 1 :].strip()
            sentence = " ".join(sentence.split())
            if not sentence:
                continue
            if len(carry) + len(sentence) < self.min_chars:
                carry = f"{carry} {sentence}".strip()
                continue
            sentence = f"{carry} {sentence}".strip()
            carry = ""
            out.append(f"{title}: {sentence}" if title and sentence != title else sentence)
        if carry and out:  # a short last sentence joins the previous one
            out[-1] = f"{out[-1]} {carry}"
        elif carry:
            out.append(f"{title}: {carry}" if title and carry != title else carry)
        return out

    def generate(self, chunks: Sequence[BaseNode]) -> GeneratedNodes:
        """Split every chunk into sentence nodes (one spaCy stream per batch of chunks)."""
        nlp = self._nlp()
        pairs: list[QueryPair] = []
        stats = {"chunks": len(chunks), "sentences": 0, "kept": 0, "empty_chunks": 0}
        per_chunk: list[list[QueryPair]] = []
        # In batches: the splitter's output for a whole corpus, alive while the
        # query nodes (which outlive the build) were made among it, kept its
        # memory resident after the build (docs/scaling.md, "Memory").
        for start in range(0, len(chunks), _SPLIT_BATCH):
            batch = chunks[start : start + _SPLIT_BATCH]
            split = split_sentences_batch([c.get_content() for c in batch], nlp)
            for chunk, sentences in zip(batch, split, strict=True):
                nodes = [
                    QueryPair(chunk.node_id, i, s, "", "sentence")
                    for i, s in enumerate(self._sentences(chunk, sentences))
                ]
                if not nodes:  # a chunk with no sentence boundary is one node
                    stats["empty_chunks"] += 1
                    text = " ".join(chunk.get_content().split())
                    nodes = [QueryPair(chunk.node_id, 0, text, "", "sentence")] if text else []
                per_chunk.append(nodes)
                stats["sentences"] += len(nodes)
            del split
        vectors = None
        if self.alpha < 1.0 and per_chunk:
            embed = resolve_embed_model(self.embed_model)
            all_nodes = [p for nodes in per_chunk for p in nodes]
            all_vecs = embed_texts(embed, [self.text_of(p) for p in all_nodes])
            chunk_vecs = embed_texts(embed, [_chunk_text(c) for c in chunks])
            kept_rows, start = [], 0
            for ci, nodes in enumerate(per_chunk):
                rows = np.arange(start, start + len(nodes))
                keep, scores = doc2query_minus(all_vecs[rows], chunk_vecs[ci], self.alpha)
                for j in keep:
                    pairs.append(_with_score(nodes[j], float(scores[j])))
                    kept_rows.append(rows[j])
                start += len(nodes)
            vectors = all_vecs[kept_rows]
        else:
            pairs = [p for nodes in per_chunk for p in nodes]
            chunk_vecs = None
        stats["kept"] = len(pairs)
        return GeneratedNodes(pairs, vectors, stats, chunk_vecs)


def _with_score(pair: QueryPair, score: float) -> QueryPair:
    return QueryPair(pair.chunk_id, pair.index, pair.query, pair.answer, pair.kind, score)


class Doc2QueryGenerator(QueryNodeGenerator, LLMSettings, PromptMixin):
    """Extended Doc2Query + Doc2Query-- (paper §3.3): LLM question-answer pairs per chunk.

    For each chunk the LLM writes ``num_pairs`` pairs grounded in it (one call
    per chunk, concurrent, cached, retried; see :class:`~..core.llm.LLMCaller`).
    A capable LLM is asked for :class:`~.parsing.QAPairs` as structured output
    (JSON schema or a tool call where it supports them, else JSON in the reply,
    read tolerantly); the embedded SmolLM2 writes ``Q: ... A: ...`` lines. An
    unusable reply is asked again ``repair_attempts`` times. A chunk whose
    pairs cannot be had gets its sentence nodes (the paper's LLM-free
    ablation): a WARNING counts such chunks, and so do :attr:`stats` and
    :attr:`llm_steps`; with ``on_llm_failure="raise"`` it is an error.

    Args:
        llm: The generator; without one the suite's rule picks it once
            (``Settings.llm``, the environment, the embedded SmolLM2).
        embed_model: Embedder for the Doc2Query-- filter; falls back to ``Settings``.
        num_pairs: ``M``, pairs requested per chunk (paper: 20).
        alpha: Fraction of each chunk's pairs kept by cosine to the chunk (paper: 0.8).
        output_format: ``json`` (the paper's), ``lines`` (``Q: .. A: ..``) or
            ``auto`` (``lines`` for the embedded SmolLM2, else ``json``).
        max_chunk_chars: Longer chunks are cut before prompting (small context windows).
        repair_attempts: Re-asks after an unusable reply.
        max_concurrency, max_attempts, timeout, cache_path, on_llm_failure: See
            :class:`~..core.llm.LLMSettings`.
    """

    llm: LLM | None = Field(default=None, description="Generator LLM (the suite's rule when None).")
    embed_model: BaseEmbedding | None = Field(
        default=None, description="Embedder for Doc2Query-- (Settings fallback).", exclude=True
    )
    num_pairs: int = Field(default=20, gt=0, description="M: pairs requested per chunk.")
    alpha: float = Field(default=0.8, gt=0, le=1, description="Doc2Query-- fraction kept.")
    output_format: Literal["auto", "json", "lines"] = Field(
        default="auto", description="Requested output format."
    )
    max_chunk_chars: int = Field(default=6000, gt=0, description="Chunk text cut for prompting.")
    repair_attempts: int = Field(default=1, ge=0, description="Re-asks after unusable output.")
    prompt: BasePromptTemplate = Field(
        default=DOC2QUERY_PROMPT, description="JSON prompt (num_pairs, chunk)."
    )
    lines_prompt: BasePromptTemplate = Field(
        default=DOC2QUERY_LINES_PROMPT, description="Line-format prompt (num_pairs, chunk)."
    )

    _caller: LLMCaller | None = PrivateAttr(default=None)
    _choice: LLMChoice | None = PrivateAttr(default=None)
    _planned: bool = PrivateAttr(default=False)
    _steps: LLMSteps = PrivateAttr(default_factory=lambda: LLMSteps("QCG Doc2Query"))

    @classmethod
    def class_name(cls) -> str:
        return "Doc2QueryGenerator"

    # -- prompts (PromptMixin)
    def _get_prompts(self) -> PromptDictType:
        return {"doc2query_prompt": self.prompt, "doc2query_lines_prompt": self.lines_prompt}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if "doc2query_prompt" in prompts_dict:
            self.prompt = prompts_dict["doc2query_prompt"]
        if "doc2query_lines_prompt" in prompts_dict:
            self.lines_prompt = prompts_dict["doc2query_lines_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    # -- the LLM, picked once
    @property
    def llm_steps(self) -> LLMSteps:
        """Which LLM and tier the step used, items and fallbacks (see :mod:`~..core.llm.steps`)."""
        return self._steps

    def attach_steps(self, steps: LLMSteps, choice: LLMChoice | None = None) -> None:
        """Record into ``steps`` (an index's ledger) from now on; ``choice``: the index's LLM.

        The index's choice is used only when this generator was given no LLM.
        """
        self._steps = steps
        if choice is not None and (self.llm is None or self.llm is choice.llm):
            self._choice = choice
        self._planned = False

    def caller(self) -> LLMCaller | None:
        """The caller of the planned LLM (``None``: the step runs LLM-free, on sentences)."""
        if not self._planned:
            choice = self._choice or choose_llm(self.llm)
            needs = "json" if self.output_format == "json" else "text"
            llm = self._steps.plan(
                STEP,
                choice,
                needs=needs,
                stand_in="sentence nodes",
                on_failure=self.on_llm_failure,
            )
            self.llm = choice.llm
            self._caller = self.new_caller(llm) if llm is not None else None
            self._planned = True
        return self._caller

    @property
    def usage(self) -> UsageMeter:
        """LLM calls and tokens spent so far."""
        caller = self.caller()
        return caller.meter if caller is not None else UsageMeter()

    def resolved_format(self) -> str:
        """The output format actually requested (``auto`` resolved)."""
        if self.output_format != "auto":
            return self.output_format
        return "lines" if is_embedded(self.llm) else "json"

    def prompt_for(self, chunk_text: str) -> str:
        """The generation prompt of one chunk."""
        template = self.lines_prompt if self.resolved_format() == "lines" else self.prompt
        return template.format(num_pairs=self.num_pairs, chunk=chunk_text[: self.max_chunk_chars])

    def reply_budget(self) -> int:
        """``max_tokens`` of one reply: about 40 tokens a pair (JSON costs a little more)."""
        per_pair = 40 if self.resolved_format() == "lines" else 48
        return self.num_pairs * per_pair + 64

    async def _pairs_of(self, chunk_text: str) -> tuple[list[tuple[str, str]], int]:
        """Pairs of one chunk and the number of re-asks it took."""
        caller = self.caller()
        prompt = self.prompt_for(chunk_text)
        if self.resolved_format() == "json" and caller.mode != "text":
            found = await caller.astructured(
                prompt,
                QAPairs,
                max_tokens=self.reply_budget(),
                repair_attempts=self.repair_attempts,
                check=_has_pairs,
            )
            return dedupe_pairs([(p.query, p.answer) for p in found.pairs])[: self.num_pairs], 0
        current = prompt
        for attempt in range(self.repair_attempts + 1):
            # Unusable replies stay out of the cache, so a rerun asks again. A
            # line list still cut after the re-asks with more room (the embedded
            # SmolLM2's own output ceiling) keeps its complete lines: its last
            # pair may be cut, so it is dropped and the reply counted as cut.
            reply = await caller.acomplete(
                current,
                max_tokens=self.reply_budget(),
                accept=lambda t: bool(parse_pairs(t)),
                allow_cut=True,
            )
            pairs = parse_pairs(reply.text)
            if reply.finish_reason == "length":
                pairs = pairs[:-1]
            if pairs:
                return pairs[: self.num_pairs], attempt
            current = prompt + DOC2QUERY_REPAIR_NOTE
        raise LLMOutputError("no question-answer pairs in the reply", raw=reply.raw)

    async def agenerate(self, chunks: Sequence[BaseNode]) -> GeneratedNodes:
        """Generate, parse, embed and filter the pairs of ``chunks``."""
        stats = {"chunks": len(chunks), "pairs_generated": 0, "kept": 0, "repairs": 0}
        stats.update(fallback_chunks=0)
        if not chunks:
            return GeneratedNodes([], None, stats)
        caller = self.caller()
        texts = [_chunk_text(c) for c in chunks]
        self._steps.count(STEP, len(chunks))
        if caller is None:  # planned LLM-free: every chunk gets its sentences
            results: list[Any] = [None] * len(chunks)
        else:
            results = await caller.amap(
                texts, self._pairs_of, show_progress=self.show_progress, desc="Doc2Query"
            )
        per_chunk: list[list[QueryPair]] = []
        failed: list[int] = []
        reasons: list[str] = []
        for i, (chunk, result) in enumerate(zip(chunks, results, strict=True)):
            if result is None or isinstance(result, BaseException):
                failed.append(i)
                per_chunk.append([])
                if result is not None:
                    reasons.append(reason_of(result))
                    logger.debug("Doc2Query failed for chunk %s: %s", chunk.node_id, result)
                continue
            pairs, repairs = result
            stats["repairs"] += repairs
            stats["pairs_generated"] += len(pairs)
            per_chunk.append(
                [QueryPair(chunk.node_id, j, q, a, "qa") for j, (q, a) in enumerate(pairs)]
            )
        if reasons:  # WARNING with the count; raises with on_llm_failure="raise"
            self._steps.fell_back(STEP, reasons, what="chunk", on_failure=self.on_llm_failure)
        if failed:
            fallback = SentenceQueryGenerator(title_prefix=True).generate(
                [chunks[i] for i in failed]
            )
            by_chunk: dict[str, list[QueryPair]] = {}
            for pair in fallback.pairs:
                by_chunk.setdefault(pair.chunk_id, []).append(pair)
            for i in failed:
                per_chunk[i] = by_chunk.get(chunks[i].node_id, [])
            stats["fallback_chunks"] = len(failed)
        # Doc2Query-- (paper §3.3 step 2): embed q ⊕ a and keep the top alpha per chunk.
        embed = resolve_embed_model(self.embed_model)
        all_pairs = [p for nodes in per_chunk for p in nodes]
        pair_vecs = await asyncio.to_thread(
            embed_texts, embed, [self.text_of(p) for p in all_pairs]
        )
        chunk_vecs = await asyncio.to_thread(embed_texts, embed, texts)
        kept: list[QueryPair] = []
        kept_rows: list[int] = []
        start = 0
        for ci, nodes in enumerate(per_chunk):
            rows = np.arange(start, start + len(nodes))
            start += len(nodes)
            if not len(nodes):
                continue
            if nodes[0].kind == "sentence":  # fallback nodes are not filtered
                keep, scores = np.arange(len(nodes)), pair_vecs[rows] @ chunk_vecs[ci]
            else:
                keep, scores = doc2query_minus(pair_vecs[rows], chunk_vecs[ci], self.alpha)
            for j in keep:
                kept.append(_with_score(nodes[j], float(scores[j])))
                kept_rows.append(int(rows[j]))
        stats["kept"] = len(kept)
        if caller is not None:
            meter = caller.meter.snapshot()
            stats.update(llm_calls=meter["calls"], cache_hits=meter["cache_hits"])
        vectors = pair_vecs[kept_rows] if kept_rows else pair_vecs[:0]
        return GeneratedNodes(kept, vectors, stats, chunk_vecs)

    def generate(self, chunks: Sequence[BaseNode]) -> GeneratedNodes:
        """Sync :meth:`agenerate` (the LLM calls run on the suite's event loop)."""
        return run_sync(lambda: self.agenerate(chunks))


def _has_pairs(found: QAPairs) -> QAPairs:
    if not dedupe_pairs([(p.query, p.answer) for p in found.pairs]):
        raise ValueError("no usable question-answer pair")
    return found
