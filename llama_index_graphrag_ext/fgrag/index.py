"""``FGRAGIndex``: LlamaIndex's ``PropertyGraphIndex`` with FG-RAG's merge and entity vectors.

Indexing follows the paper's graph construction [P §3.1, Eqs. 1-3]: chunks
(1200 tokens, 100 overlap [P §6.1]) go through an extractor (LLM or the
LLM-free co-occurrence stand-in), same-name entities are merged into one node
whose descriptions are kept as a capped list (Eq. 2; the authors keep up to 50
and write no LLM summary), and each merged entity is embedded from its name and
descriptions for vector matching.

The graph lives in any ``PropertyGraphStore`` (``SimplePropertyGraphStore`` by
default, Neo4j and others when given): entity vectors are written on the
``EntityNode`` itself, descriptions and their source chunks as properties, so
the store alone is enough to rebuild everything. Retrieval reads an immutable
in-memory [`EntityGraph`][llama_index_graphrag_ext.fgrag.expansion.EntityGraph]
snapshot, rebuilt after each change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import (
    KG_NODES_KEY,
    KG_RELATIONS_KEY,
    ChunkNode,
    EntityNode,
    LabelledNode,
    PropertyGraphStore,
    Relation,
)
from llama_index.core.indices.property_graph import PropertyGraphIndex
from llama_index.core.ingestion.pipeline import arun_transformations
from llama_index.core.llms import LLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, Document, TransformComponent
from llama_index.core.storage.storage_context import StorageContext
from llama_index.core.vector_stores.types import BasePydanticVectorStore
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from ..core.compact_store import compact_storage_context
from ..core.defaults import resolve_embed_model
from ..core.embeddings import embed_texts
from ..core.llm import run_sync
from ..core.nodes import prepare_documents
from ..core.persist import atomic_dir, read_manifest, write_manifest
from ..core.vectors import StoreTables
from .expansion import ChunkMap, EntityGraph
from .extract import (
    BUILT_BY,
    DESCRIPTIONS,
    DISPLAY_NAME,
    SOURCES,
    default_extractor,
)
from .store import CompactPropertyGraphStore

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
KIND = "fgrag"
#: Characters of an entity's name + descriptions that are embedded (MiniLM reads ~256 tokens).
EMBED_CHARS = 2000


def default_chunker() -> SentenceSplitter:
    """The paper's chunking: 1200 tokens with 100 overlap [P §6.1]."""
    return SentenceSplitter(chunk_size=1200, chunk_overlap=100)


def entity_text(name: str, descriptions: Sequence[str]) -> str:
    """What is embedded for an entity: its name, then its descriptions.

    The authors embed the descriptions alone; the name is prepended here so a
    short query entity ("honey") matches its own node first.
    """
    return (f"{name}: " + " ".join(descriptions))[:EMBED_CHARS]


def _merge_lists(
    target: dict[str, Any], descs: Sequence[str], sources: Sequence[str], cap: int
) -> bool:
    """Append new (description, source) pairs up to ``cap``; return whether anything changed."""
    have = target.setdefault(DESCRIPTIONS, [])
    have_src = target.setdefault(SOURCES, [])
    while len(have_src) < len(have):
        have_src.append("")
    known = set(have)
    changed = False
    for text, src in zip(descs, sources, strict=False):
        if len(have) >= cap:
            break
        if text and text not in known:
            have.append(text)
            have_src.append(src)
            known.add(text)
            changed = True
    return changed


