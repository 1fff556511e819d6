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
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import (
    ChunkNode,
    EntityNode,
    PropertyGraphStore,
    Relation,
)
from llama_index.core.indices.property_graph import PropertyGraphIndex
from llama_index.core.ingestion.pipeline import run_transformations
from llama_index.core.llms import LLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, Document, TransformComponent
from llama_index.core.settings import Settings
from llama_index.core.storage.index_store import SimpleIndexStore
from llama_index.core.storage.storage_context import StorageContext
from llama_index.core.vector_stores.types import BasePydanticVectorStore
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from ..core.aio import OffLoopWrites
from ..core.compact_store import CompactKVStore, compact_storage_context
from ..core.defaults import resolve_embed_model
from ..core.embeddings import embed_texts
from ..core.llm import LLMChoice, LLMSteps, choose_llm, run_sync
from ..core.nodes import prepare_documents
from ..core.persist import (
    INDEX_STORE_FILE,
    SuiteIndexList,
    atomic_dir,
    read_manifest,
    write_manifest,
)
from ..core.vectors import StoreTables
from .expansion import EntityGraph
from .extract import (
    DESCRIPTIONS,
    DISPLAY_NAME,
    SOURCES,
    CooccurrenceExtractor,
    FGRAGExtractor,
    default_extractor,
)
from .merge import GraphMerge, MergedGraph
from .snapshot import _all_relations, build_snapshot, entity_text
from .store import CompactPropertyGraphStore, unit_rows

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
KIND = "fgrag"
#: Manifest value of ``entity_vectors``: the persisted entity vectors are unit rows.
UNIT_ROWS = "unit-rows"
#: Chunks (and documents) per extraction batch: the working set of a build
#: is one batch's nodes and KG objects, not the corpus's (see ``_build_from_documents``).
EXTRACT_BATCH = 256
#: Merged entities or relations per store upsert (bounds the objects made for one call).
WRITE_BATCH = 4096


def default_chunker() -> SentenceSplitter:
    """The paper's chunking: 1200 tokens with 100 overlap [P §6.1]."""
    return SentenceSplitter(chunk_size=1200, chunk_overlap=100)


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


