"""The LLM-free graph: spaCy entities related by sentence co-occurrence.

Not in the paper: it keeps FG-RAG's graph shape (entities and relations with
descriptions) so the method runs offline, and is the LLM extractor's per-chunk fallback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from itertools import combinations
from typing import Any, Literal

from llama_index.core.graph_stores.types import EntityNode, Relation
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent
from pydantic import ConfigDict, Field

from ..core.text import Analysis, Entity, analyze_batch, load_spacy, parsing
from .records import CO_OCCURS, DESCRIPTIONS, NUMERIC_LABELS, _attach, _entity_node, _relation


class CooccurrenceExtractor(TransformComponent):
    """LLM-free graph: an entity's descriptions are the sentences of the chunk that
    mention it; entities named in one sentence are related, that sentence describing it.
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
    sentence_splitter: Literal["rule", "model"] = Field(
        default="model",
        description="The co-occurrence scope: sentences by spaCy's parser, or by punctuation "
        "rules (NER only; noun chunks need the parser).",
    )
    include_noun_chunks: bool = Field(
        default=False, description="Also make nodes of noun chunks (a larger graph)."
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
            analyses = analyze_batch(
                texts, nlp, batch_size=self.batch_size, sentences=self.sentence_splitter
            )
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
    """Sentences with their named entities and noun chunks (one spaCy pass with the parser)."""
    out = []
    with parsing(nlp):  # plain strings only leave the block
        for doc in nlp.pipe([t if t.strip() else " " for t in texts], batch_size=batch_size):
            out.append(_noun_chunk_analysis(doc))
    return out


def _noun_chunk_analysis(doc: Any) -> Analysis:
    """One parsed chunk's sentences with its entities and noun chunks, copied out as strings.

    Noun chunks lose their determiners, pronouns and stop words; chunks of only
    such words are dropped. Without a parser only entities are found.
    """
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
