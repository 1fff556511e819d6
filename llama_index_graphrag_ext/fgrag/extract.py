"""Entity-relation extraction for ``PropertyGraphIndex`` [P §3.1, Eqs. 1-3].

Two ``TransformComponent`` extractors follow LlamaIndex's ``kg_extractors``
contract: each writes ``EntityNode`` and ``Relation`` lists under
``KG_NODES_KEY`` / ``KG_RELATIONS_KEY`` in a chunk's metadata, and
``PropertyGraphIndex`` (or [`FGRAGIndex`][llama_index_graphrag_ext.fgrag.index.FGRAGIndex])
stores them in any property graph store.

- [`FGRAGExtractor`][llama_index_graphrag_ext.fgrag.extract.FGRAGExtractor]: the
  paper's LLM extraction (entities with type and description, relationships
  with description and keywords, one gleaning round), through
  [`LLMCaller`][llama_index_graphrag_ext.core.llm.LLMCaller] (cache, retries,
  bounded concurrency, usage, no reply cut by the length limit taken as
  complete). Chunks whose reply fails or holds no entity get the co-occurrence
  graph: a WARNING counts them, and so do ``stats`` and ``llm_steps``; with
  ``on_llm_failure="raise"`` it is an error.
- [`CooccurrenceExtractor`][llama_index_graphrag_ext.fgrag.extract.CooccurrenceExtractor]:
  the LLM-free stand-in (the paper has none): spaCy entities; an entity's
  descriptions are the sentences that mention it, and two entities named in one
  sentence are related, with that sentence as the relation's description.

Entity node names are normalised keys ([`normalize_entity`][llama_index_graphrag_ext.core.text.normalize_entity]),
so same-name entities share one node id in every store (the paper's Merge,
Eq. 2); the name as written is kept in ``display_name``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from llama_index.core.graph_stores.types import (
    KG_NODES_KEY,
    KG_RELATIONS_KEY,
    EntityNode,
    Relation,
)
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent
from pydantic import ConfigDict, Field, PrivateAttr

from ..core.llm import (
    LLMCaller,
    LLMChoice,
    LLMSettings,
    LLMSteps,
    UsageMeter,
    choose_llm,
    parse_yes_no,
    reason_of,
    run_sync,
)
from ..core.text import (
    Analysis,
    Entity,
    analyze_batch,
    count_tokens,
    load_spacy,
    normalize_entity,
    parsing,
)
from .prompts import (
    COMPLETION_DELIMITER,
    EXTRACT_PROMPT,
    GLEAN_CHECK_PROMPT,
    GLEAN_CONTINUE_PROMPT,
    RECORD_DELIMITER,
    TUPLE_DELIMITER,
)

logger = logging.getLogger(__name__)

#: Relation label written by the LLM extractor (the keywords are a property).
RELATED = "RELATED_TO"
#: Relation label written by the co-occurrence extractor.
CO_OCCURS = "CO_OCCURS_WITH"
#: Property names shared by the extractors and the index.
DESCRIPTIONS = "descriptions"
SOURCES = "source_chunks"
DISPLAY_NAME = "display_name"
ENTITY_TYPE = "entity_type"
KEYWORDS = "keywords"
BUILT_BY = "built_by"

#: spaCy labels that name quantities, not things worth a node.
NUMERIC_LABELS = frozenset({"CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY"})


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class ExtractedEntity:
    """One entity record from the LLM."""

    name: str
    type: str
    description: str


@dataclass(frozen=True)
class ExtractedRelation:
    """One relationship record from the LLM."""

    source: str
    target: str
    description: str
    keywords: tuple[str, ...] = ()


@dataclass
class Extraction:
    """What :func:`parse_extraction` found in one answer.

    Attributes:
        entities: Entity records, in order.
        relations: Relationship records, in order.
        malformed: Records that started like a record but could not be read.
    """

    entities: list[ExtractedEntity] = field(default_factory=list)
    relations: list[ExtractedRelation] = field(default_factory=list)
    malformed: int = 0

    def extend(self, other: Extraction) -> None:
        """Append another extraction's records (gleaning)."""
        self.entities.extend(other.entities)
        self.relations.extend(other.relations)
        self.malformed += other.malformed


_RECORD_START = re.compile(r'\(\s*["\'`]?\s*(entity|relationship|relation)\b', re.IGNORECASE)


def _clean(field_text: str) -> str:
    return field_text.strip().strip("\"'`()# ").strip()


