"""The numeric chunk-query graph, and its chunk side as torch-geometric operators (§3.3).

torch-geometric is imported inside the functions that need it: importing it
loads transformers, a cost users who never build an LP-RAG model should not pay.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

#: Smallest chunk-edge weight: Eq. 5's cosine can be zero or negative, but GCN's
#: ``D^-1/2`` and the weighted mean need positive degrees.
MIN_EDGE_WEIGHT = 1e-3


@dataclass
class LinkGraph:
    """The numeric chunk-query graph a predictor trains and scores on (§3.3).

    Attributes:
        z_chunks: ``(n, d)`` unit chunk features (the encoder's embeddings).
        edge_rows: Chunk-chunk edges ``i < j`` (mutual kNN, Eq. 4): first ends.
        edge_cols: Second ends.
        edge_weights: Cosine similarity of each edge (Eq. 5).
        z_queries: ``(m, d)`` unit features of the (synthetic) query nodes.
        query_neighbors: ``(m, M)`` chunk indices each query receives messages from.
        query_weights: ``(m, M)`` weights of those message edges (Eq. 5 gives 1).
        pos_query: Supervision links (query index) — the query-chunk relation A.
        pos_chunk: Supervision links (chunk index).
    """

    z_chunks: np.ndarray
    edge_rows: np.ndarray
    edge_cols: np.ndarray
    edge_weights: np.ndarray
    z_queries: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    query_neighbors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    query_weights: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    pos_query: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pos_chunk: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def num_chunks(self) -> int:
        return int(self.z_chunks.shape[0])

    @property
    def num_queries(self) -> int:
        return int(self.z_queries.shape[0])

    def tensors(self) -> dict[str, torch.Tensor]:
        """Features and query attachments as tensors (no copy where already contiguous)."""
        return {
            "z_chunks": torch.from_numpy(np.ascontiguousarray(self.z_chunks, np.float32)),
            "z_queries": torch.from_numpy(np.ascontiguousarray(self.z_queries, np.float32)),
            "query_neighbors": torch.from_numpy(
                np.ascontiguousarray(self.query_neighbors, np.int64)
            ),
            "query_weights": torch.from_numpy(np.ascontiguousarray(self.query_weights, np.float32)),
        }

    def structure(self) -> ChunkStructure:
        """The chunk-side operators of this graph."""
        return ChunkStructure(self.num_chunks, self.edge_rows, self.edge_cols, self.edge_weights)


class ChunkStructure:
    """Chunk-side propagation operators, built once per chunk graph.

    ``rows``/``cols`` are the edges ``i < j``; ``weights`` below
    :data:`MIN_EDGE_WEIGHT` are raised to it.

    Attributes:
        edge_index: ``(2, 2E)`` directed edges (source, target), both ways, sorted.
        edge_weight: Their weights.
        degree: GCN's ``D̂``: weighted in-degree plus the self loop.
        gcn_adj: ``D̂^-1/2 (A + I) D̂^-1/2`` as a sparse ``adj_t`` (rows are targets).
        mean_adj: Row-normalised weights ``w_ij / Σ_j w_ij`` as a sparse ``adj_t``:
            a sum over it is the weighted mean of the neighbours.
        adjacency: Binary sparse adjacency: the neighbour sets NCN intersects.
    """

    def __init__(
        self, num_chunks: int, rows: np.ndarray, cols: np.ndarray, weights: np.ndarray
    ) -> None:
        from torch_geometric.nn.conv.gcn_conv import gcn_norm
        from torch_geometric.utils import scatter, to_undirected

        n = self.n = int(num_chunks)
        pairs = torch.from_numpy(np.stack([np.asarray(rows, np.int64), np.asarray(cols, np.int64)]))
        weight = torch.from_numpy(np.clip(np.asarray(weights, np.float32), MIN_EDGE_WEIGHT, None))
        # §3.3: the chunk graph is undirected; both directions carry messages.
        self.edge_index, self.edge_weight = to_undirected(pairs, weight, num_nodes=n)
        source, target = self.edge_index
        strength = scatter(self.edge_weight, target, 0, dim_size=n, reduce="sum")
        self.degree = strength + 1.0
        gcn_index, gcn_weight = gcn_norm(self.edge_index, self.edge_weight, n, add_self_loops=True)
        self.gcn_adj = sparse_adjacency(gcn_index[1], gcn_index[0], gcn_weight, (n, n))
        safe = torch.where(strength > 0, strength, torch.ones_like(strength))
        self.mean_adj = sparse_adjacency(
            target, source, self.edge_weight / safe[target], (n, n)
        )  # fmt: skip
        self.adjacency = _coo(target, source, torch.ones_like(self.edge_weight), (n, n))


def sparse_adjacency(
    target: torch.Tensor, source: torch.Tensor, weight: torch.Tensor, shape: tuple[int, int]
) -> torch.Tensor:
    """A weighted ``adj_t`` (``shape = (targets, sources)``) in CSR, the layout PyG's
    ``spmm`` multiplies without converting; duplicate edges add up."""
    coo = _coo(target, source, weight, shape)
    with warnings.catch_warnings():
        # CSR is "beta" in torch, but it is what torch-geometric's sparse path uses.
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return coo.to_sparse_csr()


def _coo(
    rows: torch.Tensor, cols: torch.Tensor, values: torch.Tensor, shape: tuple[int, int]
) -> torch.Tensor:
    index = torch.stack([rows.long(), cols.long()])
    # ``check_invariants`` is explicit: torch warns when it is left implicit.
    return torch.sparse_coo_tensor(index, values.float(), shape, check_invariants=False).coalesce()
