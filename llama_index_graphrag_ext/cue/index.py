"""MultiPartiteIndex: CUE-RAG's three-layer graph of chunks, knowledge units and entities.

Algorithm 1 (CUE-Index): chunks ``V_T`` contain knowledge units ``V_K``
(edges ``E_c``, kind ``has_unit``); units mention entities ``V_e`` (edges
``E_e``, kind ``mentions``). There are no other edges (§2.1).

Decisions the paper leaves open (digest §8):

* **Unit merging.** Units are content-addressed: the same statement in two
  chunks is one node with two ``has_unit`` edges.
* **Entity normalisation.** Mentions are merged under
  :func:`~llama_index_graphrag_ext.core.nlp.normalize_entity` (NFKC, casefold,
  apostrophes unified, possessive ``'s`` and a leading "the" dropped). The entity
  node keeps the first surface form seen; its embedding is that surface form's.
* **Labels.** spaCy's OntoNotes labels minus purely numeric ones (CARDINAL,
  ORDINAL, QUANTITY, MONEY, PERCENT); DATE and TIME stay.
* **Deletion.** Removing a chunk removes its ``has_unit`` edges; a unit left with
  no chunk disappears, and so does an entity left with no unit. Shared units
  and entities stay.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode

from ..core.embeddings import embed_texts
from ..core.graph import TypedGraph
from ..core.index import GraphIndexBase
from ..core.persist import read_json, write_json
from ..core.vectors import InMemoryVectorTable
from .extractor import KnowledgeUnitExtractor
from .view import CueGraphView, build_view

logger = logging.getLogger(__name__)

CHUNK, UNIT, ENTITY = "chunk", "unit", "entity"
HAS_UNIT, MENTIONS = "has_unit", "mentions"
_STATS_FILE = "cue_stats.json"


def entity_id(key: str) -> str:
    """The node id of the entity with this normalised key."""
    return f"entity:{key}"


class MultiPartiteIndex(GraphIndexBase):
    """Chunks, knowledge units and entities, with unit and entity embeddings (CUE-RAG §3.2).

    Build it like any LlamaIndex index::

        index = MultiPartiteIndex.from_documents(docs, transformations=[PassageParser()])
        index = MultiPartiteIndex.from_documents(docs, alpha=0.5, llm=my_llm)

    Args:
        nodes: Chunk nodes.
        extractor: The :class:`.KnowledgeUnitExtractor`; built from ``alpha``,
            ``selection`` and the other extractor settings when omitted.
        **kwargs: Extractor settings (``alpha``, ``selection``, ``spacy_model``,
            ``title_entity``, ``cache_path``, ...) and the
            :class:`~llama_index_graphrag_ext.core.index.GraphIndexBase` arguments
            (``embed_model``, ``llm``, ``callback_manager``, ``show_progress``, ...).
    """

    index_kind = "cue-multipartite"
    format_version = 1

    def _configure(self, extractor: KnowledgeUnitExtractor | None = None, **settings: Any) -> None:
        if extractor is None:
            extractor = KnowledgeUnitExtractor(**settings)
        elif settings:
            raise TypeError(f"pass settings either to the extractor or here, not both: {settings}")
        self.extractor = extractor
        self._graph = TypedGraph()
        self._units = InMemoryVectorTable()
        self._entities = InMemoryVectorTable()
        self._chunks = InMemoryVectorTable()
        self._view: CueGraphView | None = None
        self.build_stats: dict[str, Any] = {}

    def config(self) -> dict[str, Any]:
        return self.extractor.settings()

    # ----------------------------------------------------------------- build

    def _add_chunks(self, nodes: Sequence[BaseNode]) -> None:
        if self.extractor.llm is None and self.extractor.alpha > 0 and self._llm is not None:
            self.extractor.llm = self._llm
        if self.extractor.embed_model is None:
            self.extractor.embed_model = self.embed_model
        self.extractor.show_progress = getattr(self, "_show_progress", False)
        result = self.extractor.extract(nodes)
        g = self._graph
        g.add_nodes([n.node_id for n in nodes], CHUNK)
        new_units: dict[str, str] = {}
        new_entities: dict[str, str] = {}
        chunk_unit_edges, unit_entity_edges = [], []
        for node, units in zip(nodes, result.units, strict=True):
            for unit in units:
                uid = unit.unit_id
                if uid not in g and uid not in new_units:
                    new_units[uid] = unit.text
                    g.add_node(uid, UNIT, text=unit.text, source=unit.source)
                chunk_unit_edges.append((node.node_id, uid))
                for ent in unit.entities:
                    eid = entity_id(ent.key)
                    if eid not in g and eid not in new_entities:
                        new_entities[eid] = ent.name
                        g.add_node(eid, ENTITY, name=ent.name, key=ent.key, label=ent.label)
                    unit_entity_edges.append((uid, eid))
        g.add_edges(chunk_unit_edges, HAS_UNIT)
        g.add_edges(unit_entity_edges, MENTIONS)
        no_entity = [
            n.node_id for n, units in zip(nodes, result.units, strict=True)
            if not any(u.entities for u in units)
        ]  # fmt: skip
        if no_entity:
            # Q-Iter walks entities; such chunks are reached only by the dense fill.
            logger.warning(
                "CUE index: %d of %d chunk(s) have no entity; Q-Iter paths cannot reach them, "
                "only the dense fill can (e.g. a language the NER model lacks): %s",
                len(no_entity),
                len(nodes),
                no_entity[:5],
            )
        progress = getattr(self, "_show_progress", False)
        chunk_texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        self._chunks.add(
            [n.node_id for n in nodes],
            embed_texts(self.embed_model, chunk_texts, show_progress=progress, desc="Chunks"),
        )
        if new_units:
            vectors = embed_texts(
                self.embed_model, list(new_units.values()), show_progress=progress, desc="Units"
            )
            self._units.add(list(new_units), vectors)
        if new_entities:
            vectors = embed_texts(
                self.embed_model,
                list(new_entities.values()),
                show_progress=progress,
                desc="Entities",
            )
            self._entities.add(list(new_entities), vectors)
        self._merge_stats(result.stats)
        self._view = None
        logger.info(
            "CUE index: +%d chunks, +%d units, +%d entities (%s LLM tokens)",
            len(nodes),
            len(new_units),
            len(new_entities),
            result.stats.get("llm_total_tokens", 0),
        )

    def _merge_stats(self, stats: dict[str, Any]) -> None:
        for key, value in stats.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "alpha":
                self.build_stats[key] = self.build_stats.get(key, 0) + value
            else:
                self.build_stats[key] = value

    def _remove_chunks(self, node_ids: Sequence[str]) -> None:
        g = self._graph
        touched_units: set[str] = set()
        for cid in node_ids:
            touched_units.update(g.neighbors(cid, HAS_UNIT))
        g.remove_nodes(node_ids)
        dead_units = [u for u in touched_units if not g.neighbors(u, HAS_UNIT)]
        touched_entities: set[str] = set()
        for uid in dead_units:
            touched_entities.update(g.neighbors(uid, MENTIONS))
        g.remove_nodes(dead_units)
        dead_entities = [e for e in touched_entities if not g.neighbors(e, MENTIONS)]
        g.remove_nodes(dead_entities)
        self._chunks.delete(node_ids)
        self._units.delete(dead_units)
        self._entities.delete(dead_entities)
        self._view = None

    def _searchable(self) -> dict[str, tuple[Sequence[str], Any]]:
        # Entity anchoring searches entities and units; the dense fill searches chunks.
        return {
            name: (table.ids, table.matrix)
            for name, table in (
                ("units", self._units),
                ("entities", self._entities),
                ("chunks", self._chunks),
            )
        }

    # ------------------------------------------------------------------ view

    def view(self) -> CueGraphView:
        """The current retrieval snapshot (rebuilt after a change; see :mod:`.view`)."""
        view = self._view
        if view is not None:
            return view
        with self._lock:
            if self._view is None:
                self._view = self._build_view()
            return self._view

    def _build_view(self) -> CueGraphView:
        g = self._graph
        unit_ids = self._units.ids
        entity_ids = self._entities.ids
        entity_rows = {e: j for j, e in enumerate(entity_ids)}
        edges: list[tuple[int, int]] = []
        unit_chunks: list[tuple[str, ...]] = []
        unit_texts: list[str] = []
        for i, uid in enumerate(unit_ids):
            unit_texts.append(g.node_attrs(uid)["text"])
            unit_chunks.append(tuple(g.neighbors(uid, HAS_UNIT)))
            edges.extend((i, entity_rows[e]) for e in g.neighbors(uid, MENTIONS))
        attrs = [g.node_attrs(e) for e in entity_ids]
        return build_view(
            unit_ids=unit_ids,
            unit_texts=unit_texts,
            unit_matrix=self._units.matrix,
            entity_ids=entity_ids,
            entity_names=[a["name"] for a in attrs],
            entity_keys=[a["key"] for a in attrs],
            entity_matrix=self._entities.matrix,
            edges_unit_entity=edges,
            unit_chunks=unit_chunks,
            chunk_ids=self._chunks.ids,
            chunk_matrix=self._chunks.matrix,
        )

    def stats(self) -> dict[str, Any]:
        """Node and edge counts plus the extraction report (LLM tokens, selection)."""
        g = self._graph
        return {
            "chunks": g.num_nodes(CHUNK),
            "units": g.num_nodes(UNIT),
            "entities": g.num_nodes(ENTITY),
            "has_unit_edges": g.num_edges(HAS_UNIT),
            "mentions_edges": g.num_edges(MENTIONS),
            "extraction": dict(self.build_stats),
        }

    # ----------------------------------------------------------- persistence

    def _persist_state(self, folder: Path) -> None:
        self._units.persist(folder, "units")
        self._entities.persist(folder, "entities")
        self._chunks.persist(folder, "chunks")
        write_json(folder / _STATS_FILE, self.build_stats)

    def _load_state(self, folder: Path, manifest: dict[str, Any]) -> None:
        self._units = InMemoryVectorTable.load(folder, "units")
        self._entities = InMemoryVectorTable.load(folder, "entities")
        self._chunks = InMemoryVectorTable.load(folder, "chunks")
        for table in (self._units, self._entities, self._chunks):
            if len(table) and table.dim != self._embed_dim():
                raise ValueError(
                    f"index was built with {table.dim}-d embeddings; the embedder gives "
                    f"{self._embed_dim()}-d: load it with the embedder it was built with"
                )
        if (folder / _STATS_FILE).is_file():
            self.build_stats = read_json(folder / _STATS_FILE)
        self._view = None

    def _embed_dim(self) -> int:
        if not hasattr(self, "_dim"):
            self._dim = len(self.embed_model.get_text_embedding("dimension probe"))
        return self._dim

    # --------------------------------------------------------------- engines

    def as_retriever(self, **kwargs: Any):
        """A :class:`.QIterRetriever` over this index (keyword arguments go to it)."""
        from .retriever import QIterRetriever

        kwargs.setdefault("callback_manager", self._callback_manager)
        return QIterRetriever(self, **kwargs)

    def as_query_engine(self, llm=None, **kwargs: Any):
        """A ``RetrieverQueryEngine`` over :class:`.QIterRetriever` with CUE's answer prompt."""
        from .prompts import CUE_ANSWER_PROMPT

        kwargs.setdefault("text_qa_template", CUE_ANSWER_PROMPT)
        return super().as_query_engine(llm=llm, **kwargs)