def parse_extraction(
    text: str,
    tuple_delimiter: str = TUPLE_DELIMITER,
    record_delimiter: str = RECORD_DELIMITER,
    completion_delimiter: str = COMPLETION_DELIMITER,
) -> Extraction:
    """Read entity and relationship tuples from an extraction answer, tolerantly.

    Records are found by their opening ``("entity"`` / ``("relationship"``
    wherever they are (one per line, run together with ``##``, inside code
    fences), so prose around them is ignored. An entity needs a name and a
    description (the type may be missing); a relationship needs two ends and a
    description (keywords may be missing). Anything else counts as malformed.

    Args:
        text: The model's answer.
        tuple_delimiter: Field separator.
        record_delimiter: Record separator.
        completion_delimiter: End marker.

    Returns:
        The parsed records and the number of malformed ones.
    """
    out = Extraction()
    body = (text or "").replace(completion_delimiter, "\n")
    starts = [m.start() for m in _RECORD_START.finditer(body)]
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(body)
        record = body[start:end].strip()
        if record.endswith(record_delimiter):
            record = record[: -len(record_delimiter)]
        record = record.strip().rstrip(",;").strip()
        if record.endswith(")"):
            record = record[:-1]
        fields = [_clean(f) for f in record[1:].split(tuple_delimiter)]
        tag = fields[0].lower()
        values = [f for f in fields[1:]]
        if tag == "entity":
            if len(values) >= 3 and values[0] and values[2]:
                out.entities.append(ExtractedEntity(values[0], values[1], values[2]))
            elif len(values) == 2 and all(values):
                out.entities.append(ExtractedEntity(values[0], "", values[1]))
            else:
                out.malformed += 1
        else:
            if len(values) >= 3 and values[0] and values[1] and values[2]:
                keywords = tuple(
                    k.strip() for k in (values[3] if len(values) > 3 else "").split(",")
                )
                out.relations.append(
                    ExtractedRelation(
                        values[0], values[1], values[2], tuple(k for k in keywords if k)
                    )
                )
            else:
                out.malformed += 1
    return out


# --------------------------------------------------------------------------- node building


def _entity_node(key: str, display: str, etype: str, description: str, built_by: str) -> EntityNode:
    label = re.sub(r"\W+", "_", etype.strip()).strip("_").upper() or "ENTITY"
    return EntityNode(
        name=key,
        label=label,
        properties={
            DISPLAY_NAME: display,
            ENTITY_TYPE: etype,
            DESCRIPTIONS: [description],
            BUILT_BY: built_by,
        },
    )


def _relation(
    label: str, source: str, target: str, description: str, keywords: Sequence[str], built_by: str
) -> Relation:
    return Relation(
        label=label,
        source_id=source,
        target_id=target,
        properties={DESCRIPTIONS: [description], KEYWORDS: list(keywords), BUILT_BY: built_by},
    )


def _attach(node: BaseNode, entities: list[EntityNode], relations: list[Relation]) -> None:
    """Append to the node's KG lists (earlier extractors' output is kept)."""
    node.metadata[KG_NODES_KEY] = [*node.metadata.get(KG_NODES_KEY, []), *entities]
    node.metadata[KG_RELATIONS_KEY] = [*node.metadata.get(KG_RELATIONS_KEY, []), *relations]


def extraction_to_graph(
    extraction: Extraction, built_by: str = "llm"
) -> tuple[list[EntityNode], list[Relation], int]:
    """Turn parsed records into store nodes and relations for one chunk.

    Same-name entities within the chunk are merged (descriptions kept in
    order). As in the authors' code, a relationship whose end is not one of the
    chunk's entities is dropped; such drops are returned for counting.

    Returns:
        ``(entities, relations, dropped_relations)``.
    """
    entities: dict[str, EntityNode] = {}
    for ent in extraction.entities:
        key = normalize_entity(ent.name)
        if not key:
            continue
        if key in entities:
            descs = entities[key].properties[DESCRIPTIONS]
            if ent.description not in descs:
                descs.append(ent.description)
        else:
            entities[key] = _entity_node(key, ent.name, ent.type, ent.description, built_by)
    relations: list[Relation] = []
    dropped = 0
    for rel in extraction.relations:
        source, target = normalize_entity(rel.source), normalize_entity(rel.target)
        if source not in entities or target not in entities or source == target:
            dropped += 1
            continue
        relations.append(
            _relation(RELATED, source, target, rel.description, rel.keywords, built_by)
        )
    return list(entities.values()), relations, dropped


