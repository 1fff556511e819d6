"""Knowledge units and their entities (CUE-RAG §3.2, Algorithm 1 lines 6-14).

A unit is a statement the LLM wrote (line 8, :mod:`.llm_units`) or a sentence of the
chunk (line 10); spaCy NER finds its entities (lines 12-14). Units are
content-addressed (:func:`unit_id`; the paper leaves the merge open).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from llama_index.core.schema import BaseNode

from ..core.text import (
    Analysis,
    Entity,
    ParsePool,
    analyze_batch,
    extract_entities_batch,
    load_spacy,
    normalize_entity,
)

#: Label given to a chunk's title when it is linked to all of the chunk's units.
TITLE_LABEL = "TITLE"


@dataclass(frozen=True)
class UnitEntity:
    """An entity of a knowledge unit.

    Attributes:
        key: The normalised key entity nodes are merged under
            (:func:`~llama_index_graphrag_ext.core.text.normalize_entity`).
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


def build_units(
    nodes: Sequence[BaseNode],
    texts: Sequence[str],
    llm_units: dict[int, list[str]],
    *,
    spacy_model: str | None,
    entity_labels: Collection[str] | None,
    min_unit_chars: int,
    title_entity: bool,
    title_key: str,
    pool: ParsePool | None = None,
    sentences: str = "rule",
    analyses: Sequence[Analysis] | None = None,
) -> list[list[KnowledgeUnit]]:
    """The units of each chunk: the LLM's where it wrote them, else its sentences; then NER.

    Args:
        texts: The chunks' texts, aligned with ``nodes``.
        llm_units: The LLM's statements by chunk position (Alg. 1, line 8).
        pool: Worker processes of the same pipeline for the sentence path (None: here).
        sentences: ``"rule"`` (punctuation rules, as the paper's NLTK
            ``sent_tokenize``) or ``"model"`` (spaCy's parser).
        analyses: The sentence path's analyses if already made (parsed ahead), one
            per chunk not in ``llm_units``, in order.

    The other settings are the config's fields (see :class:`~.config.CUEConfig`).
    """
    nlp = load_spacy(spacy_model)
    labels = None if entity_labels is None else set(entity_labels)
    out: list[list[KnowledgeUnit]] = [[] for _ in texts]
    # Alg. 1, line 10: sentences and their entities in one spaCy pass.
    sentence_idx = [i for i in range(len(texts)) if i not in llm_units]
    if analyses is None:
        analyses = analyze_batch(
            [texts[i] for i in sentence_idx], nlp, labels=labels, pool=pool, sentences=sentences
        )
    for i, analysis in zip(sentence_idx, analyses, strict=True):
        for sent, ents in zip(analysis.sentences, analysis.sentence_entities, strict=True):
            out[i].append(KnowledgeUnit(" ".join(sent.split()), "sentence", _entities(ents)))
    # LLM path (Alg. 1, line 8), then NER on every unit (line 13).
    flat = [(i, u) for i, units in llm_units.items() for u in units]
    ents_batch = extract_entities_batch([u for _, u in flat], nlp, labels=labels)
    for (i, text), ents in zip(flat, ents_batch, strict=True):
        out[i].append(KnowledgeUnit(text, "llm", _entities(ents)))
    for i, node in enumerate(nodes):
        units = [u for u in out[i] if len(u.text) >= min_unit_chars]
        units = list({u.unit_id: u for u in units}.values())  # one node per statement
        title = str(node.metadata.get(title_key) or "").strip()
        key = normalize_entity(title) if title_entity and title else ""
        if key:
            for u in units:
                if all(e.key != key for e in u.entities):
                    u.entities.append(UnitEntity(key, title, TITLE_LABEL))
        out[i] = units
    return out


def _entities(ents: Sequence[Entity]) -> list[UnitEntity]:
    seen: dict[str, UnitEntity] = {}
    for e in ents:
        key = normalize_entity(e.text)
        if key and key not in seen:
            seen[key] = UnitEntity(key, e.text.strip(), e.label)
    return list(seen.values())