class FGRAGIndex(PropertyGraphIndex):
    """FG-RAG's graph index on LlamaIndex's ``PropertyGraphIndex``.

    Args:
        nodes: Chunk nodes to index (``from_documents`` chunks documents first).
        llm: LLM for extraction; ``None`` (or the embedded SmolLM2) builds the
            graph LLM-free, and the log says which one built it.
        kg_extractors: Extractors to use instead of the default one.
        property_graph_store: Any property graph store (default: in memory).
        embed_model: Embedder for entity vectors (explicit, ``Settings``, or the
            embedded MiniLM).
        max_descriptions_per_entity: Cap on an entity's merged descriptions
            (authors: 50).
        show_progress: Show progress bars.
        callback_manager: Callbacks; ``Settings`` when omitted.
        storage_context: A storage context to use.
        vector_store: A LlamaIndex vector store (Milvus, Qdrant, ...) for the
            entity vectors that query entities are matched against (Eqs. 6-7);
            ``None`` matches in memory. The vectors also stay on the entity
            nodes of the property graph store, which remains the source of truth.
        vector_namespace: Prefix of the entity table's name in the store (``fgrag``).
        **kwargs: Passed on to ``PropertyGraphIndex``.

    Example:
        >>> from llama_index.core import Document
        >>> index = FGRAGIndex.from_documents([Document(text="Ada Lovelace met Charles Babbage in London.")])  # doctest: +SKIP
        >>> engine = index.as_query_engine(llm=my_llm)  # doctest: +SKIP
    """

    def __init__(
        self,
        nodes: Sequence[BaseNode] | None = None,
        llm: LLM | None = None,
        kg_extractors: list[TransformComponent] | None = None,
        property_graph_store: PropertyGraphStore | None = None,
        embed_model: BaseEmbedding | None = None,
        max_descriptions_per_entity: int = 50,
        show_progress: bool = False,
        callback_manager: Any = None,
        storage_context: StorageContext | None = None,
        vector_store: BasePydanticVectorStore | None = None,
        vector_namespace: str | None = None,
        **kwargs: Any,
    ) -> None:
        # Kept apart from PropertyGraphIndex's own vector_store (which would embed
        # kg nodes its way): the entity vectors are FG-RAG's (see entity_text).
        self._store_tables = (
            StoreTables(vector_store, vector_namespace or KIND)
            if vector_store is not None
            else None
        )
        if max_descriptions_per_entity <= 0:
            raise ValueError("max_descriptions_per_entity must be > 0")
        kwargs.pop("embed_kg_nodes", None)  # entity vectors are ours (see entity_text)
        kwargs.pop("use_async", None)
        kwargs.pop("transformations_applied", None)
        self._fg_embed_model = resolve_embed_model(embed_model)
        self._max_descriptions = int(max_descriptions_per_entity)
        self._snapshot: EntityGraph | None = None
        self._snapshot_lock = threading.RLock()
        self._extractors_used = [type(e).__name__ for e in (kg_extractors or [])]
        extractors = kg_extractors or [default_extractor(llm)]
        self._extractors_used = [type(e).__name__ for e in extractors]
        if property_graph_store is None and (
            storage_context is None or storage_context.property_graph_store is None
        ):
            # Our in-memory default keeps the graph encoded (see fgrag/store.py);
            # a store the caller gives, of any kind, is used as it is.
            property_graph_store = CompactPropertyGraphStore()
        super().__init__(
            nodes=nodes,
            llm=llm,
            kg_extractors=extractors,
            property_graph_store=property_graph_store,
            embed_kg_nodes=False,
            use_async=True,
            callback_manager=callback_manager,
            storage_context=storage_context,
            show_progress=show_progress,
            **kwargs,
        )

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_documents(  # type: ignore[override]
        cls,
        documents: Sequence[Document],
        storage_context: StorageContext | None = None,
        show_progress: bool = False,
        callback_manager: Any = None,
        transformations: list[TransformComponent] | None = None,
        **kwargs: Any,
    ) -> FGRAGIndex:
        """Chunk documents (1200/100 tokens unless ``transformations`` says otherwise) and index them.

        Documents go through the suite's input hygiene first
        (:func:`~llama_index_graphrag_ext.core.nodes.prepare_documents`): empty and
        repeated ones are skipped and counted, two different texts under one id
        raise ``DuplicateDocumentError``.
        """
        kept, report = prepare_documents(documents)
        index = super().from_documents(  # type: ignore[return-value]
            kept,
            # Chunk nodes as compressed JSON (core/compact_store.py), like every index here.
            storage_context=storage_context or compact_storage_context(),
            show_progress=show_progress,
            callback_manager=callback_manager,
            transformations=transformations or [default_chunker()],
            **kwargs,
        )
        index.input_report = report
        return index

    @property
    def embed_model(self) -> BaseEmbedding:
        """The embedder of entity vectors (and of query entities)."""
        return self._fg_embed_model

    @property
    def extractors_used(self) -> list[str]:
        """Class names of the extractors that build this index's graph."""
        return list(self._extractors_used)

    def _insert_nodes(self, nodes: Sequence[BaseNode]) -> Sequence[BaseNode]:
        """Extract, merge same-name entities (Eq. 2), embed them and upsert everything."""
        nodes = list(nodes)
        if not nodes:
            return nodes
        nodes = run_sync(
            lambda: arun_transformations(
                nodes, self._kg_extractors, show_progress=self._show_progress
            )
        )
        entities: dict[str, EntityNode] = {}
        relations: dict[tuple[str, str, str], Relation] = {}
        others: list[LabelledNode] = []
        no_entity: list[str] = []
        for node in nodes:
            kg_nodes = node.metadata.pop(KG_NODES_KEY, None) or []
            kg_rels = node.metadata.pop(KG_RELATIONS_KEY, None) or []
            if not any(isinstance(kg, EntityNode) for kg in kg_nodes):
                no_entity.append(node.node_id)
            for kg in kg_nodes:
                if not isinstance(kg, EntityNode):
                    others.append(kg)
                    continue
                descs = list(kg.properties.get(DESCRIPTIONS) or [])
                srcs = [node.node_id] * len(descs)
                merged = entities.get(kg.id)
                if merged is None:
                    props = {
                        k: v for k, v in kg.properties.items() if k not in (DESCRIPTIONS, SOURCES)
                    }
                    merged = EntityNode(name=kg.name, label=kg.label, properties=props)
                    entities[kg.id] = merged
                _merge_lists(merged.properties, descs, srcs, self._max_descriptions)
            for rel in kg_rels:
                key = (rel.source_id, rel.label, rel.target_id)
                descs = list(rel.properties.get(DESCRIPTIONS) or [])
                merged_rel = relations.get(key)
                if merged_rel is None:
                    props = {
                        k: v for k, v in rel.properties.items() if k not in (DESCRIPTIONS, SOURCES)
                    }
                    merged_rel = Relation(
                        label=rel.label,
                        source_id=rel.source_id,
                        target_id=rel.target_id,
                        properties=props,
                    )
                    relations[key] = merged_rel
                _merge_lists(
                    merged_rel.properties,
                    descs,
                    [node.node_id] * len(descs),
                    self._max_descriptions,
                )
        if no_entity:
            # Retrieval reaches chunks only through entities: say which ones it cannot reach.
            logger.warning(
                "FG-RAG index: %d of %d chunk(s) gave no entity and no query can reach them "
                "(text the extractor cannot read, e.g. a language its NER model lacks): %s",
                len(no_entity),
                len(nodes),
                no_entity[:5],
            )
        store = self.property_graph_store
        with self._snapshot_lock:
            self._merge_with_store(store, entities, relations)
            self._embed_entities(list(entities.values()))
            self._store_entities(list(entities.values()))
            store.upsert_llama_nodes(nodes)
            if others:
                store.upsert_nodes(others)
            if entities:
                store.upsert_nodes(list(entities.values()))
            if relations:
                store.upsert_relations(list(relations.values()))
            self._snapshot = None
        logger.info(
            "FG-RAG index: %d chunk(s) -> %d entity and %d relation upsert(s) (%s)",
            len(nodes),
            len(entities),
            len(relations),
            ", ".join(self._extractors_used),
        )
        return nodes

    def _merge_with_store(
        self,
        store: PropertyGraphStore,
        entities: dict[str, EntityNode],
        relations: dict[tuple[str, str, str], Relation],
    ) -> None:
        """Fold in what the store already holds for these entities and relations (Eq. 2)."""
        if not entities:
            return
        existing = [n for n in store.get(ids=list(entities)) if isinstance(n, EntityNode)]
        for old in existing:
            new = entities[old.id]
            props = {
                **old.properties,
                **{k: v for k, v in new.properties.items() if k not in (DESCRIPTIONS, SOURCES)},
            }
            props[DESCRIPTIONS] = list(old.properties.get(DESCRIPTIONS) or [])
            props[SOURCES] = list(old.properties.get(SOURCES) or [])
            _merge_lists(
                props,
                new.properties.get(DESCRIPTIONS, []),
                new.properties.get(SOURCES, []),
                self._max_descriptions,
            )
            new.properties = props
        if not existing or not relations:
            return
        old_ids = [n.id for n in existing]
        for _, rel, _ in store.get_triplets(entity_names=old_ids):
            key = (rel.source_id, rel.label, rel.target_id)
            new_rel = relations.get(key)
            if new_rel is None:
                continue
            props = {**rel.properties}
            props[DESCRIPTIONS] = list(rel.properties.get(DESCRIPTIONS) or [])
            props[SOURCES] = list(rel.properties.get(SOURCES) or [])
            _merge_lists(
                props,
                new_rel.properties.get(DESCRIPTIONS, []),
                new_rel.properties.get(SOURCES, []),
                self._max_descriptions,
            )
            new_rel.properties = props

    def _embed_entities(self, entities: Sequence[EntityNode]) -> None:
        if not entities:
            return
        texts = [
            entity_text(
                e.properties.get(DISPLAY_NAME) or e.name, e.properties.get(DESCRIPTIONS, [])
            )
            for e in entities
        ]
        matrix = embed_texts(
            self._fg_embed_model, texts, show_progress=self._show_progress, desc="Entity vectors"
        )
        for entity, vector in zip(entities, matrix, strict=True):
            entity.embedding = vector.tolist()

    @property
    def external_vector_store(self) -> BasePydanticVectorStore | None:
        """The vector store holding the entity vectors (``None``: matched in memory)."""
        return self._store_tables.vector_store if self._store_tables is not None else None

    def _store_entities(self, entities: Sequence[EntityNode], gone: Sequence[str] = ()) -> None:
        """Write (or replace) entity vectors in the external store and drop ``gone`` ones."""
        if self._store_tables is None:
            return
        table = self._store_tables.table("entities")
        if gone:
            table.delete(list(gone))
        if entities:
            table.add([e.id for e in entities], np.asarray([e.embedding for e in entities]))

    # ----------------------------------------------------------------- deletion

    def delete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = False, **delete_kwargs: Any
    ) -> None:
        """Remove a document's chunks and every description extracted from them.

        Entities and relations left without descriptions are removed; the
        others are re-embedded from what remains.
        """
        store = self.property_graph_store
        with self._snapshot_lock:
            nodes = store.get()
            chunk_ids = {
                n.id for n in nodes if isinstance(n, ChunkNode) and _chunk_ref_doc(n) == ref_doc_id
            }
            if not chunk_ids:
                logger.warning("FG-RAG: document %s not found, nothing deleted", ref_doc_id)
                return
            touched, emptied = [], []
            for node in nodes:
                if isinstance(node, EntityNode) and _drop_sources(node.properties, chunk_ids):
                    (touched if node.properties.get(DESCRIPTIONS) else emptied).append(node)
            dead_rels, kept_rels = [], []
            for rel in _all_relations(store, [n.id for n in nodes if isinstance(n, EntityNode)]):
                if _drop_sources(rel.properties, chunk_ids):
                    (kept_rels if rel.properties.get(DESCRIPTIONS) else dead_rels).append(rel)
            self._embed_entities(touched)
            self._store_entities(touched, gone=[n.id for n in emptied])
            if touched:
                store.upsert_nodes(touched)
            if kept_rels:
                store.upsert_relations(kept_rels)
            if dead_rels:
                if isinstance(store, SimplePropertyGraphStore):
                    # LabelledPropertyGraph.delete_triplet also drops both end nodes,
                    # so the triplet and the relation are removed directly.
                    graph = store.graph
                    for rel in dead_rels:
                        graph.triplets.discard((rel.source_id, rel.id, rel.target_id))
                        graph.relations.pop(graph._get_relation_key(relation=rel), None)
                else:  # no generic one-relation delete: keep it, empty (snapshots skip it)
                    store.upsert_relations(dead_rels)
            store.delete(ids=sorted(chunk_ids | {n.id for n in emptied}))
            self._snapshot = None
        if delete_from_docstore:
            self.docstore.delete_ref_doc(ref_doc_id, raise_error=False)
        logger.info(
            "FG-RAG: deleted %s (%d chunk(s), %d entity(ies) emptied)",
            ref_doc_id,
            len(chunk_ids),
            len(emptied),
        )

    # ----------------------------------------------------------------- retrieval

    def graph_snapshot(self) -> EntityGraph:
        """The current read-only snapshot of the graph (rebuilt after changes)."""
        with self._snapshot_lock:
            if self._snapshot is None:
                snapshot = build_snapshot(self.property_graph_store, self._fg_embed_model)
                if self._store_tables is not None:  # Eqs. 6-7's Match in the vector store
                    snapshot.searcher = self._store_tables.row_search(
                        "entities", snapshot, snapshot.names, snapshot.vectors
                    )
                self._snapshot = snapshot
            return self._snapshot

    def as_retriever(self, **kwargs: Any) -> BaseRetriever:  # type: ignore[override]
        """An [`FGRAGRetriever`][llama_index_graphrag_ext.fgrag.retriever.FGRAGRetriever] over this index."""
        from .retriever import FGRAGRetriever

        return FGRAGRetriever(self, **kwargs)

    def as_query_engine(self, llm: LLM | None = None, **kwargs: Any):  # type: ignore[override]
        """An [`FGRAGQueryEngine`][llama_index_graphrag_ext.fgrag.engine.FGRAGQueryEngine] over this index."""
        from .engine import FGRAGQueryEngine

        return FGRAGQueryEngine(self, llm=llm or self._llm, **kwargs)

    # ----------------------------------------------------------------- persistence

    def persist(self, persist_dir: str | Path) -> None:
        """Write the storage context and FG-RAG's settings atomically to ``persist_dir``.

        With a ``vector_store`` the manifest also records its identity and the
        entity table's size; the property graph store keeps the vectors too.
        """
        extra = {}
        if self._store_tables is not None:
            extra["vector_store"] = self._store_tables.describe()
        with self._snapshot_lock, atomic_dir(persist_dir) as tmp:
            self.storage_context.persist(persist_dir=str(tmp))
            write_manifest(
                tmp,
                KIND,
                FORMAT_VERSION,
                max_descriptions_per_entity=self._max_descriptions,
                extractors=self._extractors_used,
                embed_model=getattr(self._fg_embed_model, "model_name", ""),
                **extra,
            )

    @classmethod
    def load(
        cls,
        persist_dir: str | Path,
        embed_model: BaseEmbedding | None = None,
        llm: LLM | None = None,
        property_graph_store: PropertyGraphStore | None = None,
        vector_store: BasePydanticVectorStore | None = None,
        **kwargs: Any,
    ) -> FGRAGIndex:
        """Load an index written by :meth:`persist`.

        Args:
            persist_dir: The folder.
            embed_model: Must be the embedder the index was built with.
            llm: LLM for later inserts and for the query engine.
            property_graph_store: An external store to use instead of the persisted one.
            vector_store: The vector store the entity vectors were kept in (the same
                collection): its rows are reused when present, else written.
                Without it, entities are matched in memory.
            **kwargs: Passed to the constructor.

        Raises:
            IndexFormatError: Not an FG-RAG folder, or an unsupported format version.
        """
        manifest = read_manifest(persist_dir, KIND, FORMAT_VERSION)
        storage_context = StorageContext.from_defaults(persist_dir=str(persist_dir))
        store = property_graph_store or storage_context.property_graph_store
        if property_graph_store is None and type(store) is SimplePropertyGraphStore:
            # The persisted JSON is the stock layout; hold it compactly again.
            store = CompactPropertyGraphStore(store.graph)
            storage_context.property_graph_store = store
        kwargs.setdefault("max_descriptions_per_entity", manifest["max_descriptions_per_entity"])
        recorded = manifest.get("vector_store") or {}
        if vector_store is not None:
            kwargs.setdefault("vector_namespace", recorded.get("namespace"))
        index = cls(
            nodes=[],
            llm=llm,
            property_graph_store=store,
            embed_model=embed_model,
            storage_context=storage_context,
            vector_store=vector_store,
            **kwargs,
        )
        if index._store_tables is not None:
            snapshot = index.graph_snapshot()
            index._store_tables.attach("entities", snapshot.names, snapshot.vectors)
        return index

    def stats(self) -> dict[str, Any]:
        """Counts for reports: entities, relations, chunks and which extractor built them."""
        graph = self.graph_snapshot()
        return {
            "entities": len(graph),
            "relations": graph.num_relations,
            "chunks": len(graph.chunks),
            "extractors": self.extractors_used,
        }