# --------------------------------------------------------------------------- LLM-free


class CooccurrenceExtractor(TransformComponent):
    """LLM-free graph: spaCy entities related by sentence co-occurrence.

    The paper has no LLM-free variant; this stand-in keeps FG-RAG's graph shape
    (entities with description lists, relations with descriptions) so the whole
    method runs offline. An entity's descriptions are the sentences of the chunk
    that mention it; every pair of entities in one sentence gets a relation
    whose description is that sentence.

    Example:
        >>> from llama_index.core.schema import TextNode
        >>> ex = CooccurrenceExtractor()
        >>> node = ex([TextNode(text="Marie Curie worked in Paris.")])[0]
        >>> sorted(n.name for n in node.metadata[KG_NODES_KEY])  # doctest: +SKIP
        ['marie curie', 'paris']
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    max_sentences_per_entity: int = Field(
        default=5, gt=0, description="Sentences kept as one entity's descriptions per chunk."
    )
    max_entities_per_sentence: int = Field(
        default=8, gt=1, description="Entities of one sentence that get pairwise relations."
    )
    skip_labels: frozenset[str] = Field(
        default=NUMERIC_LABELS, description="spaCy entity labels that do not become nodes."
    )
    spacy_model: str | None = Field(
        default=None, description="spaCy pipeline name; the suite's fallback chain when None."
    )
    batch_size: int = Field(default=64, gt=0, description="Texts per spaCy batch.")
    include_noun_chunks: bool = Field(
        default=False,
        description=(
            'Also make nodes of noun chunks ("beekeepers", "hive products"): closer to the '
            "LLM's entities for query-focused summarization, at the cost of a larger graph."
        ),
    )

    @classmethod
    def class_name(cls) -> str:
        return "FGRAGCooccurrenceExtractor"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Attach co-occurrence entities and relations to each node's metadata."""
        nodes = list(nodes)
        texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
        nlp = load_spacy(self.spacy_model)
        if self.include_noun_chunks:
            analyses = _analyze_with_noun_chunks(texts, nlp, self.batch_size)
        else:
            analyses = analyze_batch(texts, nlp, batch_size=self.batch_size)
        for node, analysis in zip(nodes, analyses, strict=True):
            entities, relations = self.graph_of(analysis)
            _attach(node, entities, relations)
        return nodes

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Async entry point (spaCy runs in a worker thread)."""
        return await asyncio.to_thread(self.__call__, nodes, **kwargs)

    def graph_of(self, analysis: Any) -> tuple[list[EntityNode], list[Relation]]:
        """Entities and relations of one analysed chunk (see ``core.text.Analysis``)."""
        entities: dict[str, EntityNode] = {}
        relations: dict[tuple[str, str], Relation] = {}
        for sentence, mentions in zip(analysis.sentences, analysis.sentence_entities, strict=True):
            keys: list[str] = []
            for mention in mentions:
                key = mention.key
                if not key or mention.label in self.skip_labels or key in keys:
                    continue
                keys.append(key)
                node = entities.get(key)
                if node is None:
                    entities[key] = _entity_node(
                        key, mention.text, mention.label, sentence, "cooccurrence"
                    )
                else:
                    descs = node.properties[DESCRIPTIONS]
                    if len(descs) < self.max_sentences_per_entity and sentence not in descs:
                        descs.append(sentence)
            for a, b in combinations(sorted(keys[: self.max_entities_per_sentence]), 2):
                rel = relations.get((a, b))
                if rel is None:
                    relations[(a, b)] = _relation(CO_OCCURS, a, b, sentence, (), "cooccurrence")
                elif sentence not in rel.properties[DESCRIPTIONS]:
                    rel.properties[DESCRIPTIONS].append(sentence)
        return list(entities.values()), list(relations.values())


def _analyze_with_noun_chunks(texts: Sequence[str], nlp: Any, batch_size: int) -> list[Analysis]:
    """Sentences with their named entities and noun chunks (one spaCy pass with the parser).

    Noun chunks lose leading determiners, pronouns and stop words; chunks that
    are only such words are dropped. Without a parser only entities are found.
    """
    out = []
    with parsing(nlp):  # plain strings only leave the block
        for doc in nlp.pipe([t if t.strip() else " " for t in texts], batch_size=batch_size):
            out.append(_noun_chunk_analysis(doc))
    return out


def _noun_chunk_analysis(doc: Any) -> Analysis:
    """One parsed chunk's sentences with its entities and noun chunks, copied out as strings."""
    analysis = Analysis()
    try:
        chunks = list(doc.noun_chunks)
    except ValueError:  # no parser in this pipeline
        chunks = []
    mentions: list[tuple[int, Entity]] = [
        (e.start, Entity(e.text, e.label_, e.start_char, e.end_char)) for e in doc.ents
    ]
    for chunk in chunks:
        words = [t for t in chunk if not (t.is_stop or t.pos_ in ("PRON", "DET", "NUM"))]
        if words and not any(e.start <= words[0].i < e.end for e in doc.ents):
            span = doc[words[0].i : words[-1].i + 1]
            mentions.append(
                (span.start, Entity(span.text, "NOUN_CHUNK", span.start_char, span.end_char))
            )
    mentions.sort(key=lambda m: m[0])
    for sent in doc.sents:
        text = sent.text.strip()
        if not text:
            continue
        analysis.sentences.append(text)
        analysis.sentence_entities.append(
            [m for start, m in mentions if sent.start <= start < sent.end]
        )
    return analysis


