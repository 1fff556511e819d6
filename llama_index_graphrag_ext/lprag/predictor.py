"""The link predictor ``phi(u, v)`` of Eq. 8 on torch-geometric layers, and its inference view.

Encoders (Box 3.4, Eqs. 6-7), one per :data:`PREDICTORS` entry:

* ``gcn``: PyG ``GCNConv`` over the ``gcn_norm``-normalised chunk graph;
* ``sage``: ``W_root h_v + W_neigh · weighted-mean(h_u)``, as PyG's ``GraphConv``
  over row-normalised weights (``SAGEConv`` ignores Eq. 5's edge weights);
* ``mlp``: no message passing (the paper's MLP baseline, §4.5);
* ``ncn``: neural common neighbours (Wang et al. 2024, the paper's headline
  predictor, §4.1): the GCN encoder, and a decoder that also sees
  ``Σ_{w ∈ N(u) ∩ N(v)} h_w`` (:func:`common_neighbor_sum`).

Every encoder is followed by the symmetric decoder ``MLP(h_u ⊙ h_v)`` (the
Readout of Eq. 8 is unspecified, gap G10).

Query nodes *receive* messages from their ``M`` nearest chunks but never send
any, in training and at inference alike (gap G5/C6: the paper attaches the user
query to every chunk), so chunk states never depend on a query, the predicted
links are never message edges (no target leakage, gap G4), and inference
computes chunk states once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, get_args

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .config import Predictor
from .link_graph import ChunkStructure, sparse_adjacency

#: The link predictors this module implements.
PREDICTORS: tuple[str, ...] = get_args(Predictor)

#: Each encoder's layer parameters: the root (GCN: the only) weight matrix, the
#: bias (GraphConv's sits on the neighbour term), and GraphSAGE's neighbour matrix.
_LAYER_PARAMS: dict[str, tuple[str, ...]] = {
    "gcn": ("lin.weight", "bias"),
    "ncn": ("lin.weight", "bias"),
    "sage": ("lin_root.weight", "lin_rel.bias", "lin_rel.weight"),
    "mlp": ("weight", "bias"),
}


class LinkPredictor(nn.Module):
    """Encoder + symmetric pairwise decoder; ``phi(u, v)`` of Eq. 8.

    Besides ``MLP(h_u ⊙ h_v)`` the decoder adds ``a · cos(z_u, z_v)`` with a learned
    scale ``a`` (initially ``cos_scale``; gap G10).

    Args:
        kind: ``sage``, ``gcn``, ``mlp`` or ``ncn``.
        hidden: Hidden size (paper default 256, Table 8).
        layers: Message-passing layers (paper default 1, Table 8).
    """

    def __init__(
        self, kind: str, in_dim: int, hidden: int = 256, layers: int = 1, cos_scale: float = 10.0
    ) -> None:
        super().__init__()
        if kind not in PREDICTORS:
            raise ValueError(f"unknown predictor {kind!r}; choose one of {PREDICTORS}")
        if in_dim <= 0 or hidden <= 0 or layers <= 0:
            raise ValueError("in_dim, hidden and layers must be positive")
        self.kind = kind
        self.in_dim = in_dim
        self.hidden = hidden
        self.num_layers = layers
        dims = [in_dim] + [hidden] * layers
        # _init_layers replaces the layers' own initialisers; forking keeps those
        # from consuming the seeded stream.
        with torch.random.fork_rng(devices=[]):
            self.convs = nn.ModuleList(
                self._make_layer(a, b) for a, b in zip(dims[:-1], dims[1:], strict=True)
            )
        self._init_layers()
        dec_in = 2 * hidden if kind == "ncn" else hidden
        self.decoder = nn.Sequential(nn.Linear(dec_in, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        # Residual start: the learned term begins at zero, so an untrained predictor
        # ranks exactly like the text encoder and training only adds corrections.
        nn.init.zeros_(self.decoder[2].weight)
        nn.init.zeros_(self.decoder[2].bias)
        self.cos_scale = nn.Parameter(torch.tensor(cos_scale))

    def _make_layer(self, a: int, b: int) -> nn.Module:
        from torch_geometric.nn import GCNConv, GraphConv

        if self.uses_gcn:
            # Normalisation comes precomputed (ChunkStructure.gcn_adj, query_states).
            return GCNConv(a, b, normalize=False, add_self_loops=False)
        if self.kind == "sage":
            return GraphConv(a, b, aggr="add")  # over row-normalised weights: a weighted mean
        return nn.Linear(a, b)

    def _init_layers(self) -> None:
        """``nn.Linear``'s initialisation, in one fixed order of the seeded stream, so
        a seed gives one initial predictor whatever the layer classes draw."""
        names = _LAYER_PARAMS[self.kind]
        for conv in self.convs:
            weight, bias = (conv.get_parameter(name) for name in names[:2])
            nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
            bound = 1.0 / math.sqrt(weight.shape[1])
            nn.init.uniform_(bias, -bound, bound)
        for conv in self.convs if len(names) > 2 else ():
            nn.init.kaiming_uniform_(conv.get_parameter(names[2]), a=math.sqrt(5))

    @property
    def propagates(self) -> bool:
        """Whether the encoder passes messages (all but ``mlp``)."""
        return self.kind != "mlp"

    @property
    def uses_gcn(self) -> bool:
        """Whether the encoder is the GCN (``gcn`` and ``ncn``)."""
        return self.kind in ("gcn", "ncn")

    def _activate(self, i: int, out: torch.Tensor) -> torch.Tensor:
        return F.relu(out) if i < self.num_layers - 1 else out

    def chunk_states(self, z: torch.Tensor, graph: ChunkStructure) -> list[torch.Tensor]:
        """Per-layer chunk states ``[h^(0) = z, h^(1), ..., h^(L)]`` on the chunk-only graph."""
        states = [z]
        x = z
        for i, conv in enumerate(self.convs):
            if self.uses_gcn:
                out = conv(x, graph.gcn_adj)
            elif self.kind == "sage":
                out = conv(x, graph.mean_adj)
            else:
                out = conv(x)
            x = self._activate(i, out)
            states.append(x)
        return states

    def query_states(
        self,
        z_q: torch.Tensor,
        neighbors: torch.Tensor,
        weights: torch.Tensor,
        chunk_states: list[torch.Tensor],
        graph: ChunkStructure,
    ) -> torch.Tensor:
        """Final states of query nodes that receive messages from ``neighbors`` (Eqs. 6-7).

        Each layer runs on a small graph (the ``b`` queries, then the chunks they
        are attached to) and equals the queries' rows of that layer run on the
        whole graph.

        Args:
            z_q: ``(b, d)`` query features.
            neighbors: ``(b, M)`` chunk indices each query is attached to.
            weights: ``(b, M)`` message-edge weights.
        """
        x = z_q
        if not self.propagates:
            for i, conv in enumerate(self.convs):
                x = self._activate(i, conv(x))
            return x
        b, m = neighbors.shape
        chunks, local = torch.unique(neighbors.reshape(-1), return_inverse=True)
        query = torch.arange(b).repeat_interleave(m)
        weight = weights.reshape(-1)
        if self.uses_gcn:
            # The query's row of D̂^-1/2 (A + I) D̂^-1/2; a chunk's degree is its
            # chunk-graph degree, since queries send it nothing.
            deg_q = 1.0 + weights.sum(1)
            coef = weight / torch.sqrt(deg_q[query] * graph.degree[chunks[local]])
            loops = torch.arange(b)
            adj = sparse_adjacency(
                torch.cat([query, loops]),
                torch.cat([b + local, loops]),
                torch.cat([coef, 1.0 / deg_q]),
                (b, b + len(chunks)),
            )
        else:  # GraphSAGE: the weighted mean of the attached chunks
            total = weights.sum(1)
            coef = weight / torch.where(total > 0, total, torch.ones_like(total))[query]
            adj = sparse_adjacency(query, local, coef, (b, len(chunks)))
        for i, conv in enumerate(self.convs):
            h = chunk_states[i][chunks]
            out = conv(torch.cat([x, h]), adj) if self.uses_gcn else conv((h, x), adj)
            x = self._activate(i, out)
        return x

    def decode(
        self,
        h_u: torch.Tensor,
        h_v: torch.Tensor,
        cos_uv: torch.Tensor,
        common: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits ``phi(u, v)`` for aligned pairs (symmetric in ``u``, ``v``)."""
        feats = h_u * h_v
        if self.kind == "ncn":
            feats = torch.cat([feats, common], dim=1)
        return self.decoder(feats).squeeze(-1) + self.cos_scale * cos_uv