# --------------------------------------------------------------------------- helpers


def _chunk_ref_doc(node: ChunkNode) -> str | None:
    try:
        return metadata_dict_to_node(node.properties).ref_doc_id
    except Exception:
        return None


def _drop_sources(props: dict[str, Any], chunk_ids: set[str]) -> bool:
    """Remove descriptions that came from ``chunk_ids``; return whether any did."""
    descs = list(props.get(DESCRIPTIONS) or [])
    srcs = list(props.get(SOURCES) or [])
    keep = [i for i, s in enumerate(srcs) if s not in chunk_ids]
    if len(keep) == len(srcs):
        return False
    props[DESCRIPTIONS] = [descs[i] for i in keep if i < len(descs)]
    props[SOURCES] = [srcs[i] for i in keep]
    return True


def _all_relations(store: PropertyGraphStore, entity_ids: Sequence[str]) -> list[Relation]:
    """Every relation of the store (fast path for the in-memory store)."""
    if isinstance(store, SimplePropertyGraphStore):
        return list(store.graph.get_all_relations())
    if not entity_ids:
        return []
    seen: dict[tuple[str, str, str], Relation] = {}
    for _, rel, _ in store.get_triplets(entity_names=list(entity_ids)):
        seen.setdefault((rel.source_id, rel.label, rel.target_id), rel)
    return list(seen.values())