# --------------------------------------------------------------------------- LLM


#: The LLM step's name in the step ledger.
STEP = "extraction"


class FGRAGExtractor(TransformComponent, LLMSettings):
    """LLM entity-relation extraction with one gleaning round [P §3.1, §6.1].

    Per chunk: one extraction call; then, ``max_gleanings`` times, a YES/NO
    check and, on YES, a call for the missing records (the authors' order).
    Replies are parsed with :func:`parse_extraction` (reasoning blocks
    dropped). A chunk whose calls fail or whose reply yields no entity gets the
    :class:`CooccurrenceExtractor` graph; such chunks are counted (WARNING,
    ``stats``, ``llm_steps``), or raise with ``on_llm_failure="raise"``.

    Args:
        llm: Any LlamaIndex LLM; without one the suite's rule picks it, once.
        **kwargs: Values of the attributes below and of
            :class:`~..core.llm.LLMSettings` (``max_concurrency``,
            ``max_attempts``, ``timeout``, ``cache_path``, ``on_llm_failure``).

    Attributes:
        extract_prompt: Extraction prompt with ``{text}`` and the delimiters.
        max_gleanings: Gleaning rounds (the paper fixes 1).
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
            check = await llm.acomplete(
                self._fmt(self.glean_check_prompt, history=history), max_tokens=32
            )
            if not parse_yes_no(check.text):
                break
            more_prompt = self._fmt(self.glean_continue_prompt, history=history)
            more = await llm.acomplete(more_prompt, max_tokens=budget)
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
        # One WARNING with the counts (an error with on_llm_failure="raise").
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


def default_extractor(
    llm: LLM | LLMChoice | None,
    include_noun_chunks: bool = False,
    steps: LLMSteps | None = None,
    **kwargs: Any,
) -> TransformComponent:
    """The extractor the LLM allows, planned in ``steps`` (a log line says which builds the graph).

    ``llm`` goes through the suite's rule (``None``: ``Settings.llm``, the
    environment, the embedded SmolLM2). An LLM that can write the records
    gives :class:`FGRAGExtractor`; none, or the embedded SmolLM2 (which cannot),
    gives :class:`CooccurrenceExtractor`, with a warning for the latter.

    Args:
        llm: An LLM, the index's :class:`~..core.llm.LLMChoice`, or ``None``.
        include_noun_chunks: Give the LLM-free extractor noun-chunk nodes too.
        steps: The ledger to record the choice in (a fresh one when omitted).
        **kwargs: Passed to :class:`FGRAGExtractor`.
    """
    choice = llm if isinstance(llm, LLMChoice) else choose_llm(llm)
    steps = steps if steps is not None else LLMSteps("FG-RAG")
    planned = steps.plan(
        STEP,
        choice,
        needs="json",
        stand_in="spaCy co-occurrence graph",
        on_failure=kwargs.get("on_llm_failure", "fallback"),
    )
    if planned is None:
        return CooccurrenceExtractor(include_noun_chunks=include_noun_chunks)
    logger.info("FG-RAG graph: LLM extraction with %s", choice.describe())
    extractor = FGRAGExtractor(llm=planned, **kwargs)
    extractor.attach_steps(steps, choice)
    return extractor
