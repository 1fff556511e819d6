"""Hybrid knowledge-unit extraction (CUE-RAG §3.2, Algorithms 1 and 2).

Chunks picked by Chunk-Selection (a knapsack under ``alpha`` of the corpus's
tokens, see :mod:`.selection`) are rewritten by an LLM into self-contained
knowledge units; every other chunk is split into sentences, each one a unit.
spaCy NER then finds the entities of every unit (Alg. 1, lines 12-14).

``alpha = 0`` is the fully LLM-free mode: no LLM object is created or needed.
The embedded SmolLM2 cannot write the JSON this step needs, so with it the
chosen chunks fall back to sentences (logged and counted), as DESIGN.md asks.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    TextNode,
    TransformComponent,
)
from pydantic import Field, PrivateAttr, SerializeAsAny

from ..core.cache import LLMCache
from ..core.defaults import resolve_embed_model, resolve_llm
from ..core.embeddings import embed_texts
from ..core.llm import LLMOutputError, RetryPolicy, StructuredLLM, UsageMeter
from ..core.nlp import (
    DEFAULT_ENTITY_LABELS,
    Entity,
    analyze_batch,
    count_tokens,
    extract_entities_batch,
    load_spacy,
    normalize_entity,
)
from .prompts import UNIT_EXTRACTION_PROMPT
from .selection import (
    SELECTION_STRATEGIES,
    KnapsackResult,
    bleu_values,
    cosine_values,
    knapsack,
    random_values,
    token_budget,
)

logger = logging.getLogger(__name__)

#: Label given to a chunk's title when it is linked to all of the chunk's units.
TITLE_LABEL = "TITLE"


@dataclass(frozen=True)
class UnitEntity:
    """An entity of a knowledge unit.

    Attributes:
        key: The normalised key entity nodes are merged under
            (:func:`~llama_index_graphrag_ext.core.nlp.normalize_entity`).
        name: The surface form as first seen.
        label: The spaCy label (or ``TITLE``).
    """

    key: str
    name: str
    label: str


@dataclass
class KnowledgeUnit:
    """One knowledge unit of a chunk.

    Attributes:
        text: The statement.
        source: ``"llm"`` (extracted by the LLM) or ``"sentence"`` (a sentence of the chunk).
        entities: Its entities, each key once.
    """

    text: str
    source: str
    entities: list[UnitEntity] = field(default_factory=list)

    @property
    def unit_id(self) -> str:
        """Content-addressed id: the same statement is the same unit node in any chunk."""
        return unit_id(self.text)


def unit_id(text: str) -> str:
    """The node id of a knowledge unit with this text."""
    digest = hashlib.sha1(" ".join(text.split()).encode("utf-8", "surrogatepass")).hexdigest()
    return f"unit:{digest[:20]}"


@dataclass
class ExtractionResult:
    """What :meth:`KnowledgeUnitExtractor.extract` produced.

    Attributes:
        units: One list of units per input chunk, in input order.
        selected: Indices of the chunks Chunk-Selection picked for the LLM.
        stats: Counts for reports: chunks, tokens, budget, LLM chunks and
            fallbacks, units, entities, LLM usage (``llm_total_tokens``).
    """

    units: list[list[KnowledgeUnit]]
    selected: list[int]
    stats: dict[str, Any]


def _is_embedded_llm(llm: Any) -> bool:
    """Whether ``llm`` is the bundled SmolLM2 (too small for JSON extraction)."""
    path = str(getattr(llm, "model_path", "") or "")
    return "smollm2" in path.lower() or "smollm2" in str(getattr(llm, "model_url", "")).lower()


def _validate_units(value: Any) -> list[str]:
    """Accept ``{"units": [...]}`` (any key containing "unit") or a bare list of strings."""
    if isinstance(value, dict):
        keys = [k for k in value if "unit" in str(k).lower()]
        if not keys and len(value) == 1:
            keys = list(value)
        if not keys:
            raise ValueError(f"expected a 'units' key, got {sorted(map(str, value))}")
        value = value[keys[0]]
    if not isinstance(value, list):
        raise ValueError(f"expected a list of units, got {type(value).__name__}")
    units = [" ".join(str(u).split()) for u in value if isinstance(u, (str, int, float))]
    units = [u for u in units if u]
    if not units:
        raise ValueError("no knowledge units in the answer")
    return units


class KnowledgeUnitExtractor(TransformComponent, PromptMixin):
    """Turn chunks into knowledge units with entities (CUE-RAG's hybrid extraction).

    As a ``TransformComponent`` it maps chunk nodes to unit ``TextNode`` s (each
    with a ``SOURCE`` link to its chunk and its entities in metadata), so it can
    run inside an ``IngestionPipeline``; :class:`.MultiPartiteIndex` calls
    :meth:`extract` directly.

    Args:
        alpha: Share of the corpus's tokens that may go to the LLM (Alg. 2);
            0 is LLM-free, 1 sends every chunk.
        selection: Chunk value for the knapsack: ``bleu`` (the paper's default),
            ``cos`` or ``random`` (§4.3).
        llm: The extraction LLM (only resolved when ``alpha > 0``).
        embed_model: Embedder for the ``cos`` strategy.
    """

    alpha: float = Field(default=0.0, ge=0.0, le=1.0, description="LLM token share (Alg. 2).")
    selection: Literal["bleu", "cos", "random"] = Field(
        default="bleu", description="Chunk value used by the knapsack (§4.3)."
    )
    bleu_max_n: int = Field(default=4, gt=0, description="Longest n-gram order of BLEU.")
    knapsack_max_cells: int = Field(
        default=50_000_000, gt=0, description="Largest knapsack DP table before weight rounding."
    )
    seed: int = Field(default=0, description="Seed of the random strategy.")
    spacy_model: str | None = Field(
        default=None, description="spaCy pipeline for sentences and NER (None: default chain)."
    )
    entity_labels: list[str] | None = Field(
        default_factory=lambda: sorted(DEFAULT_ENTITY_LABELS),
        description="spaCy entity labels kept (None keeps all).",
    )
    title_entity: bool = Field(
        default=True,
        description=(
            "Link the chunk's title (metadata key `title_key`) to each of its units as an "
            "entity: an LLM-free stand-in for the pronoun resolution of LLM units."
        ),
    )
    title_key: str = Field(default="title", description="Metadata key of a chunk's title.")
    min_unit_chars: int = Field(default=3, gt=0, description="Shorter units are dropped.")
    num_workers: int = Field(default=4, gt=0, description="Concurrent LLM calls.")
    repair_attempts: int = Field(default=1, ge=0, description="Re-asks after unusable JSON.")
    max_attempts: int = Field(default=3, gt=0, description="Attempts per LLM call (retries).")
    timeout: float | None = Field(default=120.0, gt=0, description="Seconds per LLM attempt.")
    allow_weak_llm: bool = Field(
        default=False, description="Use the embedded SmolLM2 for extraction anyway."
    )
    cache_path: str | None = Field(default=None, description="sqlite file for the LLM cache.")
    show_progress: bool = Field(default=False, description="Show progress bars.")
    llm: SerializeAsAny[LLM] | None = Field(
        default=None, description="Extraction LLM (resolved only when alpha > 0).", exclude=True
    )
    embed_model: SerializeAsAny[BaseEmbedding] | None = Field(
        default=None, description="Embedder for the cos strategy.", exclude=True
    )

    _prompt: BasePromptTemplate = PrivateAttr(default=UNIT_EXTRACTION_PROMPT)
    _meter: UsageMeter = PrivateAttr(default_factory=UsageMeter)

    @classmethod
    def class_name(cls) -> str:
        return "KnowledgeUnitExtractor"

    # ------------------------------------------------------------- prompts

    def _get_prompts(self) -> PromptDictType:
        return {"unit_extraction": self._prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "unit_extraction" in prompts:
            self._prompt = prompts["unit_extraction"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    @property
    def usage(self) -> UsageMeter:
        """LLM usage of every extraction run by this extractor."""
        return self._meter

    def settings(self) -> dict[str, Any]:
        """The JSON-ready settings (what an index stores in its manifest)."""
        return self.model_dump(exclude={"llm", "embed_model", "show_progress", "class_name"})

    # ------------------------------------------------------------ selection

    def select(self, texts: Sequence[str], weights: Sequence[int]) -> tuple[list[int], dict]:
        """Chunk-Selection (Alg. 2): the chunks whose units the LLM writes.

        Args:
            texts: Chunk texts.
            weights: Their token counts.

        Returns:
            ``(indices, info)`` with the budget and the knapsack's report.
        """
        n = len(texts)
        budget = token_budget(weights, self.alpha)
        info: dict[str, Any] = {"token_budget": budget, "tokens_total": int(sum(weights))}
        if n == 0 or budget == 0:
            return [], info
        if budget >= info["tokens_total"]:  # alpha = 1 (or budget covers all): everything
            return list(range(n)), info
        if self.selection == "bleu":
            values = bleu_values(texts, self.bleu_max_n)
        elif self.selection == "cos":
            embed = resolve_embed_model(self.embed_model)
            values = cosine_values(embed_texts(embed, list(texts)))
        elif self.selection == "random":
            values = random_values(n, self.seed)
        else:  # pragma: no cover - pydantic validates
            raise ValueError(f"selection must be one of {SELECTION_STRATEGIES}")
        # Values of 0 (e.g. a one-word chunk) still deserve the LLM if the budget allows.
        result: KnapsackResult = knapsack(
            weights, values + 1e-9, budget, max_cells=self.knapsack_max_cells
        )
        info.update(
            knapsack_value=round(result.value, 6),
            knapsack_granularity=result.granularity,
            knapsack_greedy_added=result.greedy_added,
        )
        return result.chosen, info

    # ----------------------------------------------------------- extraction

    def _resolve_llm(self, n_selected: int) -> LLM | None:
        llm = self.llm if self.llm is not None else resolve_llm(None)
        if llm is None:
            logger.warning(
                "alpha=%s but no LLM is configured: the %d chosen chunk(s) become sentences",
                self.alpha,
                n_selected,
            )
            return None
        if _is_embedded_llm(llm) and not self.allow_weak_llm:
            logger.warning(
                "The embedded SmolLM2 cannot write knowledge units as JSON; the %d chunk(s) "
                "chosen for the LLM fall back to sentences (pass allow_weak_llm=True to try).",
                n_selected,
            )
            return None
        return llm

    def _structured(self, llm: LLM) -> StructuredLLM:
        cache = LLMCache(Path(self.cache_path)) if self.cache_path else None
        return StructuredLLM(
            llm,
            cache=cache,
            retry=RetryPolicy(max_attempts=self.max_attempts, timeout=self.timeout),
            max_concurrency=self.num_workers,
            meter=self._meter,
        )

    async def _allm_units(self, llm: LLM, texts: Sequence[str]) -> list[list[str] | Exception]:
        structured = self._structured(llm)

        async def one(text: str) -> list[str]:
            prompt = self._prompt.format(passage=text)
            return await structured.ajson(
                prompt, validate=_validate_units, repair_attempts=self.repair_attempts
            )

        return await structured.amap(
            list(texts), one, show_progress=self.show_progress, desc="Knowledge units"
        )

    def _llm_units(self, llm: LLM, texts: Sequence[str]) -> list[list[str] | Exception]:
        from ..core.llm import run_sync

        return run_sync(lambda: self._allm_units(llm, texts))

    def extract(self, nodes: Sequence[BaseNode]) -> ExtractionResult:
        """Run Chunk-Selection, LLM extraction for the chosen chunks, sentences for the rest, NER.

        Args:
            nodes: Chunk nodes.

        Returns:
            The units of every chunk and a report of what happened.
        """
        run = self.start(nodes)
        units = [u for _, batch in run.batches(max(len(nodes), 1)) for u in batch]
        return ExtractionResult(units=units, selected=run.selected, stats=run.stats())

    def start(self, nodes: Sequence[BaseNode]) -> ExtractionRun:
        """Chunk-Selection and the LLM's units; :meth:`ExtractionRun.batches` makes the rest.

        Use this instead of :meth:`extract` to take the units a batch of chunks at a
        time (see :class:`ExtractionRun`).
        """
        texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
        weights = [count_tokens(t) for t in texts]
        selected, stats = self.select(texts, weights)
        del weights
        stats.update(chunks=len(texts), chunks_selected=len(selected), alpha=self.alpha)
        before = self._meter.snapshot()
        llm_units: dict[int, list[str]] = {}
        fallback = 0
        if selected:
            llm = self._resolve_llm(len(selected))
            if llm is None:
                stats["llm_fallback"] = "no usable LLM"
                fallback = len(selected)
            else:
                answers = self._llm_units(llm, [texts[i] for i in selected])
                for i, answer in zip(selected, answers, strict=True):
                    if isinstance(answer, Exception):
                        fallback += 1
                        level = (
                            logging.DEBUG if isinstance(answer, LLMOutputError) else logging.WARNING
                        )
                        logger.log(level, "chunk %d: LLM units failed (%s)", i, answer)
                    else:
                        llm_units[i] = answer
        if fallback:
            logger.warning(
                "%d of %d LLM-selected chunk(s) fell back to sentence units",
                fallback,
                len(selected),
            )
        stats.update(chunks_llm=len(llm_units), chunks_fallback=fallback)
        return ExtractionRun(self, nodes, texts, selected, llm_units, stats, before)

    def _build_units(
        self, nodes: Sequence[BaseNode], texts: Sequence[str], llm_units: dict[int, list[str]]
    ) -> list[list[KnowledgeUnit]]:
        nlp = load_spacy(self.spacy_model)
        labels = None if self.entity_labels is None else set(self.entity_labels)
        out: list[list[KnowledgeUnit]] = [[] for _ in texts]
        # NLP path (Alg. 1, line 10): sentences and their entities in one spaCy pass.
        sentence_idx = [i for i in range(len(texts)) if i not in llm_units]
        analyses = analyze_batch([texts[i] for i in sentence_idx], nlp, labels=labels)
        for i, analysis in zip(sentence_idx, analyses, strict=True):
            for sent, ents in zip(analysis.sentences, analysis.sentence_entities, strict=True):
                out[i].append(KnowledgeUnit(" ".join(sent.split()), "sentence", _entities(ents)))
        # LLM path (Alg. 1, line 8), then NER on every unit (line 13).
        flat = [(i, u) for i, units in llm_units.items() for u in units]
        ents_batch = extract_entities_batch([u for _, u in flat], nlp, labels=labels)
        for (i, text), ents in zip(flat, ents_batch, strict=True):
            out[i].append(KnowledgeUnit(text, "llm", _entities(ents)))
        for i, node in enumerate(nodes):
            units = [u for u in out[i] if len(u.text) >= self.min_unit_chars]
            units = list({u.unit_id: u for u in units}.values())  # one node per statement
            title = str(node.metadata.get(self.title_key) or "").strip()
            key = normalize_entity(title) if self.title_entity and title else ""
            if key:
                for u in units:
                    if all(e.key != key for e in u.entities):
                        u.entities.append(UnitEntity(key, title, TITLE_LABEL))
            out[i] = units
        return out

    # ------------------------------------------------------ TransformComponent

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Map chunk nodes to knowledge-unit nodes (entities in ``metadata["entities"]``)."""
        result = self.extract(nodes)
        out: list[BaseNode] = []
        for node, units in zip(nodes, result.units, strict=True):
            for u in units:
                unit = TextNode(
                    id_=f"{node.node_id}/{u.unit_id}",
                    text=u.text,
                    metadata={
                        "chunk_id": node.node_id,
                        "unit_source": u.source,
                        "entities": [e.name for e in u.entities],
                    },
                    excluded_embed_metadata_keys=["chunk_id", "unit_source", "entities"],
                    excluded_llm_metadata_keys=["chunk_id", "unit_source"],
                )
                unit.relationships[NodeRelationship.SOURCE] = node.as_related_node_info()
                out.append(unit)
        return out


class ExtractionRun:
    """An extraction under way: chunks chosen and LLM units written, the rest still to make.

    :meth:`batches` makes the units (sentences, NER, title entities) of
    consecutive batches of chunks. A caller that keeps only a compact result of
    each batch holds one batch's spaCy analyses and unit objects at a time
    instead of the whole corpus's, which matters for memory beyond their own
    size: long-lived strings made among a large set of temporaries keep the
    temporaries' memory resident after they die (``docs/scaling.md``, "Memory").
    Building the index in batches of 256 chunks instead of one took its retained
    memory at 4,000 chunks from 117 to 98 MB (free pymalloc memory held by
    arenas: 31 to 13 MB). The units do not depend on the batch size.

    Made by :meth:`KnowledgeUnitExtractor.start`.
    """

    def __init__(
        self,
        extractor: KnowledgeUnitExtractor,
        nodes: Sequence[BaseNode],
        texts: list[str],
        selected: list[int],
        llm_units: dict[int, list[str]],
        stats: dict[str, Any],
        meter_before: dict[str, Any],
    ) -> None:
        self._extractor = extractor
        self._nodes = nodes
        self._texts = texts
        self._llm_units = llm_units
        self._stats = stats
        self._meter_before = meter_before
        self._units = self._units_llm = 0
        self.selected = selected

    def batches(self, size: int) -> Iterator[tuple[int, list[list[KnowledgeUnit]]]]:
        """``(start, units)`` for each batch of ``size`` chunks, ``units[i]`` being chunk ``start + i``'s."""
        if size <= 0:
            raise ValueError(f"batch size must be positive, got {size}")
        for start in range(0, len(self._nodes), size):
            end = min(start + size, len(self._nodes))
            llm_units = {
                i - start: units for i, units in self._llm_units.items() if start <= i < end
            }
            batch = self._extractor._build_units(
                self._nodes[start:end], self._texts[start:end], llm_units
            )
            self._units += sum(len(u) for u in batch)
            self._units_llm += sum(len(batch[i]) for i in llm_units)
            yield start, batch

    def stats(self) -> dict[str, Any]:
        """The report of :attr:`ExtractionResult.stats` (unit counts: of the batches made so far)."""
        after = self._extractor.usage.snapshot()
        spent = {k: after[k] - self._meter_before[k] for k in after}
        return {
            **self._stats,
            "units": self._units,
            "units_llm": self._units_llm,
            "llm_calls": spent["calls"],
            "llm_cache_hits": spent["cache_hits"],
            "llm_prompt_tokens": spent["prompt_tokens"],
            "llm_completion_tokens": spent["completion_tokens"],
            "llm_total_tokens": spent["total_tokens"],
            "llm_parse_failures": spent["parse_failures"],
        }


def _entities(ents: Sequence[Entity]) -> list[UnitEntity]:
    seen: dict[str, UnitEntity] = {}
    for e in ents:
        key = normalize_entity(e.text)
        if key and key not in seen:
            seen[key] = UnitEntity(key, e.text.strip(), e.label)
    return list(seen.values())
