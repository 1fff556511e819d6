"""Hybrid knowledge-unit extraction (CUE-RAG §3.2, Algorithms 1 and 2).

The chunks Chunk-Selection picks (a knapsack under ``alpha`` of the corpus's tokens)
are rewritten by an LLM into knowledge units; every other chunk's sentences are its
units. spaCy NER then finds each unit's entities (Alg. 1, lines 12-14).

| module | step |
|---|---|
| :mod:`.selection` | Alg. 2, Chunk-Selection: chunk values (BLEU, cos, random), the knapsack |
| :mod:`.llm_units` | Alg. 1 line 8: the LLM's units (Fig. 7 prompt) |
| :mod:`.units` | Alg. 1 lines 10-14: sentence units, NER, the unit and entity records |
| :mod:`.extraction_run` | the units made a batch of chunks at a time, and the report |

``alpha = 0`` needs no LLM. The embedded SmolLM2 cannot write JSON, so with it the
step runs LLM-free (logged); a chunk whose reply fails gets its sentences.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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

from ..core.defaults import resolve_embed_model
from ..core.embeddings import embed_texts
from ..core.llm import (
    LLMChoice,
    LLMSettings,
    LLMSteps,
    UsageMeter,
    choose_llm,
    reason_of,
    run_sync,
)
from ..core.text import DEFAULT_ENTITY_LABELS, Analysis, ParsePool, count_tokens
from .extraction_run import ExtractionResult, ExtractionRun
from .llm_units import STEP, allm_units
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
from .units import KnowledgeUnit, build_units

logger = logging.getLogger(__name__)


class KnowledgeUnitExtractor(TransformComponent, LLMSettings, PromptMixin):
    """Turn chunks into knowledge units with entities (CUE-RAG's hybrid extraction).

    As a ``TransformComponent`` it maps chunk nodes to unit ``TextNode`` s (a
    ``SOURCE`` link to the chunk, entities in metadata). Its settings are the
    ``graph`` fields of :class:`~.config.CUEConfig` and the LLM call settings; ``llm``
    is resolved only when ``alpha > 0``, ``embed_model`` serves the ``cos`` selection.
    """

    # CUEConfig's graph fields (described there); own defaults: alpha = 0, title entities.
    alpha: float = Field(default=0.0, ge=0.0, le=1.0)
    selection: Literal["bleu", "cos", "random"] = "bleu"
    bleu_max_n: int = Field(default=4, gt=0)
    knapsack_max_cells: int = Field(default=50_000_000, gt=0)
    seed: int = 0
    spacy_model: str | None = None
    entity_labels: list[str] | None = Field(default_factory=lambda: sorted(DEFAULT_ENTITY_LABELS))
    title_entity: bool = True
    title_key: str = "title"
    sentence_splitter: Literal["rule", "model"] = "rule"
    min_unit_chars: int = Field(default=3, gt=0)
    nlp_processes: int = Field(default=1, ge=1)
    repair_attempts: int = Field(default=1, ge=0)
    show_progress: bool = Field(default=False, description="Show progress bars.")
    llm: SerializeAsAny[LLM] | None = Field(
        default=None, description="Extraction LLM (resolved only when alpha > 0).", exclude=True
    )
    embed_model: SerializeAsAny[BaseEmbedding] | None = Field(
        default=None, description="Embedder for the cos strategy.", exclude=True
    )

    _prompt: BasePromptTemplate = PrivateAttr(default=UNIT_EXTRACTION_PROMPT)
    _meter: UsageMeter = PrivateAttr(default_factory=UsageMeter)
    _steps: LLMSteps = PrivateAttr(default_factory=lambda: LLMSteps("CUE KnowledgeUnitExtractor"))
    _choice: LLMChoice | None = PrivateAttr(default=None)

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

    @property
    def llm_steps(self) -> LLMSteps:
        """Which LLM and tier the step used, items and fallbacks (see :mod:`~..core.llm.steps`)."""
        return self._steps

    def attach_steps(self, steps: LLMSteps, choice: LLMChoice | None = None) -> None:
        """Record into ``steps`` (an index's ledger); ``choice``: the index's LLM, if it has one."""
        self._steps = steps
        if choice is not None and (self.llm is None or self.llm is choice.llm):
            self._choice = choice

    # ------------------------------------------------------------ selection

    def select(self, texts: Sequence[str], weights: Sequence[int]) -> tuple[list[int], dict]:
        """Chunk-Selection (Alg. 2): ``(indices, info)`` of the chunks whose units the LLM
        writes, given their texts and token counts (``weights``)."""
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

    def _plan(self) -> LLM | None:
        """The extraction LLM, planned once per run (``None``: LLM-free)."""
        choice = self._choice or choose_llm(self.llm)
        return self._steps.plan(
            STEP, choice, needs="json", stand_in="sentence units", on_failure=self.on_llm_failure
        )

    def reply_budget(self, text: str) -> int:
        """``max_tokens`` of one chunk's units: the chunk restated, plus the JSON around it."""
        return int(1.6 * count_tokens(text)) + 96

    async def _allm_units(self, llm: LLM, texts: Sequence[str]) -> list[list[str] | Exception]:
        return await allm_units(
            self.new_caller(llm, meter=self._meter),
            self._prompt,
            texts,
            reply_budget=self.reply_budget,
            repair_attempts=self.repair_attempts,
            show_progress=self.show_progress,
        )

    def extract(self, nodes: Sequence[BaseNode]) -> ExtractionResult:
        """Chunk-Selection, the LLM's units for the chosen chunks, sentences for the rest, NER."""
        run = self.start(nodes)
        units = [u for _, batch in run.batches(max(len(nodes), 1)) for u in batch]
        return ExtractionResult(units=units, selected=run.selected, stats=run.stats())

    def start(self, nodes: Sequence[BaseNode]) -> ExtractionRun:
        """Chunk-Selection and the LLM's units; :meth:`ExtractionRun.batches` makes the rest."""
        texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
        weights = [count_tokens(t) for t in texts]
        selected, stats = self.select(texts, weights)
        del weights
        stats.update(chunks=len(texts), chunks_selected=len(selected), alpha=self.alpha)
        before = self._meter.snapshot()
        llm_units: dict[int, list[str]] = {}
        fallback = 0
        if selected:
            llm = self._plan()
            self._steps.count(STEP, len(selected))
            if llm is None:  # planned LLM-free
                fallback = len(selected)
            else:
                answers = run_sync(lambda: self._allm_units(llm, [texts[i] for i in selected]))
                reasons = []
                for i, answer in zip(selected, answers, strict=True):
                    if isinstance(answer, Exception):
                        reasons.append(reason_of(answer))
                        logger.debug("chunk %d: LLM units failed (%s)", i, answer)
                    else:
                        llm_units[i] = answer
                fallback = len(reasons)
                self._steps.fell_back(STEP, reasons, what="chunk", on_failure=self.on_llm_failure)
        stats.update(chunks_llm=len(llm_units), chunks_fallback=fallback)
        return ExtractionRun(self, nodes, texts, selected, llm_units, stats, before)

    def _build_units(
        self,
        nodes: Sequence[BaseNode],
        texts: Sequence[str],
        llm_units: dict[int, list[str]],
        pool: ParsePool | None = None,
        analyses: Sequence[Analysis] | None = None,
    ) -> list[list[KnowledgeUnit]]:
        return build_units(
            nodes,
            texts,
            llm_units,
            spacy_model=self.spacy_model,
            entity_labels=self.entity_labels,
            min_unit_chars=self.min_unit_chars,
            title_entity=self.title_entity,
            title_key=self.title_key,
            pool=pool,
            sentences=self.sentence_splitter,
            analyses=analyses,
        )

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