class FGRAGIndex(OffLoopWrites, PropertyGraphIndex):
    """FG-RAG's graph index on LlamaIndex's ``PropertyGraphIndex``.

    Args:
        nodes: Chunk nodes to index (``from_documents`` chunks documents first).
        llm: LLM for extraction and the query engine; without one the suite's
            rule picks it once (``Settings.llm``, the environment, the embedded
            SmolLM2). An LLM that cannot write the records (the embedded
            SmolLM2) or none builds the graph LLM-free, and a log line says so;
            :attr:`llm_steps` records which.
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
        llm_options: Settings of the default LLM extractor (``max_concurrency``,
            ``max_attempts``, ``timeout``, ``cache_path``, ``on_llm_failure``).
        llm_steps: A step ledger to record into (one that planned ``kg_extractors``
            with :func:`~.extract.default_extractor`); a fresh one by default.
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
        llm_options: dict[str, Any] | None = None,
        llm_steps: LLMSteps | None = None,
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
        #: Which LLM and tier extraction used, and its fallbacks (persisted).
        self.llm_steps = llm_steps if llm_steps is not None else LLMSteps("FGRAGIndex")
        self._llm_arg = llm
        self._llm_choice: LLMChoice | None = None
        if kg_extractors:
            extractors = list(kg_extractors)
            for extractor in extractors:
                if isinstance(extractor, FGRAGExtractor):
                    extractor.attach_steps(self.llm_steps)
            no_llm = not any(isinstance(e, FGRAGExtractor) for e in extractors)
            if no_llm and self.llm_steps.record("extraction") is None:
                self.llm_steps.chose_llm_free(
                    "extraction", "spaCy co-occurrence graph", "kg_extractors without an LLM"
                )
        else:
            # The suite's rule, once: Settings.llm or the environment give the
            # paper's LLM extraction; the embedded SmolLM2 cannot (warned).
            extractors = [
                default_extractor(self.llm_choice, steps=self.llm_steps, **(llm_options or {}))
            ]
        self._extractors_used = [type(e).__name__ for e in extractors]
        if property_graph_store is None and (
            storage_context is None or storage_context.property_graph_store is None
        ):
            # Our in-memory default keeps the graph encoded (see fgrag/store.py);
            # a store the caller gives, of any kind, is used as it is.
            property_graph_store = CompactPropertyGraphStore()
        super().__init__(
            nodes=nodes,
            llm=self._llm_choice.llm if self._llm_choice is not None else llm,
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
        # Chunk nodes as compressed JSON (core/compact_store.py), like every index here.
        storage_context = storage_context or compact_storage_context()
        callback_manager = callback_manager or Settings.callback_manager
        transformations = transformations or [default_chunker()]
        # LlamaIndex's from_documents, with the chunking streamed into the build
        # (see _build_from_documents); transformations still get the kwargs.
        with callback_manager.as_trace("index_construction"):
            for doc in kept:
                storage_context.docstore.set_document_hash(doc.id_, doc.hash)
            index = cls(
                nodes=[],
                storage_context=storage_context,
                callback_manager=callback_manager,
                show_progress=show_progress,
                transformations=transformations,
                **kwargs,
            )
            index._build_from_documents(kept, transformations, **kwargs)
        index.input_report = report
        return index

    @property
    def embed_model(self) -> BaseEmbedding:
        """The embedder of entity vectors (and of query entities)."""
        return self._fg_embed_model

    @property
    def llm_choice(self) -> LLMChoice:
        """The index's LLM as the suite's rule picked it, once."""
        if self._llm_choice is None:
            self._llm_choice = choose_llm(self._llm_arg)
        return self._llm_choice

    @property
    def extractors_used(self) -> list[str]:
        """Class names of the extractors that build this index's graph."""
        return list(self._extractors_used)

    def _insert_nodes(self, nodes: Sequence[BaseNode]) -> Sequence[BaseNode]:
        """Extract, merge same-name entities (Eq. 2), embed them and upsert everything."""
        nodes = list(nodes)
        if not nodes:
            return nodes
        merge = GraphMerge(self._max_descriptions)
        run_sync(lambda: self._aextract(_batches(nodes, EXTRACT_BATCH), merge))

        def write_chunks(store: PropertyGraphStore) -> None:
            for batch in _batches(nodes, EXTRACT_BATCH):
                store.upsert_llama_nodes(batch)

        self._write(merge, write_chunks)
        return nodes

    def _build_from_documents(
        self,
        documents: Sequence[Document],
        transformations: list[TransformComponent],
        **kwargs: Any,
    ) -> None:
        """Chunk, add to the docstore and extract a batch of documents at a time.

        Only the ids of the chunks are kept across batches; their nodes are
        read back from the docstore when the graph is written. Chunking every
        document first (LlamaIndex's ``from_documents``) kept all chunk nodes,
        and extracting all chunks at once kept every chunk's ``EntityNode`` and
        ``Relation`` objects, alive together; the long-lived objects made
        among them then kept their memory resident after the build.
        """
        merge = GraphMerge(self._max_descriptions)
        chunk_ids: list[str] = []

        def chunk_batches() -> Iterator[list[BaseNode]]:
            for batch in _batches(documents, EXTRACT_BATCH):
                nodes = run_transformations(batch, transformations, **kwargs)
                self.docstore.add_documents(nodes, allow_update=True)
                chunk_ids.extend(node.node_id for node in nodes)
                yield from _batches(nodes, EXTRACT_BATCH)

        run_sync(lambda: self._aextract(chunk_batches(), merge))
        self._write(merge, lambda store: self._write_stored_chunks(store, chunk_ids))

    def _write_stored_chunks(self, store: PropertyGraphStore, chunk_ids: Sequence[str]) -> None:
        """Write the chunks just added to the docstore into the graph store.

        The compact store keeps the docstore's own value of each chunk when
        the docstore is a compact one (see ``upsert_docstore_chunks``): the
        graph store's chunk nodes are then no second copy of the chunks'
        text and node JSON. Other stores get the nodes read back.
        """
        for ids in _batches(chunk_ids, EXTRACT_BATCH):
            values = _docstore_values(self.docstore, ids)
            if values is not None and isinstance(store, CompactPropertyGraphStore):
                store.upsert_docstore_chunks(ids, values)
                continue
            nodes = self.docstore.get_nodes(ids)
            # The docstore's own id strings (equal values) become the graph
            # store's keys: one string per chunk instead of two, and none
            # made among the decoding's temporaries.
            for node, node_id in zip(nodes, ids, strict=True):
                node.id_ = node_id
            store.upsert_llama_nodes(nodes)

    async def _aextract(self, batches: Iterable[list[BaseNode]], merge: GraphMerge) -> None:
        """Run the extractors batch after batch and log each batch's graph in ``merge``.

        As LlamaIndex's ``arun_transformations`` does, but the co-occurrence
        extractor (spaCy: CPU only, no I/O to overlap) runs in this thread
        rather than in a worker thread. What spaCy's libraries allocate on a
        worker thread lands in that thread's malloc arena, whose free top glibc
        does not give back: at 4,000 chunks extraction kept 50 MB resident
        that way, 18 MB in this thread (and a new worker per batch, 48 MB more).
        All batches run in one event loop, so LLM extractors keep their
        concurrency within a batch.
        """
        for batch in batches:
            for extractor in self._kg_extractors:
                if isinstance(extractor, CooccurrenceExtractor):
                    batch = extractor(batch)
                else:
                    batch = await extractor.acall(batch)
            for node in batch:
                merge.add(node)
            merge.end_batch()

    def _write(self, merge: GraphMerge, write_chunks: Callable[[PropertyGraphStore], None]) -> None:
        """Write the chunks and the merged graph to the store (and entity vectors to the vector store)."""
        merged = merge.finish()
        if merge.no_entity:
            # Retrieval reaches chunks only through entities: say which ones it cannot reach.
            logger.warning(
                "FG-RAG index: %d of %d chunk(s) gave no entity and no query can reach them "
                "(text the extractor cannot read, e.g. a language its NER model lacks): %s",
                merge.no_entity,
                merge.chunks,
                merge.no_entity_sample,
            )
        store = self.property_graph_store
        with self._snapshot_lock:
            entity_folds, relation_folds = self._existing(store, merged)
            vectors = self._embed_merged(merged, entity_folds)
            keys = [merged.entity_key(g) for g in range(len(merged.entities))]
            if self._store_tables is not None and keys:
                self._store_tables.table("entities").add(keys, vectors)
            write_chunks(store)
            if merge.others:
                store.upsert_nodes(merge.others)
            self._write_entities(store, merged, entity_folds, vectors)
            self._write_relations(store, merged, relation_folds)
            if isinstance(store, CompactPropertyGraphStore):
                store.fit()
            self._snapshot = None
        logger.info(
            "FG-RAG index: %d chunk(s) -> %d entity and %d relation upsert(s) (%s)",
            merge.chunks,
            len(merged.entities),
            len(merged.relations),
            ", ".join(self._extractors_used),
        )

    def _existing(
        self, store: PropertyGraphStore, merged: MergedGraph
    ) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str, str], dict[str, Any]]]:
        """What the store already holds for the merged entities and relations (Eq. 2 across inserts).

        Returns the properties to write instead of the merged ones, for the
        entities and relations the store has: the stored descriptions first,
        then the new ones, up to the cap.
        """
        keys = [merged.entity_key(g) for g in range(len(merged.entities))]
        if not keys:
            return {}, {}
        existing = [n for n in store.get(ids=keys) if isinstance(n, EntityNode)]
        if not existing:
            return {}, {}
        position = {key: g for g, key in enumerate(keys)}
        entity_folds = {}
        for old in existing:
            new = merged.entity_record(position[old.id])[3]
            props = {
                **old.properties,
                **{k: v for k, v in new.items() if k not in (DESCRIPTIONS, SOURCES)},
            }
            props[DESCRIPTIONS] = list(old.properties.get(DESCRIPTIONS) or [])
            props[SOURCES] = list(old.properties.get(SOURCES) or [])
            _merge_lists(props, new[DESCRIPTIONS], new[SOURCES], self._max_descriptions)
            entity_folds[old.id] = props
        stored_relations = {
            (rel.source_id, rel.label, rel.target_id): rel.properties
            for _, rel, _ in store.get_triplets(entity_names=[n.id for n in existing])
        }
        relation_folds = {}
        for g in range(len(merged.relations)):
            label, source, target, new = merged.relation_record(g)
            old_props = stored_relations.get((source, label, target))
            if old_props is None:
                continue
            props = {**old_props}
            props[DESCRIPTIONS] = list(old_props.get(DESCRIPTIONS) or [])
            props[SOURCES] = list(old_props.get(SOURCES) or [])
            _merge_lists(props, new[DESCRIPTIONS], new[SOURCES], self._max_descriptions)
            relation_folds[(source, label, target)] = props
        return entity_folds, relation_folds

    def _embed_merged(self, merged: MergedGraph, folds: dict[str, dict[str, Any]]) -> np.ndarray:
        """Entity vectors of the merged entities (one ``embed_texts`` call, as before)."""

        def text(g: int) -> str:
            props = folds.get(merged.entity_key(g))
            if props is None:
                return entity_text(*merged.entity_display(g))
            name = merged.entity_record(g)[1]
            return entity_text(props.get(DISPLAY_NAME) or name, props.get(DESCRIPTIONS, []))

        return embed_texts(
            self._fg_embed_model,
            _LazyTexts(len(merged.entities), text),
            show_progress=self._show_progress,
            desc="Entity vectors",
        )

    def _write_entities(
        self,
        store: PropertyGraphStore,
        merged: MergedGraph,
        folds: dict[str, dict[str, Any]],
        vectors: np.ndarray,
    ) -> None:
        """Upsert the merged entities a slice at a time, with their vectors.

        The compact store takes plain records and unit rows (what the snapshot
        reads, see ``EntityVectors``); any other store gets ``EntityNode``
        objects carrying the embedder's vectors as lists.
        """
        compact = isinstance(store, CompactPropertyGraphStore)
        total = len(merged.entities)
        if compact:
            store.vectors.reserve(total)
        for start in range(0, total, WRITE_BATCH):
            stop = min(start + WRITE_BATCH, total)
            records = []
            for key, name, label, props in merged.records("entity", start, stop):
                records.append((key, name, label, folds.get(key, props)))
            if compact:
                store.upsert_entity_records(records)
                store.put_unit_vectors([r[0] for r in records], unit_rows(vectors[start:stop]))
                continue
            nodes = []
            for (_, name, label, props), vector in zip(records, vectors[start:stop], strict=True):
                node = EntityNode(name=name, label=label, properties=props)
                node.embedding = vector.tolist()
                nodes.append(node)
            store.upsert_nodes(nodes)

    def _write_relations(
        self,
        store: PropertyGraphStore,
        merged: MergedGraph,
        folds: dict[tuple[str, str, str], dict[str, Any]],
    ) -> None:
        """Upsert the merged relations a slice at a time."""
        compact = isinstance(store, CompactPropertyGraphStore)
        total = len(merged.relations)
        for start in range(0, total, WRITE_BATCH):
            records = [
                (label, source, target, folds.get((source, label, target), props))
                for label, source, target, props in merged.records(
                    "relation", start, min(start + WRITE_BATCH, total)
                )
            ]
            if compact:
                store.upsert_relation_records(records)
            else:
                store.upsert_relations(
                    [
                        Relation(label=label, source_id=source, target_id=target, properties=props)
                        for label, source, target, props in records
                    ]
                )

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

        return FGRAGQueryEngine(self, llm=llm, **kwargs)  # None: the index's LLM

    # ----------------------------------------------------------------- persistence

    def persist(self, persist_dir: str | Path) -> None:
        """Write the storage context and FG-RAG's settings atomically to ``persist_dir``.

        With a ``vector_store`` the manifest also records its identity and the
        entity table's size; the property graph store keeps the vectors too.
        """
        extra = {}
        if self._store_tables is not None:
            extra["vector_store"] = self._store_tables.describe()
        store = self.property_graph_store
        if isinstance(store, CompactPropertyGraphStore):
            # The stored vectors are written as the unit rows the snapshot reads,
            # and the manifest says so: a load then takes them as they are (scaling
            # them again would move the last bit of some; see EntityVectors).
            store.scale_vectors_to_unit()
            extra["entity_vectors"] = UNIT_ROWS
        with self._snapshot_lock, atomic_dir(persist_dir) as tmp:
            self.storage_context.persist(persist_dir=str(tmp))
            # LlamaIndex's load_index_from_storage would read this folder as a plain
            # PropertyGraphIndex; the tagged struct makes it say how to load it instead.
            tagged = SimpleIndexStore()
            cls = type(self)
            tagged.add_index_struct(
                SuiteIndexList(index_class=f"{cls.__module__}.{cls.__qualname__}")
            )
            tagged.persist(str(tmp / INDEX_STORE_FILE))
            write_manifest(
                tmp,
                KIND,
                FORMAT_VERSION,
                max_descriptions_per_entity=self._max_descriptions,
                extractors=self._extractors_used,
                embed_model=getattr(self._fg_embed_model, "model_name", ""),
                llm_steps=self.llm_steps.to_dict(),
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
            if manifest.get("entity_vectors") == UNIT_ROWS:
                store.vectors.mark_unit()
            # (Folders written before this field hold the embedder's rows; the
            # first snapshot scales them, exactly as snapshots always did.)
        kwargs.setdefault("max_descriptions_per_entity", manifest["max_descriptions_per_entity"])
        if llm is None and manifest.get("extractors") == [CooccurrenceExtractor.__name__]:
            # Built LLM-free: later inserts get the same graph (no LLM resolved at load).
            kwargs.setdefault("kg_extractors", [CooccurrenceExtractor()])
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
        index.llm_steps.load(manifest.get("llm_steps"))
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
            "llm_steps": self.llm_steps.to_dict(),
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


def _docstore_values(docstore: Any, ids: Sequence[str]) -> list[bytes] | None:
    """The stored values of nodes ``ids`` in a docstore on a ``CompactKVStore`` (else ``None``).

    They are the store's own ``bytes`` objects (immutable). The key-value store
    and the node collection are LlamaIndex's ``KVDocumentStore`` attributes,
    which it offers no accessor for. ``None`` (the caller then reads nodes) for
    any other docstore or a missing value.
    """
    kvstore = getattr(docstore, "_kvstore", None)
    collection = getattr(docstore, "_node_collection", None)
    if not isinstance(kvstore, CompactKVStore) or not isinstance(collection, str):
        return None
    values = kvstore.encoded(ids, collection)
    return None if any(v is None for v in values) else values


def _batches(items: Sequence[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


class _LazyTexts(Sequence):
    """``text(i)`` for ``i < n``, made when read: ``embed_texts`` reads each text twice
    (its length, then its batch), and the texts of all entities at once were
    another copy of every description."""

    def __init__(self, n: int, text: Callable[[int], str]) -> None:
        self._n, self._text = n, text

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        i = int(i)
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._text(i)


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