def common_neighbor_sum(
    query_neighbors: torch.Tensor,
    pair_chunk: torch.Tensor,
    h_chunks: torch.Tensor,
    graph: ChunkStructure,
) -> torch.Tensor:
    """``Σ_{w ∈ N(q) ∩ N(c)} h_w`` for each pair (NCN's common-neighbour term).

    ``N(q)`` is the query's message neighbourhood (``query_neighbors``, ``(P, M)``),
    ``N(c)`` the neighbours of ``pair_chunk`` in the chunk graph.
    """
    p = len(pair_chunk)
    rows = graph.adjacency.index_select(0, pair_chunk).coalesce()
    pair, chunk = rows.indices()
    shared = (query_neighbors[pair] == chunk[:, None]).any(1)
    mask = torch.sparse_coo_tensor(
        torch.stack([pair[shared], chunk[shared]]),
        torch.ones(int(shared.sum())),
        (p, graph.n),
        check_invariants=False,
        is_coalesced=True,
    )
    return torch.sparse.mm(mask, h_chunks)


def pair_logits(
    model: LinkPredictor,
    data_t: dict[str, torch.Tensor],
    graph: ChunkStructure,
    pair_query: np.ndarray,
    pair_chunk: np.ndarray,
    states: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """Logits of (query, chunk) pairs, computed the way inference computes them.

    Args:
        data_t: :meth:`.LinkGraph.tensors` of the graph.
        states: The model's chunk states (:meth:`LinkPredictor.chunk_states`),
            computed here when not given.
    """
    if states is None:
        states = model.chunk_states(data_t["z_chunks"], graph)
    uq, where = np.unique(pair_query, return_inverse=True)
    uq_t = torch.from_numpy(uq)
    h_q = model.query_states(
        data_t["z_queries"][uq_t],
        data_t["query_neighbors"][uq_t],
        data_t["query_weights"][uq_t],
        states,
        graph,
    )
    hq = h_q[torch.from_numpy(where.reshape(-1))]
    pq = torch.from_numpy(np.asarray(pair_query, np.int64))
    pc = torch.from_numpy(np.asarray(pair_chunk, np.int64))
    hc = states[-1][pc]
    cos = (data_t["z_queries"][pq] * data_t["z_chunks"][pc]).sum(1)
    common = None
    if model.kind == "ncn":
        common = common_neighbor_sum(data_t["query_neighbors"][pq], pc, states[-1], graph)
    return model.decode(hq, hc, cos, common)


class LinkScorer:
    """A trained predictor frozen for retrieval: thread-safe, chunk states precomputed."""

    def __init__(self, model: LinkPredictor, z_chunks: np.ndarray, graph: ChunkStructure) -> None:
        model.eval()
        self.model = model
        self.graph = graph
        self.z_chunks = torch.from_numpy(np.ascontiguousarray(z_chunks, np.float32))
        with torch.no_grad():
            self.states = [s.detach() for s in model.chunk_states(self.z_chunks, graph)]

    @property
    def num_chunks(self) -> int:
        return int(self.z_chunks.shape[0])

    @torch.no_grad()
    def logits(
        self,
        z_query: np.ndarray,
        neighbors: np.ndarray,
        weights: np.ndarray,
        rows: np.ndarray | None = None,
        cosines: np.ndarray | None = None,
    ) -> np.ndarray:
        """``phi(q, C)`` for every chunk ``C`` for one new query node (§3.4 Inference).

        Args:
            neighbors: ``(M,)`` chunks the query is attached to (message edges only).
            rows: Score only these chunk rows (``None``: all).
            cosines: The text cosine the decoder reads for each scored chunk
                (``None``: the chunk vector's).

        Returns:
            One logit per chunk of ``rows`` (or per chunk), in that order.
        """
        zq = torch.from_numpy(np.asarray(z_query, np.float32)[None, :])
        nb = torch.from_numpy(np.asarray(neighbors, np.int64)[None, :])
        ww = torch.from_numpy(np.asarray(weights, np.float32)[None, :])
        hq = self.model.query_states(zq, nb, ww, self.states, self.graph)
        states, z_chunks = self.states[-1], self.z_chunks
        if rows is None:
            index = torch.arange(self.num_chunks)
        else:
            index = torch.from_numpy(np.asarray(rows, np.int64))
            states, z_chunks = states[index], z_chunks[index]
        n = len(index)
        cos = (
            z_chunks @ zq[0]
            if cosines is None
            else torch.from_numpy(np.asarray(cosines, np.float32))
        )
        common = None
        if self.model.kind == "ncn":
            common = common_neighbor_sum(nb.expand(n, -1), index, self.states[-1], self.graph)
        return self.model.decode(hq.expand(n, -1), states, cos, common).numpy()


class MeanScorer:
    """Several trained predictors (the index's ``ensemble``) scored as one: the mean
    of their logits, which lowers the variance weak supervision leaves in each."""

    def __init__(self, scorers: Sequence[LinkScorer]) -> None:
        if not scorers:
            raise ValueError("MeanScorer needs at least one scorer")
        self.scorers = tuple(scorers)

    def logits(self, *args: Any, **kwargs: Any) -> np.ndarray:
        """The mean over the members of :meth:`LinkScorer.logits`."""
        return np.mean([s.logits(*args, **kwargs) for s in self.scorers], axis=0)


__all__ = [
    "PREDICTORS",
    "LinkPredictor",
    "LinkScorer",
    "MeanScorer",
    "Predictor",
    "common_neighbor_sum",
    "pair_logits",
]
