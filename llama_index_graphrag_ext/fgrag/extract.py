"""LLM entity-relation extraction for ``FGRAGIndex`` and ``PropertyGraphIndex`` [P §3.1].

:class:`FGRAGExtractor` follows LlamaIndex's ``kg_extractors`` contract
(``EntityNode`` and ``Relation`` lists under ``KG_NODES_KEY`` / ``KG_RELATIONS_KEY``);
the record format and property names are in :mod:`.records`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from typing import Any

from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent
from pydantic import ConfigDict, Field, PrivateAttr

from ..core.llm import (
    LLMCaller,
    LLMChoice,
    LLMFallbackError,
    LLMSettings,
    LLMSteps,
    UsageMeter,
    choose_llm,
    parse_yes_no,
    reason_of,
    run_sync,
)
from ..core.text import count_tokens
from .config import FGRAGConfig
from .cooccurrence import CooccurrenceExtractor
from .prompts import (
    COMPLETION_DELIMITER,
    EXTRACT_PROMPT,
    GLEAN_CHECK_PROMPT,
    GLEAN_CONTINUE_PROMPT,
    RECORD_DELIMITER,
    TUPLE_DELIMITER,
)
from .records import Extraction, _attach, extraction_to_graph, parse_extraction

logger = logging.getLogger(__name__)

#: The LLM step's name in the step ledger.
STEP = "extraction"


class FGRAGExtractor(TransformComponent, LLMSettings):
    """LLM entity-relation extraction with gleaning [P §3.1, §6.1].

    Per chunk: one extraction call; then, ``max_gleanings`` times, a YES/NO
    check and, on YES, a call for the missing records (the authors' order).
    A chunk whose calls fail or whose reply yields no entity gets the
    :class:`CooccurrenceExtractor` graph, counted in ``stats`` and ``llm_steps``
    (or raises with ``on_llm_failure="raise"``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: LLM | None = Field(
        default=None, description="The extraction LLM (the suite's rule if None)."
    )
    extract_prompt: BasePromptTemplate = Field(
        default=EXTRACT_PROMPT, description="Entity/relationship extraction prompt."
    )
    glean_check_prompt: BasePromptTemplate = Field(default=GLEAN_CHECK_PROMPT)
    glean_continue_prompt: BasePromptTemplate = Field(default=GLEAN_CONTINUE_PROMPT)
    max_gleanings: int = Field(default=1, ge=0, description="Gleaning rounds (paper: 1).")

    _caller: LLMCaller | None = PrivateAttr(default=None)
    _fallback: CooccurrenceExtractor = PrivateAttr(default_factory=CooccurrenceExtractor)
    _stats: dict[str, int] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _steps: LLMSteps = PrivateAttr(default_factory=lambda: LLMSteps("FG-RAG extractor"))
    _choice: LLMChoice | None = PrivateAttr(default=None)

    def __init__(self, llm: LLM | None = None, **kwargs: Any) -> None:
        for key in ("extract_prompt", "glean_check_prompt", "glean_continue_prompt"):
            if isinstance(kwargs.get(key), str):
                kwargs[key] = PromptTemplate(kwargs[key])
        super().__init__(llm=llm, **kwargs)
        self._stats = {
            "chunks": 0,
            "llm_chunks": 0,
            "fallback_chunks": 0,
            "gleaning_rounds": 0,
            "malformed_records": 0,
            "dropped_relations": 0,
        }

    @classmethod
    def class_name(cls) -> str:
        return "FGRAGExtractor"

    @property
    def llm_steps(self) -> LLMSteps:
        """Which LLM and tier extraction used, chunks and fallbacks."""
        return self._steps

    def attach_steps(self, steps: LLMSteps, choice: LLMChoice | None = None) -> None:
        """Record into ``steps`` (an index's ledger); ``choice``: the index's LLM, if it has one."""
        self._steps = steps
        if choice is not None and (self.llm is None or self.llm is choice.llm):
            self._choice = choice
        self._caller = None

    @property
    def caller(self) -> LLMCaller | None:
        """The caller of the planned LLM (``None``: extraction runs LLM-free), planned once."""
        if self._caller is None:
            choice = self._choice or choose_llm(self.llm)
            llm = self._steps.plan(
                STEP,
                choice,
                needs="json",
                stand_in="spaCy co-occurrence graph",
                on_failure=self.on_llm_failure,
            )
            self.llm = choice.llm
            self._caller = self.new_caller(llm) if llm is not None else None
        return self._caller

    @property
    def usage(self) -> UsageMeter:
        """LLM calls and tokens spent by this extractor."""
        caller = self.caller
        return caller.meter if caller is not None else UsageMeter()

    @property
    def stats(self) -> dict[str, int]:
        """Counts: chunks, chunks built by the LLM / by the fallback, gleanings, drops."""
        with self._lock:
            return dict(self._stats)

    def _count(self, **counts: int) -> None:
        with self._lock:
            for key, value in counts.items():
                self._stats[key] = self._stats.get(key, 0) + value

    def _fmt(self, template: BasePromptTemplate, **kwargs: Any) -> str:
        return template.format(
            tuple_delimiter=TUPLE_DELIMITER,
            record_delimiter=RECORD_DELIMITER,
            completion_delimiter=COMPLETION_DELIMITER,
            **kwargs,
        )

    @staticmethod
    def reply_budget(text: str) -> int:
        """``max_tokens`` of one extraction reply.

        Records restate the chunk (names, types, descriptions, delimiters) and run
        to about twice its length; a cap costs nothing until it is reached, while a
        cut reply is asked again with the whole prompt, so the cap leaves room.
        """
        return 4 * count_tokens(text) + 512

    async def aextract_text(self, text: str) -> Extraction:
        """Extraction and gleaning for one text; raises if the LLM call fails."""
        llm = self.caller
        if llm is None:
            raise ValueError("FGRAGExtractor has no LLM that can extract (see llm_steps)")
        prompt = self._fmt(self.extract_prompt, text=text)
        budget = self.reply_budget(text)
        # A reply without entities is not cached, so a rerun asks again.
        reply = await llm.acomplete(
            prompt, max_tokens=budget, accept=lambda a: bool(parse_extraction(a).entities)
        )
        result = parse_extraction(reply.text)
        history = f"{prompt}{reply.text}"
        # Gleaning only refines a usable answer; an unusable one falls back instead.
        for _ in range(self.max_gleanings if result.entities else 0):
            try:
                check = await llm.acomplete(
                    self._fmt(self.glean_check_prompt, history=history), max_tokens=32
                )
            except LLMFallbackError:
                raise
            except Exception as exc:  # the extraction stands; only gleaning stops
                logger.debug("FG-RAG gleaning check failed (%s); gleaning stops", exc)
                self._count(glean_checks_failed=1)
                break
            if not parse_yes_no(check.text):
                break
            more_prompt = self._fmt(self.glean_continue_prompt, history=history)
            try:
                more = await llm.acomplete(more_prompt, max_tokens=budget)
            except LLMFallbackError:
                raise
            except Exception as exc:
                logger.debug("FG-RAG gleaning reply failed (%s); gleaning stops", exc)
                self._count(glean_checks_failed=1)
                break
            self._count(gleaning_rounds=1)
            result.extend(parse_extraction(more.text))
            history = f"{more_prompt}{more.text}"
        return result

    async def _aextract_node(self, node: BaseNode) -> tuple[BaseNode, str | None]:
        """One chunk's graph from the LLM; ``(node, reason)`` when it must fall back."""
        text = node.get_content(metadata_mode=MetadataMode.LLM)
        try:
            extraction = await self.aextract_text(text)
        except Exception as exc:  # counted and logged by the caller; the chunk falls back
            logger.debug("FG-RAG extraction failed for chunk %s: %s", node.node_id, exc)
            return node, reason_of(exc)
        entities, relations, dropped = extraction_to_graph(extraction, "llm")
        self._count(malformed_records=extraction.malformed, dropped_relations=dropped)
        if not entities:
            return node, "no entity in the reply"
        _attach(node, entities, relations)
        return node, None

    async def acall(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> Sequence[BaseNode]:
        """Extract every chunk concurrently; unusable chunks fall back (counted)."""
        nodes = list(nodes)
        caller = self.caller
        self._steps.count(STEP, len(nodes))
        if caller is None:  # planned LLM-free (the ledger and a log line say why)
            await asyncio.to_thread(self._fallback.__call__, nodes)
            self._count(chunks=len(nodes), fallback_chunks=len(nodes))
            return nodes
        results = await caller.amap(
            nodes, self._aextract_node, show_progress=show_progress, desc="FG-RAG extraction"
        )
        failed, reasons = [], []
        for node, result in zip(nodes, results, strict=True):
            reason = reason_of(result) if isinstance(result, BaseException) else result[1]
            if reason is not None:
                failed.append(node)
                reasons.append(reason)
        self._count(chunks=len(nodes), llm_chunks=len(nodes) - len(failed))
        self._steps.fell_back(STEP, reasons, what="chunk", on_failure=self.on_llm_failure)
        if failed:
            await asyncio.to_thread(self._fallback.__call__, failed)
            self._count(fallback_chunks=len(failed))
        return nodes

    def __call__(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> Sequence[BaseNode]:
        """Synchronous :meth:`acall` (the LLM calls run on the suite's event loop)."""
        return run_sync(lambda: self.acall(nodes, show_progress=show_progress, **kwargs))


def make_extractor(
    config: FGRAGConfig, llm: LLM | LLMChoice | None, steps: LLMSteps | None = None
) -> TransformComponent:
    """The extractor ``config`` describes, planned in ``steps``.

    ``extractor="llm"`` gives :class:`FGRAGExtractor` when the suite's rule finds
    an LLM that can write the records (the embedded SmolLM2 cannot), else the
    :class:`CooccurrenceExtractor`.
    """
    graph = config.graph
    steps = steps if steps is not None else LLMSteps("FG-RAG")
    cooccurrence = CooccurrenceExtractor(
        sentence_splitter=graph.sentence_splitter, include_noun_chunks=graph.include_noun_chunks
    )
    if graph.extractor == "cooccurrence":
        steps.chose_llm_free(STEP, "spaCy co-occurrence graph", "extractor='cooccurrence'")
        return cooccurrence
    choice = llm if isinstance(llm, LLMChoice) else choose_llm(llm)
    planned = steps.plan(
        STEP,
        choice,
        needs="json",
        stand_in="spaCy co-occurrence graph",
        on_failure=config.llm.on_llm_failure,
    )
    if planned is None:
        return cooccurrence
    logger.info("FG-RAG graph: LLM extraction with %s", choice.describe())
    extractor = FGRAGExtractor(
        llm=planned, max_gleanings=graph.max_gleanings, **config.llm.llm_settings()
    )
    extractor.attach_steps(steps, choice)
    return extractor