def build_snapshot(store: PropertyGraphStore, embed_model: BaseEmbedding) -> EntityGraph:
    """Read a property graph store into an [`EntityGraph`][llama_index_graphrag_ext.fgrag.expansion.EntityGraph].

    Entities without a stored vector (a store filled by another extractor, or
    one that does not return vectors) are embedded here. Entities without
    descriptions get their name as their one description, so graphs built by
    LlamaIndex's own extractors work too.
    """
    if isinstance(store, CompactPropertyGraphStore):
        return _snapshot_from_compact(store, embed_model)
    entities: list[EntityNode] = []
    chunks: dict[str, BaseNode] = {}
    for node in store.get():
        if isinstance(node, EntityNode):
            entities.append(node)
        elif isinstance(node, ChunkNode):
            try:
                chunk = metadata_dict_to_node(node.properties)
                chunk.set_content(node.text)
                chunks[node.id] = chunk
            except Exception:  # a chunk stored without LlamaIndex metadata
                logger.debug("chunk %s has no LlamaIndex metadata; skipped", node.id)
    names = [e.id for e in entities]
    displays = [e.properties.get(DISPLAY_NAME) or e.name for e in entities]
    descs = [list(e.properties.get(DESCRIPTIONS) or [e.name]) for e in entities]
    srcs = [list(e.properties.get(SOURCES) or []) for e in entities]
    missing = [i for i, e in enumerate(entities) if not e.embedding]
    vectors = np.zeros((len(entities), 0), dtype=np.float32)
    if entities:
        if missing:
            logger.info("FG-RAG snapshot: embedding %d entity(ies) without vectors", len(missing))
            fresh = embed_texts(embed_model, [entity_text(displays[i], descs[i]) for i in missing])
            for row, i in enumerate(missing):
                entities[i].embedding = fresh[row].tolist()
        vectors = np.asarray([e.embedding for e in entities], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1.0, norms)
    index_of = {name: i for i, name in enumerate(names)}
    ends, rel_descs, rel_srcs = [], [], []
    for rel in _all_relations(store, names):
        a, b = index_of.get(rel.source_id), index_of.get(rel.target_id)
        texts = list(rel.properties.get(DESCRIPTIONS) or [])
        if a is None or b is None or a == b:
            continue
        if not texts and BUILT_BY in rel.properties:
            continue  # emptied by a deletion
        ends.append((a, b))
        rel_descs.append(texts or [f"{displays[a]} {rel.label} {displays[b]}"])
        rel_srcs.append(list(rel.properties.get(SOURCES) or []))
    return EntityGraph(
        names,
        displays,
        descs,
        srcs,
        vectors,
        np.asarray(ends, dtype=np.int64).reshape(-1, 2),
        rel_descs,
        rel_srcs,
        chunks,
    )


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, computed exactly as the general path does.

    The vectors from ``embed_texts`` are unit length already, but dividing
    again moves the last bit of some entries, and with near-tied scores that
    changes rankings; so the snapshot keeps this copy rather than sharing the
    store's matrix, to give the very same results on any store.
    """
    if vectors.size == 0:
        return vectors
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def _snapshot_from_compact(
    store: CompactPropertyGraphStore, embed_model: BaseEmbedding
) -> EntityGraph:
    """``build_snapshot`` for the compact store: its raw fields, no pydantic objects.

    Same entities, relations, order and fallbacks as the general path; the
    entity matrix is the store's own where every entity has a vector.
    """
    keys, names, displays, descs, srcs = [], [], [], [], []
    for key, fields in store.raw_entities():
        props = fields.get("properties") or {}
        keys.append(key)
        # EntityNode.id, as the general path uses; it differs from the store key
        # for the bare end nodes LlamaIndex adds for names with a '"'.
        names.append(fields["name"].replace('"', " "))
        displays.append(props.get(DISPLAY_NAME) or fields["name"])
        descs.append(list(props.get(DESCRIPTIONS) or [fields["name"]]))
        srcs.append(list(props.get(SOURCES) or []))
    chunks: dict[str, BaseNode] = {}
    for key, fields in store.raw_chunks():
        try:
            chunk = metadata_dict_to_node(fields.get("properties") or {})
            chunk.set_content(fields.get("text", ""))
            chunks[key] = chunk
        except Exception:  # a chunk stored without LlamaIndex metadata
            logger.debug("chunk %s has no LlamaIndex metadata; skipped", key)
    vectors = store.entity_matrix(keys) if keys else None
    if vectors is None and keys:
        missing = [i for i, key in enumerate(keys) if store.vectors.get(key) is None]
        logger.info("FG-RAG snapshot: embedding %d entity(ies) without vectors", len(missing))
        fresh = embed_texts(embed_model, [entity_text(displays[i], descs[i]) for i in missing])
        fresh_rows = dict(zip(missing, fresh, strict=True))
        vectors = np.asarray(
            [
                fresh_rows[i] if i in fresh_rows else store.vectors.get(k)
                for i, k in enumerate(keys)
            ],
            dtype=np.float32,
        )
    if vectors is None:
        vectors = np.zeros((0, 0), dtype=np.float32)
    vectors = _unit_rows(np.asarray(vectors, dtype=np.float32))
    index_of = {name: i for i, name in enumerate(names)}
    ends, rel_descs, rel_srcs = [], [], []
    for fields in store.raw_relations():
        props = fields.get("properties") or {}
        a, b = index_of.get(fields["source_id"]), index_of.get(fields["target_id"])
        texts = list(props.get(DESCRIPTIONS) or [])
        if a is None or b is None or a == b:
            continue
        if not texts and BUILT_BY in props:
            continue  # emptied by a deletion
        ends.append((a, b))
        rel_descs.append(texts or [f"{displays[a]} {fields['label']} {displays[b]}"])
        rel_srcs.append(list(props.get(SOURCES) or []))
    return EntityGraph(
        names,
        displays,
        descs,
        srcs,
        vectors,
        np.asarray(ends, dtype=np.int64).reshape(-1, 2),
        rel_descs,
        rel_srcs,
        ChunkMap(chunks),
    )


def describe_entity(graph: EntityGraph, name: str) -> dict[str, Any]:
    """One entity's record in a snapshot (for debugging and docs)."""
    i = graph.index_of[name]
    return {
        "name": name,
        "display_name": graph.display_names[i],
        "descriptions": graph.descriptions[i],
        "source_chunks": graph.sources[i],
        "degree": graph.degree(i),
    }


__all__ = ["FGRAGIndex", "build_snapshot", "default_chunker", "describe_entity", "entity_text"]
