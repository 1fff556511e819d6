"""``QueryCentricGraphIndex``: chunk nodes, query nodes, E_inter and E_intra (paper §3.3).

Chunks live in LlamaIndex's docstore, the query layer in an immutable
:class:`~.graph.QueryLayer` snapshot. Chunks that already carry query nodes in their
metadata (the generator run in an ``IngestionPipeline``) are used as they are.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode, MetadataMode

from ..core.embeddings import embed_texts, normalize_rows
from ..core.graph import TypedGraph
from ..core.index import GraphIndexBase
from ..core.persist import read_arrays, read_json, write_arrays, write_json
from ..core.windows import embed_with_windows
from .config import QCGConfig
from .doc2query import STEP, Doc2QueryGenerator
from .graph import QueryLayer, window_arrays, windows_from_arrays
from .prompts import QCG_ANSWER_PROMPT
from .query_nodes import QUERY_NODES_KEY, GeneratedNodes, QueryNodeGenerator, QueryPair
from .retriever import QCGRetriever
from .sentence_nodes import SentenceQueryGenerator

logger = logging.getLogger(__name__)

_LAYER_FILE = "qcg_layer.npz"
_NODES_FILE = "qcg_nodes.json"


def make_generator(config: QCGConfig) -> QueryNodeGenerator:
    """The query-node generator a config describes (Doc2Query with the LLM, or sentences)."""
    graph = config.graph
    if graph.query_nodes == "sentences":
        return SentenceQueryGenerator(
            title_prefix=graph.title_prefix,
            splitter=graph.splitter,
            min_chars=graph.min_chars,
            alpha=graph.sentence_alpha,
            vectors=graph.sentence_vectors,
        )
    return Doc2QueryGenerator(
        num_pairs=graph.M,
        alpha=graph.alpha,
        output_format=graph.output_format,
        **config.llm.llm_settings(),
    )


class QueryCentricGraphIndex(GraphIndexBase):
    """Query-Centric Graph index (QCG-RAG, Wu et al. 2025).

    ``E_inter`` links each query node to its chunk; ``E_intra`` to its ``k`` most
    similar query nodes (directed as in the paper, self excluded, same-chunk
    neighbours allowed unless ``exclude_same_chunk``).

    Args:
        nodes: Chunk nodes (``from_documents`` makes them).
        config: A :class:`~.config.QCGConfig` or preset name.
        generator: A :class:`~.query_nodes.QueryNodeGenerator` to use instead of the
            one the config describes.
        **kwargs: The :class:`~llama_index_graphrag_ext.core.index.GraphIndexBase`
            arguments (``embed_model``, ``llm``, ...) and config fields by name.
    """

    index_kind = "qcg"
    format_version = 2
    config_class = QCGConfig

    def _configure(self, generator: QueryNodeGenerator | None = None) -> None:
        if generator is not None:
            kind = "sentences" if isinstance(generator, SentenceQueryGenerator) else "doc2query"
            if kind != self.config.graph.query_nodes:
                self.config = self.config.updated(query_nodes=kind)
        self.generator = generator if generator is not None else make_generator(self.config)
        if isinstance(self.generator, Doc2QueryGenerator):
            index_choice = self.llm_choice if self.generator.llm is None else None
            self.generator.attach_steps(self.llm_steps, index_choice)
        else:
            self.llm_steps.chose_llm_free(
                STEP, "sentence nodes", "query_nodes='sentences' (the paper's Sentence Nodes)"
            )
        self.generator.embed_model = self._embed_model
        graph = self.config.graph
        self._layer = QueryLayer.empty(graph.k, exclude_same_chunk=graph.exclude_same_chunk)
        self._graph_cache: tuple[QueryLayer, TypedGraph] | None = None
        self.build_stats: Counter[str] = Counter()

    def stats(self) -> dict[str, Any]:
        layer = self._layer
        return {
            "chunks": len(self),
            "query_nodes": len(layer),
            "knn_edges": int((layer.knn >= 0).sum()),
            **self.build_stats,
        }

    # ------------------------------------------------------------------ layer

    @property
    def layer(self) -> QueryLayer:
        """The current query-layer snapshot (immutable)."""
        return self._layer

    @property
    def graph(self) -> TypedGraph:
        """The graph as a :class:`TypedGraph`: nodes ``chunk`` and ``query``, edges ``member``
        (E_inter) and ``knn`` (E_intra, weight = cosine, stored undirected)."""
        layer = self._layer
        cached = self._graph_cache
        if cached is not None and cached[0] is layer:
            return cached[1]
        graph = TypedGraph(meta={"method": "qcg", "k": self.config.graph.k})
        graph.add_nodes(list(layer.chunks), "chunk")
        ids = layer.ids
        graph.add_nodes(
            ids,
            "query",
            [{"query": p.query, "answer": p.answer, "source": p.kind} for p in layer.pairs],
        )
        graph.add_edges(((i, p.chunk_id) for i, p in zip(ids, layer.pairs, strict=True)), "member")
        rows, cols = np.nonzero(layer.knn >= 0)
        graph.add_edges(
            (
                (ids[r], ids[layer.knn[r, c]], float(layer.knn_sim[r, c]))
                for r, c in zip(rows.tolist(), cols.tolist(), strict=True)
            ),
            "knn",
        )
        self._graph_cache = (layer, graph)
        return graph

    # ------------------------------------------------------------------ hooks

    def _generate(
        self, nodes: Sequence[BaseNode]
    ) -> tuple[list[QueryPair], np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Query nodes, their vectors, and the new chunks' vectors and long chunks' windows.

        Chunks are embedded once (Doc2Query-- already does).
        """
        given = [n for n in nodes if isinstance(n.metadata.get(QUERY_NODES_KEY), list)]
        todo = [n for n in nodes if not isinstance(n.metadata.get(QUERY_NODES_KEY), list)]
        pairs: list[QueryPair] = []
        for node in given:
            pairs.extend(
                QueryPair.from_dict(node.node_id, d) for d in node.metadata[QUERY_NODES_KEY]
            )
        vectors = embed_texts(
            self.embed_model,
            [self.generator.text_of(p) for p in pairs],
            desc="Embedding query nodes",
        )
        self.build_stats["chunks_with_given_nodes"] += len(given)
        chunk_vectors: dict[str, np.ndarray] = {}
        windows: dict[str, np.ndarray] = {}
        if todo:
            result: GeneratedNodes = self.generator.generate(todo)
            if isinstance(self.generator, SentenceQueryGenerator):
                self.llm_steps.count(STEP, len(todo))
            if result.chunk_vectors is not None:
                chunk_vectors.update(
                    zip([n.node_id for n in todo], result.chunk_vectors, strict=True)
                )
                for node, found in zip(todo, result.chunk_windows or [], strict=False):
                    if found is not None:
                        windows[node.node_id] = found
            self.build_stats.update(result.stats)
            gen_vectors = result.vectors
            if gen_vectors is None:
                gen_vectors = embed_texts(
                    self.embed_model,
                    [self.generator.text_of(p) for p in result.pairs],
                    show_progress=self._show_progress,
                    desc="Embedding query nodes",
                )
            pairs.extend(result.pairs)
            vectors = np.vstack([vectors, gen_vectors]) if len(vectors) else gen_vectors
        with_nodes = {p.chunk_id for p in pairs}
        # A chunk without query nodes is not in the layer: its vector is never used.
        missing = [n for n in nodes if n.node_id not in chunk_vectors and n.node_id in with_nodes]
        if missing and self.config.graph.chunk_vectors == "pooled":
            chunk_vectors.update(_pooled(pairs, vectors, {n.node_id for n in missing}))
        elif missing:
            vecs, found = embed_with_windows(
                self.embed_model,
                [n.get_content(metadata_mode=MetadataMode.EMBED) for n in missing],
                show_progress=self._show_progress,
                desc="Embedding chunks",
            )
            chunk_vectors.update(zip([n.node_id for n in missing], vecs, strict=True))
            windows.update(
                (n.node_id, w) for n, w in zip(missing, found, strict=True) if w is not None
            )
        orphans = [n.node_id for n in nodes if n.node_id not in with_nodes]
        if orphans:
            self.build_stats["chunks_without_query_nodes"] += len(orphans)
            logger.warning(
                "QCG: %d chunk(s) got no query node and cannot be retrieved: %s",
                len(orphans),
                orphans[:5],
            )
        return pairs, vectors, chunk_vectors, windows

    def _add_chunks(self, nodes: Sequence[BaseNode]) -> None:
        pairs, vectors, chunk_vectors, windows = self._generate(nodes)
        self._layer = self._layer.added(pairs, vectors, chunk_vectors, windows)
        windows = self._layer.chunk_windows
        self.build_stats["chunk_windows"] = 0 if windows is None else len(windows)

    def _remove_chunks(self, node_ids: Sequence[str]) -> None:
        self._layer = self._layer.without_chunks(node_ids)
        if "chunk_windows" in self.build_stats:
            windows = self._layer.chunk_windows
            self.build_stats["chunk_windows"] = 0 if windows is None else len(windows)

    def _searchable(self) -> dict[str, tuple[Sequence[str], np.ndarray]]:
        layer = self._layer  # step 1 of retrieval searches the query nodes
        return {"queries": (layer.ids, layer.matrix)}

    def _persist_state(self, folder: Path) -> None:
        layer = self._layer
        write_arrays(
            folder / _LAYER_FILE,
            matrix=layer.matrix,
            chunk_codes=layer.chunk_codes,
            knn=layer.knn,
            knn_sim=layer.knn_sim,
            chunk_matrix=layer.chunk_matrix,
            **window_arrays(layer.chunk_windows, layer.matrix.shape[1]),
        )
        write_json(
            folder / _NODES_FILE,
            {
                "chunks": list(layer.chunks),
                "pairs": [[p.chunk_id, p.to_dict()] for p in layer.pairs],
                "build_stats": dict(self.build_stats),
            },
        )

    def _load_state(self, folder: Path, manifest: dict[str, Any]) -> None:
        arrays = read_arrays(folder / _LAYER_FILE)
        data = read_json(folder / _NODES_FILE)
        pairs = tuple(QueryPair.from_dict(c, d) for c, d in data["pairs"])
        self._layer = QueryLayer(
            pairs,
            arrays["matrix"].astype(np.float32),
            arrays["chunk_codes"].astype(np.int64),
            tuple(data["chunks"]),
            arrays["knn"].astype(np.int64),
            arrays["knn_sim"].astype(np.float32),
            self.config.graph.k,
            self.config.graph.exclude_same_chunk,
            arrays["chunk_matrix"].astype(np.float32),
            windows_from_arrays(arrays),
        )
        self.build_stats = Counter(data.get("build_stats", {}))

    # --------------------------------------------------------------- engines

    def as_retriever(self, **kwargs: Any) -> QCGRetriever:
        """A :class:`~.retriever.QCGRetriever` with the index's config (``kwargs`` override it)."""
        return QCGRetriever(self, **kwargs)

    def as_query_engine(self, llm=None, **kwargs: Any):
        """A ``RetrieverQueryEngine`` over :meth:`as_retriever` with the QCG answer prompt."""
        kwargs.setdefault("text_qa_template", QCG_ANSWER_PROMPT)
        return super().as_query_engine(llm=llm, **kwargs)


def _pooled(
    pairs: Sequence[QueryPair], vectors: np.ndarray, chunk_ids: set[str]
) -> dict[str, np.ndarray]:
    """Chunk vectors as the unit mean of their query nodes' vectors (``chunk_vectors="pooled"``;
    ours: no embedding call, and the whole chunk even past the embedder's window)."""
    rows = [i for i, p in enumerate(pairs) if p.chunk_id in chunk_ids]
    if not rows:
        return {}
    names = list(dict.fromkeys(pairs[i].chunk_id for i in rows))
    where = {c: i for i, c in enumerate(names)}
    codes = np.fromiter((where[pairs[i].chunk_id] for i in rows), np.int64, len(rows))
    sums = np.zeros((len(names), vectors.shape[1]), np.float64)
    np.add.at(sums, codes, vectors[rows])
    return dict(zip(names, normalize_rows(sums), strict=True))
