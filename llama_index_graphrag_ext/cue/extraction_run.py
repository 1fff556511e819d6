"""An extraction, batch by batch, and its report (CUE-RAG §3.2, Algorithm 1).

:class:`ExtractionRun` makes the rest of Alg. 1 (sentence units, NER, lines 10-14) a
batch of chunks at a time, after Chunk-Selection and the LLM's units (Alg. 2; line 8).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from llama_index.core.schema import BaseNode

from ..core.llm import UsageMeter
from ..core.text import Analysis, ParsePool
from ..core.text.analysis import parses_shared
from ..core.text.parallel import TASK_TEXTS, PendingAnalyses
from .units import KnowledgeUnit


class UnitMaker(Protocol):
    """What a run needs of its :class:`~.extractor.KnowledgeUnitExtractor` (no import cycle)."""

    spacy_model: str | None
    entity_labels: list[str] | None
    sentence_splitter: str
    nlp_processes: int

    @property
    def usage(self) -> UsageMeter: ...

    def _build_units(
        self,
        nodes: Sequence[BaseNode],
        texts: Sequence[str],
        llm_units: dict[int, list[str]],
        pool: ParsePool | None = None,
        analyses: Sequence[Analysis] | None = None,
    ) -> list[list[KnowledgeUnit]]: ...


#: Batches parsed ahead of the current one (bounded: their analyses are held meanwhile).
PARSE_AHEAD = 2
#: Niceness of the parse workers while they parse ahead of the forward pass.
AHEAD_NICE = 19


@dataclass
class ExtractionResult:
    """What :meth:`~.extractor.KnowledgeUnitExtractor.extract` produced.

    Attributes:
        units: One list of units per input chunk, in input order.
        selected: Indices of the chunks Chunk-Selection picked for the LLM.
        stats: Counts for reports (chunks, budget, fallbacks, units, LLM usage).
    """

    units: list[list[KnowledgeUnit]]
    selected: list[int]
    stats: dict[str, Any]


class ExtractionRun:
    """An extraction under way: chunks chosen and LLM units written, the rest still to make.

    :meth:`batches` makes the units of consecutive batches of chunks, so a caller holds
    one batch's analyses at a time (``docs/scaling.md``, "Memory"). The units depend
    neither on the batch size nor on ``nlp_processes``. Made by
    :meth:`~.extractor.KnowledgeUnitExtractor.start`.
    """

    def __init__(
        self,
        extractor: UnitMaker,
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
        """``(start, units)`` per batch of ``size`` chunks (``units[i]``: chunk ``start + i``'s)."""
        if size <= 0:
            raise ValueError(f"batch size must be positive, got {size}")
        processes = self._extractor.nlp_processes
        # One pool for every batch: its workers load spaCy once per build.
        many = processes > 1 and len(self._nodes) - len(self._llm_units) > TASK_TEXTS
        # Workers parse ahead while the caller embeds a batch, at a lower priority
        # (parses shared through a ParseCache are looked up batch by batch instead).
        ahead = many and not parses_shared()
        pool = (
            ParsePool(self._extractor.spacy_model, processes, nice=AHEAD_NICE if ahead else 0)
            if many
            else None
        )
        starts = list(range(0, len(self._nodes), size))
        pending: dict[int, PendingAnalyses] = {}

        def llm_of(start: int) -> dict[int, list[str]]:
            end = min(start + size, len(self._nodes))
            return {i - start: u for i, u in self._llm_units.items() if start <= i < end}

        def parse_ahead(k: int) -> None:
            if ahead and k < len(starts) and k not in pending:
                start, llm = starts[k], llm_of(starts[k])
                end = min(start + size, len(self._nodes))
                texts = [self._texts[i] for i in range(start, end) if i - start not in llm]
                labels = self._extractor.entity_labels
                pending[k] = pool.submit(texts, labels, sentences=self._extractor.sentence_splitter)

        try:
            for k, start in enumerate(starts):
                end = min(start + size, len(self._nodes))
                llm_units = llm_of(start)
                for j in range(k, k + PARSE_AHEAD + 1):
                    parse_ahead(j)
                analyses = pending.pop(k).result() if k in pending else None
                batch = self._extractor._build_units(
                    self._nodes[start:end], self._texts[start:end], llm_units, pool, analyses
                )
                del analyses
                self._units += sum(len(u) for u in batch)
                self._units_llm += sum(len(batch[i]) for i in llm_units)
                yield start, batch
        finally:
            if pool is not None:
                pool.close()

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
