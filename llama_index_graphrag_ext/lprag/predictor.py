"""The link predictor ``phi(u, v)`` of Eq. 8 on torch-geometric layers, and its inference view.

Encoders (Box 3.4, Eqs. 6-7), one per :data:`PREDICTORS` entry:

* ``gcn``: PyG ``GCNConv`` over the chunk graph normalised by PyG's ``gcn_norm``
  (self loops, Eq. 5's edge weights);
* ``sage``: the GraphSAGE layer, ``W_root h_v + W_neigh · weighted-mean(h_u)``.
  PyG's ``SAGEConv`` ignores edge weights (its message is ``x_j``), while Eq. 5
  weighs chunk edges by cosine; PyG's ``GraphConv`` is the same two-matrix layer
  with weighted messages, so summing over row-normalised weights gives the
  weighted mean (with equal weights it is exactly ``SAGEConv(aggr="mean")``);
* ``mlp``: no message passing (the paper's MLP baseline, §4.5);
* ``ncn``: neural common neighbours (Wang et al. 2024, the paper's predictor in
  every headline run, §4.1): the GCN encoder, and a decoder that also sees
  ``Σ_{w ∈ N(u) ∩ N(v)} h_w``. PyG has no NCN layer; the common-neighbour sets come
  from the sparse adjacency (:func:`common_neighbor_sum`).

Every encoder is followed by the symmetric decoder ``MLP(h_u ⊙ h_v)`` (the
Readout of Eq. 8 is unspecified, gap G10).

Direction of messages. Query nodes *receive* messages from the chunks they are
attached to but never send any, so chunk states never depend on a query. Training
and inference are then the same computation: a synthetic query in training and a
user query at inference are both attached to their ``M`` nearest chunks (our
choice for the silent gap G5/C6: the paper attaches the user query to every chunk,
which under mean aggregation gives every query the corpus mean), and the links
being predicted are never message edges, so there is no target leakage (gap G4).
It also makes inference cheap: chunk states are computed once; a query runs each
layer on its own small graph (itself and its ``M`` chunks) with the same PyG layer,
normalised against the chunks' degrees in the whole graph.
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

#: Each encoder's layer parameters, by their names inside one layer: the root (for
#: GCN: the only) weight matrix, the bias, and GraphSAGE's neighbour matrix.
#: GraphConv puts the bias on the neighbour term rather than the root; the sum is
#: the same.
_LAYER_PARAMS: dict[str, tuple[str, ...]] = {
    "gcn": ("lin.weight", "bias"),
    "ncn": ("lin.weight", "bias"),
    "sage": ("lin_root.weight", "lin_rel.bias", "lin_rel.weight"),
    "mlp": ("weight", "bias"),
}


class LinkPredictor(nn.Module):
    """Encoder + symmetric pairwise decoder; ``phi(u, v)`` of Eq. 8.

    Args:
        kind: ``sage``, ``gcn``, ``mlp`` or ``ncn``.
        in_dim: Feature dimension of the text encoder.
        hidden: Hidden size (paper default 256, Table 8).
        layers: Message-passing layers (paper default 1, Table 8).
        cos_scale: Initial scale of the cosine term.

    Besides ``MLP(h_u ⊙ h_v)`` the decoder adds ``a · cos(z_u, z_v)`` with a learned
    scale ``a`` (the readout is unspecified in the paper, gap G10), and the last
    decoder layer starts at zero: an untrained predictor ranks exactly like the
    text encoder, and training learns corrections to it.
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
        # The layers' own initialisers (PyG's glorot for GCNConv) are replaced by
        # _init_layers below; forking keeps them from consuming the seeded stream.
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
            # Normalisation comes precomputed (ChunkStructure.gcn_adj for chunks, the
            # query's own row in query_states), so the layer only propagates.
            return GCNConv(a, b, normalize=False, add_self_loops=False)
        if self.kind == "sage":
            return GraphConv(a, b, aggr="add")  # over row-normalised weights: a weighted mean
        return nn.Linear(a, b)

    def _init_layers(self) -> None:
        """``nn.Linear``'s initialisation, in one fixed order of the seeded stream.

        Every weight matrix is drawn as ``nn.Linear`` draws it (Kaiming-uniform,
        ``a = sqrt(5)``, bias uniform in ``±1/sqrt(fan_in)``): first each layer's
        root (GCN: its only) matrix and bias, then the GraphSAGE neighbour matrices,
        so a seed gives one initial predictor whatever the layer classes draw.
        """
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

        Each layer runs on a small graph: the ``b`` queries first, then the distinct
        chunks they are attached to (whose states are already known). Its output is
        the queries' rows of the same layer run on the whole chunk graph plus the
        queries.

        Args:
            z_q: ``(b, d)`` query features.
            neighbors: ``(b, M)`` chunk indices each query is attached to.
            weights: ``(b, M)`` message-edge weights.
            chunk_states: Output of :meth:`chunk_states`.
            graph: The chunk structure (GCN degrees).
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
            # The query's row of D̂^-1/2 (A + I) D̂^-1/2 on the chunk graph plus the
            # queries: a query's degree counts its own edges and self loop; a chunk's
            # is its degree in the chunk graph, since queries send it nothing.
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

    ``N(q)`` is the query's message neighbourhood (``query_neighbors``, one row per
    pair), ``N(c)`` the chunk's neighbours in the chunk graph. The chunk rows of the
    sparse adjacency are selected, each entry is kept when it is also one of the
    query's neighbours, and the kept entries sum the states by one sparse product.

    Args:
        query_neighbors: ``(P, M)`` the pair's query neighbourhood.
        pair_chunk: ``(P,)`` the pair's chunk.
        h_chunks: ``(n, h)`` chunk states.
        graph: The chunk structure (its adjacency).
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
        model: The predictor.
        data_t: :meth:`.LinkGraph.tensors` of the graph.
        graph: Its chunk structure.
        pair_query: Query index of each pair.
        pair_chunk: Chunk index of each pair.
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
    """A trained predictor frozen for retrieval: thread-safe, chunk states precomputed.

    Args:
        model: The trained predictor (put in eval mode).
        z_chunks: ``(n, d)`` unit chunk features.
        graph: The chunk structure the model runs on.
    """

    def __init__(self, model: LinkPredictor, z_chunks: np.ndarray, graph: ChunkStructure) -> None:
        model.eval()
        self.model = model
        self.graph = graph
        self.z_chunks = torch.from_numpy(np.ascontiguousarray(z_chunks, np.float32))
        with torch.no_grad():
            self.states = [s.detach() for s in model.chunk_states(self.z_chunks, graph)]

    @property
    def num_chunks(self) -> int:
        """Number of chunks scored."""
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
            z_query: ``(d,)`` unit query feature.
            neighbors: ``(M,)`` chunks the query is attached to (message edges only).
            weights: ``(M,)`` their edge weights.
            rows: Score only these chunk rows (``None``: all). The decoder is an MLP
                on every (query, chunk) pair, ``n x hidden^2`` work per query, so
                large indexes score a candidate set (see the retriever).
            cosines: The text cosine the decoder reads for each scored chunk
                (``None``: the chunk vector's); the retriever passes a long chunk's
                best window's.

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
    """Several trained predictors scored as one: the mean of their logits.

    The members are the same predictor trained from different seeds (the index's
    ``ensemble``); averaging their logits lowers the variance that weak
    supervision leaves in any one of them. Same interface as :class:`LinkScorer`.
    """

    def __init__(self, scorers: Sequence[LinkScorer]) -> None:
        if not scorers:
            raise ValueError("MeanScorer needs at least one scorer")
        self.scorers = tuple(scorers)

    @property
    def num_chunks(self) -> int:
        """Number of chunks scored."""
        return self.scorers[0].num_chunks

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
