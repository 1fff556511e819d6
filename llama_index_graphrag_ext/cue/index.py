"""MultiPartiteIndex: CUE-RAG's three-layer graph of chunks, knowledge units and entities.

Algorithm 1 (CUE-Index): chunks ``V_T`` contain knowledge units ``V_K`` (``E_c``, kind
``has_unit``); units mention entities ``V_e`` (``E_e``, kind ``mentions``); no other
edges (§2.1). Decisions the paper leaves open (digest §8):

* Units are content-addressed: the same statement in two chunks is one node.
* Mentions merge under :func:`~llama_index_graphrag_ext.core.text.normalize_entity`;
  the entity keeps (and is embedded as) the first surface form seen.
* Labels: spaCy's OntoNotes labels minus the purely numeric ones (DATE, TIME stay).
* Deleting a chunk drops the units left with no chunk, then the entities left with
  no unit; shared ones stay.
"""

from __future__ import annotations

import logging
import weakref
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode, MetadataMode
from tqdm.auto import tqdm

from ..core.graph import TypedGraph
from ..core.index import GraphIndexBase
from ..core.persist import read_json, write_json
from ..core.text.parallel import available_processes
from ..core.vectors import InMemoryVectorTable
from ..core.windows import ChunkWindows, chunk_of, window_rows
from .config import CUEConfig
from .extractor import KnowledgeUnitExtractor
from .layers import LayerGrowth, Layers
from .llm_units import STEP as UNIT_STEP
from .prompts import CUE_ANSWER_PROMPT
from .retriever import QIterRetriever
from .vectors import index_vectors
from .view import CueGraphView, view_from_pairs

logger = logging.getLogger(__name__)

_STATS_FILE = "cue_stats.json"
#: The vector table of long chunks' windows.
_WINDOWS = "chunk_windows"
#: The extractor's fields that are settings of :class:`.CUEConfig` (the rest are objects).
_EXTRACTOR_FIELDS = tuple(
    f for f in KnowledgeUnitExtractor.model_fields if f in CUEConfig.field_sections()
)


def make_extractor(config: CUEConfig) -> KnowledgeUnitExtractor:
    """The knowledge-unit extractor a config describes."""
    values = {**config.graph.model_dump(), **config.llm.llm_settings()}
    values["nlp_processes"] = values["nlp_processes"] or available_processes()
    return KnowledgeUnitExtractor(**values)


def _extractor_settings(extractor: KnowledgeUnitExtractor, config: CUEConfig) -> dict[str, Any]:
    """The settings of ``extractor`` that differ from ``config``'s."""
    flat = config.flat()
    mine = {k: getattr(extractor, k) for k in _EXTRACTOR_FIELDS}
    return {k: v for k, v in mine.items() if v != flat[k]}


