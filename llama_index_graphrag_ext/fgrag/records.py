"""FG-RAG's extraction records: the property names, the LLM's record format, and graph nodes.

Entity node names are normalised keys
([`normalize_entity`][llama_index_graphrag_ext.core.text.entities.normalize_entity]), so
same-name entities share one node id; the name as written is kept in ``display_name``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY, EntityNode, Relation
from llama_index.core.schema import BaseNode

from ..core.text import normalize_entity
from .prompts import COMPLETION_DELIMITER, RECORD_DELIMITER, TUPLE_DELIMITER

RELATED = "RELATED_TO"
#: Relation label written by the co-occurrence extractor.
CO_OCCURS = "CO_OCCURS_WITH"
#: Property names shared by the extractors and the index.
DESCRIPTIONS = "descriptions"
DISPLAY_NAME = "display_name"
ENTITY_TYPE = "entity_type"
KEYWORDS = "keywords"
BUILT_BY = "built_by"

#: spaCy labels that name quantities, not things worth a node.
NUMERIC_LABELS = frozenset({"CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY"})


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
    wherever they are, so prose around them is ignored. An entity needs a name
    and a description; a relationship needs two ends and a description.
    Anything else counts as malformed.
    """
    out = Extraction()
    body = (text or "").replace(completion_delimiter, "\n")
    starts = [m.start() for m in _RECORD_START.finditer(body)]
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(body)
        record = body[start:end].strip()
        # A record ends with its line's closing parenthesis: what follows the last one
        # ("Let me know if you need more.") is the model talking, not the description.
        closed = re.search(r"\)[ \t]*\n", record)
        if closed is not None:
            record = record[: closed.start() + 1]
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
    """``(entities, relations, dropped_relations)`` of one chunk's parsed records.

    Same-name entities within the chunk are merged. As in the authors' code, a
    relationship whose end is not one of the chunk's entities is dropped (counted).
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