class MultiPartiteIndex(GraphIndexBase):
    """Chunks, knowledge units and entities, with unit and entity embeddings (CUE-RAG §3.2).

    The graph is held as arrays (:mod:`.layers`); :attr:`graph` makes a
    :class:`~llama_index_graphrag_ext.core.graph.TypedGraph` of it on demand.

    Args:
        nodes: Chunk nodes.
        config: A :class:`~.config.CUEConfig` or preset name.
        extractor: A :class:`.KnowledgeUnitExtractor` to use instead of the one the
            config describes (its settings then become the config's).
        **kwargs: The :class:`~llama_index_graphrag_ext.core.index.GraphIndexBase`
            arguments (``embed_model``, ``llm``, ...) and config fields by name.
    """

    index_kind = "cue-multipartite"
    format_version = 2
    config_class = CUEConfig
    #: Chunks whose units are made at a time while building (see :class:`.ExtractionRun`).
    extract_batch: int = 256

    def _configure(self, extractor: KnowledgeUnitExtractor | None = None) -> None:
        if extractor is None:
            extractor = make_extractor(self.config)
        else:
            self.config = self.config.updated(_extractor_settings(extractor, self.config))
        self.extractor = extractor
        self._layers = Layers()
        # Set only while a persisted graph is being read back (see _load_state).
        self._graph: TypedGraph | None = None
        self._graph_ref: weakref.ref[TypedGraph] | None = None
        self._units = InMemoryVectorTable()
        self._entities = InMemoryVectorTable()
        self._chunks = InMemoryVectorTable()
        # The windows of chunks longer than the embedder's window (core/windows.py).
        self._windows = InMemoryVectorTable()
        self._view: CueGraphView | None = None
        self.build_stats: dict[str, Any] = {}

    # ----------------------------------------------------------------- build

    def _add_chunks(self, nodes: Sequence[BaseNode]) -> None:
        if not nodes:
            return
        if self.extractor.alpha > 0:  # alpha = 0 never resolves an LLM
            index_choice = self.llm_choice if self.extractor.llm is None else None
            self.extractor.attach_steps(self.llm_steps, index_choice)
        else:
            self.llm_steps.chose_llm_free(
                UNIT_STEP, "sentence units", "alpha = 0 (the paper's LLM-free mode)"
            )
            self.llm_steps.count(UNIT_STEP, len(nodes))
        if self.extractor.embed_model is None:
            self.extractor.embed_model = self.embed_model
        self.extractor.show_progress = getattr(self, "_show_progress", False)
        growth = LayerGrowth(
            self._known_row(self._units),
            self._known_row(self._entities),
            len(self._units),
            len(self._entities),
        )
        run = self.extractor.start(nodes)
        first_row = len(self._chunks)
        no_entity: list[str] = []
        progress = getattr(self, "_show_progress", False)
        parts: list[tuple] = []
        vector_stats: Counter[str] = Counter()
        chunk_windows: list[np.ndarray | None] = []
        # One bar over every chunk (a bar per batch restarted at 0/256 with a wild ETA).
        bar = tqdm(total=len(nodes), desc="CUE-RAG units, entities, vectors", unit="chunk",
                   disable=not progress, leave=False)  # fmt: skip
        # A batch at a time, keeping only the compact growth; each batch is embedded
        # while the parse workers parse the next ones (ExtractionRun parses ahead).
        for start, units in run.batches(self.extract_batch):
            units_before, entities_before = len(growth.unit_texts), len(growth.entity_names)
            growth.add(first_row + start, units)
            no_entity += [
                nodes[start + i].node_id
                for i, chunk_units in enumerate(units)
                if not any(u.entities for u in chunk_units)
            ]
            batch_nodes = nodes[start : start + len(units)]
            del units
            chunk_texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in batch_nodes]
            *vectors, batch_stats = index_vectors(
                self.embed_model,
                chunk_texts,
                growth.last_batch(units_before, entities_before),
                first_row + start,
                units=self.config.vectors.unit_vectors,
                entities=self.config.vectors.entity_vectors,
                on_unavailable=self.config.vectors.late_fallback,
                show_progress=False,
            )
            *vectors, windows = vectors
            parts.append(tuple(vectors))
            chunk_windows += windows
            vector_stats.update(batch_stats)
            bar.update(len(batch_nodes))
        bar.close()
        stats = run.stats()
        del run
        if no_entity:
            logger.warning(
                "CUE index: %d of %d chunk(s) have no entity; Q-Iter paths cannot reach them, "
                "only the dense fill can (e.g. a language the NER model lacks): %s",
                len(no_entity),
                len(nodes),
                no_entity[:5],
            )
        chunk_vectors, unit_vectors, entity_vectors = (
            _stacked([p[i] for p in parts]) for i in range(3)
        )
        del parts
        stats.update(vector_stats)
        # Everything is embedded: the tables and the layers change together.
        self._chunks.add([n.node_id for n in nodes], chunk_vectors)
        ids, windows = window_rows([n.node_id for n in nodes], chunk_windows)
        if windows is not None:
            self._windows.add(ids, windows)
        if unit_vectors is not None:
            self._units.add(list(growth.unit_rows), unit_vectors)
        if entity_vectors is not None:
            self._entities.add(list(growth.entity_rows), entity_vectors)
        self._layers = self._layers.extended(growth)
        self._merge_stats(stats)
        self._changed()
        logger.info(
            "CUE index: +%d chunks, +%d units, +%d entities (%s LLM tokens)",
            len(nodes),
            len(growth.unit_texts),
            len(growth.entity_names),
            stats.get("llm_total_tokens", 0),
        )

    @staticmethod
    def _known_row(table: InMemoryVectorTable):
        def row(node_id: str) -> int | None:
            return table.row_of(node_id) if node_id in table else None

        return row

    def _merge_stats(self, stats: dict[str, Any]) -> None:
        for key, value in stats.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "alpha":
                self.build_stats[key] = self.build_stats.get(key, 0) + value
            else:
                self.build_stats[key] = value

    def _remove_chunks(self, node_ids: Sequence[str]) -> None:
        rows = [self._chunks.row_of(c) for c in node_ids]
        layers, dead_units, dead_entities = self._layers.without_chunks(rows, len(self._chunks))
        unit_ids, entity_ids = self._units.ids, self._entities.ids
        self._chunks.delete(node_ids)
        gone = set(node_ids)
        self._windows.delete([w for w in self._windows.ids if chunk_of(w) in gone])
        self._units.delete([unit_ids[r] for r in dead_units.tolist()])
        self._entities.delete([entity_ids[r] for r in dead_entities.tolist()])
        self._layers = layers
        self._changed()

    def _changed(self) -> None:
        """Forget what was derived from the old state: the view and any graph handed out."""
        self._view = None
        self._graph_ref = None

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

    # ----------------------------------------------------------------- graph

    @property
    def graph(self) -> TypedGraph:
        """The chunk-unit-entity graph as a :class:`TypedGraph` (for ``viz`` and persistence).

        A snapshot made on demand, kept only while a caller holds it (it is large).
        """
        with self._lock:
            graph = self._graph_ref() if self._graph_ref is not None else None
            if graph is None:
                graph = self._layers.typed_graph(
                    self._chunks.ids, self._units.ids, self._entities.ids
                )
                self._graph_ref = weakref.ref(graph)
            return graph

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
        layers = self._layers
        return view_from_pairs(
            unit_ids=self._units.ids,
            unit_texts=layers.unit_texts,
            unit_matrix=self._units.matrix,
            entity_ids=self._entities.ids,
            entity_names=layers.entity_names,
            entity_matrix=self._entities.matrix,
            unit_entity=layers.unit_entity,
            unit_chunk=layers.unit_chunk,
            chunk_ids=self._chunks.ids,
            chunk_matrix=self._chunks.matrix,
            chunk_windows=ChunkWindows.from_table(
                self._windows.ids,
                self._windows.matrix,
                {c: row for row, c in enumerate(self._chunks.ids)},
            ),
        )

    def stats(self) -> dict[str, Any]:
        """Node and edge counts plus the extraction report (LLM tokens, selection)."""
        layers = self._layers
        return {
            "chunks": len(self._chunks),
            "units": layers.num_units,
            "entities": layers.num_entities,
            "has_unit_edges": len(layers.unit_chunk),
            "mentions_edges": len(layers.unit_entity),
            "extraction": dict(self.build_stats),
        }

    # ----------------------------------------------------------- persistence

    def _persist_state(self, folder: Path) -> None:
        self._units.persist(folder, "units")
        self._entities.persist(folder, "entities")
        self._chunks.persist(folder, "chunks")
        self._windows.persist(folder, _WINDOWS)
        write_json(folder / _STATS_FILE, self.build_stats)

    def _load_state(self, folder: Path, manifest: dict[str, Any]) -> None:
        self._units = InMemoryVectorTable.load(folder, "units")
        self._entities = InMemoryVectorTable.load(folder, "entities")
        self._chunks = InMemoryVectorTable.load(folder, "chunks")
        self._windows = InMemoryVectorTable.load(folder, _WINDOWS)
        for table in (self._units, self._entities, self._chunks):
            if len(table) and table.dim != self._embed_dim():
                raise ValueError(
                    f"index was built with {table.dim}-d embeddings; the embedder gives "
                    f"{self._embed_dim()}-d: load it with the embedder it was built with"
                )
        if (folder / _STATS_FILE).is_file():
            self.build_stats = read_json(folder / _STATS_FILE)
        # The base class read graph.json.gz into self._graph: keep its arrays, drop it.
        graph, self._graph = self._graph, None
        if graph is not None:
            self._layers = Layers.from_typed_graph(
                graph, self._chunks.ids, self._units.ids, self._entities.ids
            )
        elif len(self._units):
            raise ValueError(f"{folder}: the index's graph file is missing")
        self._changed()

    def _embed_dim(self) -> int:
        if not hasattr(self, "_dim"):
            self._dim = len(self.embed_model.get_text_embedding("dimension probe"))
        return self._dim

    # --------------------------------------------------------------- engines

    def as_retriever(self, **kwargs: Any) -> QIterRetriever:
        """A :class:`.QIterRetriever` with the index's config (``kwargs`` override it)."""
        kwargs.setdefault("callback_manager", self._callback_manager)
        return QIterRetriever(self, **kwargs)

    def as_query_engine(self, llm=None, **kwargs: Any):
        """A ``RetrieverQueryEngine`` over :meth:`as_retriever` with CUE's answer prompt."""
        kwargs.setdefault("text_qa_template", CUE_ANSWER_PROMPT)
        return super().as_query_engine(llm=llm, **kwargs)


def _stacked(arrays: list[np.ndarray | None]) -> np.ndarray | None:
    """The batches' vectors in order (None where no batch had any)."""
    present = [a for a in arrays if a is not None and len(a)]
    return np.vstack(present) if present else None
