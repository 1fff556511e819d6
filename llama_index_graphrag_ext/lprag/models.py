"""Link predictors over the chunk-query graph, and their training loop (LP-RAG §3.4).

Retrieval in LP-RAG is inductive link prediction: a query node that was never
seen in training is attached to the chunk graph and every (query, chunk) pair is
scored. This module holds the predictors and everything needed to train and
apply them:

* :class:`LinkPredictor` — an encoder (``sage``: GraphSAGE, weighted-mean
  aggregation; ``gcn``: GCN, symmetric normalisation with self loops; ``mlp``: no
  message passing) followed by a symmetric pairwise decoder
  ``MLP(h_u ⊙ h_v)``; ``ncn`` (neural common neighbours, the paper's winner,
  Wang et al. 2024) uses the GCN encoder and the decoder
  ``MLP(h_u ⊙ h_v ‖ Σ_{w ∈ N(u) ∩ N(v)} h_w)``.
* :func:`train_link_predictor` — BCE with negative sampling and Adam (§3.4,
  App. A.3), held-out *queries* for early stopping (the paper has no split,
  gap G1), seeded and deterministic on CPU.
* :class:`LinkScorer` — the frozen, thread-safe inference view of a trained
  model: chunk states are computed once; a new query costs one gather over its
  neighbours and one decoder pass over the chunk matrix.

Direction of messages. Query nodes *receive* messages from the chunks they are
attached to but never send any (chunk states never depend on a query). This
makes training and inference the same computation: a synthetic query in
training and a user query at inference are both attached to their ``M``
nearest chunks (our choice for the silent gap G5/C6: the paper attaches the
user query to every chunk, which under mean aggregation gives every query the
corpus mean), and the links being predicted are never message edges, so there
is no target leakage (gap G4).

The layers are written with plain torch sparse/gather operations rather than
torch-geometric's ``MessagePassing`` classes, so that the one-directional query
row can be computed exactly and cheaply at inference; the maths is the same as
PyG's ``SAGEConv`` (mean aggregator) and ``GCNConv`` (``add_self_loops``,
``normalize``, edge weights).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..core.embeddings import knn_graph

logger = logging.getLogger(__name__)

Predictor = Literal["sage", "gcn", "mlp", "ncn"]
#: The link predictors this module implements.
PREDICTORS: tuple[str, ...] = ("sage", "gcn", "mlp", "ncn")


# --------------------------------------------------------------------------- graph data


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
        """Number of chunk nodes."""
        return int(self.z_chunks.shape[0])

    @property
    def num_queries(self) -> int:
        """Number of query nodes."""
        return int(self.z_queries.shape[0])


class ChunkStructure:
    """Chunk-side propagation operators built once from the chunk graph.

    Args:
        num_chunks: Number of chunks ``n``.
        rows: Edge first ends (``i < j``).
        cols: Edge second ends.
        weights: Edge weights (non-positive weights are clamped to a small epsilon,
            so that normalisation stays defined).
    """

    def __init__(
        self, num_chunks: int, rows: np.ndarray, cols: np.ndarray, weights: np.ndarray
    ) -> None:
        n = int(num_chunks)
        rows = np.asarray(rows, np.int64)
        cols = np.asarray(cols, np.int64)
        w = np.clip(np.asarray(weights, np.float32), 1e-3, None)
        src = np.concatenate([rows, cols])
        dst = np.concatenate([cols, rows])
        ww = np.concatenate([w, w])
        self.n = n
        strength = np.bincount(dst, weights=ww, minlength=n).astype(np.float32)
        #: Weighted degree plus the self loop (GCN's D̂).
        self.gcn_degree = torch.from_numpy(strength + 1.0)
        mean_w = ww / np.where(strength[dst] > 0, strength[dst], 1.0)
        dinv = 1.0 / np.sqrt(strength + 1.0)
        gcn_w = ww * dinv[dst] * dinv[src]
        self.mean_op = _sparse(dst, src, mean_w, (n, n))
        self.gcn_op = _sparse(dst, src, gcn_w, (n, n))
        self.gcn_self = torch.from_numpy((1.0 / (strength + 1.0)).astype(np.float32))
        # Sorted codes ``i * n + j`` of the (directed both ways) edges: membership tests
        # for common neighbours without touching Python loops.
        self.codes = np.unique(dst * n + src)

    def adjacent(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Boolean array: is chunk ``a[i]`` adjacent to chunk ``b[i]``."""
        if self.codes.size == 0:
            return np.zeros(np.shape(a), dtype=bool)
        codes = np.asarray(a, np.int64) * self.n + np.asarray(b, np.int64)
        pos = np.searchsorted(self.codes, codes)
        pos = np.minimum(pos, self.codes.size - 1)
        return self.codes[pos] == codes


def _sparse(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape) -> torch.Tensor:
    index = torch.from_numpy(np.stack([rows, cols]).astype(np.int64))
    values = torch.from_numpy(np.asarray(vals, np.float32))
    return torch.sparse_coo_tensor(index, values, shape, check_invariants=False).coalesce()


# --------------------------------------------------------------------------- the model


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
        self.hidden = hidden
        self.num_layers = layers
        dims = [in_dim] + [hidden] * layers
        self.lin = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:], strict=True))
        self.lin_neigh = (
            nn.ModuleList(
                nn.Linear(a, b, bias=False) for a, b in zip(dims[:-1], dims[1:], strict=True)
            )
            if kind == "sage"
            else None
        )
        dec_in = 2 * hidden if kind == "ncn" else hidden
        self.decoder = nn.Sequential(nn.Linear(dec_in, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        # Residual start: the learned term begins at zero, so an untrained predictor
        # ranks exactly like the text encoder and training only adds corrections.
        nn.init.zeros_(self.decoder[2].weight)
        nn.init.zeros_(self.decoder[2].bias)
        self.cos_scale = nn.Parameter(torch.tensor(cos_scale))

    @property
    def propagates(self) -> bool:
        """Whether the encoder passes messages (all but ``mlp``)."""
        return self.kind != "mlp"

    @property
    def uses_gcn(self) -> bool:
        """Whether the encoder is the GCN (``gcn`` and ``ncn``)."""
        return self.kind in ("gcn", "ncn")

    def _layer(self, i: int, x: torch.Tensor, agg: torch.Tensor | None) -> torch.Tensor:
        if self.kind == "sage":
            out = self.lin[i](x) + self.lin_neigh[i](agg)
        elif self.uses_gcn:
            out = self.lin[i](agg)  # agg already holds the self loop
        else:
            out = self.lin[i](x)
        return F.relu(out) if i < self.num_layers - 1 else out

    def chunk_states(self, z: torch.Tensor, graph: ChunkStructure) -> list[torch.Tensor]:
        """Per-layer chunk states ``[h^(0) = z, h^(1), ..., h^(L)]`` on the chunk-only graph."""
        states = [z]
        x = z
        for i in range(self.num_layers):
            if self.kind == "sage":
                agg = torch.sparse.mm(graph.mean_op, x)
            elif self.uses_gcn:
                agg = torch.sparse.mm(graph.gcn_op, x) + graph.gcn_self[:, None] * x
            else:
                agg = None
            x = self._layer(i, x, agg)
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

        Args:
            z_q: ``(b, d)`` query features.
            neighbors: ``(b, M)`` chunk indices each query is attached to.
            weights: ``(b, M)`` message-edge weights.
            chunk_states: Output of :meth:`chunk_states`.
            graph: The chunk structure (GCN degrees).
        """
        x = z_q
        if self.kind == "sage":
            total = weights.sum(1, keepdim=True)
            coef = weights / torch.where(total > 0, total, torch.ones_like(total))
        elif self.uses_gcn:
            deg_q = 1.0 + weights.sum(1, keepdim=True)
            coef = weights / torch.sqrt(deg_q * graph.gcn_degree[neighbors])
            self_coef = 1.0 / deg_q
        for i in range(self.num_layers):
            agg = None
            if self.propagates:
                agg = (coef[..., None] * chunk_states[i][neighbors]).sum(1)
                if self.uses_gcn:
                    agg = agg + self_coef * x
            x = self._layer(i, x, agg)
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
    query_neighbors: np.ndarray,
    pair_query: np.ndarray,
    pair_chunk: np.ndarray,
    h_chunks: torch.Tensor,
    graph: ChunkStructure,
) -> torch.Tensor:
    """``Σ_{w ∈ N(q) ∩ N(c)} h_w`` for each pair (NCN's common-neighbour term).

    ``N(q)`` is the query's message neighbourhood, ``N(c)`` the chunk's mutual-kNN
    neighbours. Vectorised: membership by sorted edge codes, sum by one sparse product.
    """
    p = len(pair_query)
    cand = query_neighbors[pair_query]  # (P, M)
    rows = np.repeat(np.arange(p), cand.shape[1])
    cols = cand.reshape(-1)
    keep = graph.adjacent(np.repeat(pair_chunk, cand.shape[1]), cols)
    mask = _sparse(rows[keep], cols[keep], np.ones(int(keep.sum()), np.float32), (p, graph.n))
    return torch.sparse.mm(mask, h_chunks)


# --------------------------------------------------------------------------- training


@dataclass
class TrainConfig:
    """Training settings; defaults follow the paper's Table 8 for NCN.

    Attributes:
        predictor: ``sage``, ``gcn``, ``mlp`` or ``ncn``.
        hidden: Hidden size (256).
        layers: Message-passing layers (1).
        lr: Adam learning rate (0.0043).
        weight_decay: Adam weight decay (1e-8).
        epochs: Maximum epochs (100).
        negatives: Negative chunks per positive link (``|P(u)|``, silent in the paper).
        hard_negative_fraction: Share of negatives drawn from the query's nearest
            non-linked chunks instead of uniformly (0 = the paper's uniform sampling).
        hard_pool: How many nearest chunks form a query's hard-negative pool.
        val_fraction: Share of queries held out for early stopping (gap G1).
        patience: Evaluations without improvement before stopping.
        eval_every: Epochs between validations.
        seed: Seed for initialisation and sampling.
        threads: Torch CPU threads while training.
        pair_batch: Most (query, chunk) pairs scored at once. An epoch with more
            pairs sums its gradient over slices of this size before the one Adam
            step, so the update stays the full-batch one while activation memory
            stays bounded (about 4 KB per pair at the default sizes).
        links_per_epoch: Most supervision links one epoch trains on. Larger sets
            are sampled afresh, uniformly, every epoch (with their negatives), so
            an epoch costs the same beyond this size: the loss is a Monte-Carlo
            estimate already (negative sampling, §3.4), and the paper does not
            say whether it trains full-batch or in mini-batches. Up to 16k chunks
            of the scale corpus every link is used every epoch.
    """

    predictor: str = "ncn"
    hidden: int = 256
    layers: int = 1
    lr: float = 0.0043
    weight_decay: float = 1e-8
    epochs: int = 100
    negatives: int = 3
    hard_negative_fraction: float = 0.0
    hard_pool: int = 32
    val_fraction: float = 0.1
    patience: int = 4
    eval_every: int = 5
    seed: int = 0
    threads: int = 2
    pair_batch: int = 32768
    links_per_epoch: int = 65536

    def __post_init__(self) -> None:
        if self.predictor not in PREDICTORS:
            raise ValueError(f"unknown predictor {self.predictor!r}; choose one of {PREDICTORS}")
        for name in (
            "hidden",
            "layers",
            "epochs",
            "negatives",
            "hard_pool",
            "eval_every",
            "threads",
            "pair_batch",
            "links_per_epoch",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not 0.0 <= self.hard_negative_fraction <= 1.0:
            raise ValueError("hard_negative_fraction must be in [0, 1]")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError("val_fraction must be in [0, 1)")
        if self.lr <= 0 or self.weight_decay < 0 or self.patience < 0:
            raise ValueError("lr must be > 0, weight_decay and patience >= 0")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings."""
        return asdict(self)


@dataclass
class TrainReport:
    """What training did, for logs, the manifest and benchmark reports.

    Attributes:
        predictor: The predictor trained.
        train_seconds: Wall time of the training loop.
        epochs_run: Epochs actually run (early stopping may cut them).
        best_epoch: Epoch whose weights were kept.
        final_loss: Training loss of the last epoch.
        val_auc: ROC-AUC of held-out links against sampled negatives (half uniform,
            half the query's nearest non-linked chunks); None without validation.
        val_hits: Hits@k of held-out links: share ranked within the top ``k`` of
            their query's sampled negatives; None without validation.
        hits_k: The ``k`` of ``val_hits``.
        train_links: Supervision links trained on.
        epoch_links: Links each epoch trained on (fewer than ``train_links`` when
            they were sampled, see ``TrainConfig.links_per_epoch``).
        val_links: Links held out.
        queries: Query nodes in the graph.
        history: ``(epoch, loss, val_auc)`` per validation.
    """

    predictor: str
    train_seconds: float = 0.0
    epochs_run: int = 0
    best_epoch: int = 0
    final_loss: float = float("nan")
    val_auc: float | None = None
    val_hits: float | None = None
    hits_k: int = 10
    train_links: int = 0
    epoch_links: int = 0
    val_links: int = 0
    queries: int = 0
    history: list[tuple[int, float | None, float | None]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report."""
        out = asdict(self)
        out["history"] = [list(h) for h in self.history]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainReport:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        data["history"] = [tuple(h) for h in data.get("history", [])]
        return cls(**data)


@contextlib.contextmanager
def deterministic_torch(seed: int, threads: int) -> Iterator[None]:
    """Seed torch, use deterministic algorithms and ``threads`` CPU threads; restore after."""
    prev_threads = torch.get_num_threads()
    prev_det = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(max(1, int(threads)))
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield
    finally:
        torch.use_deterministic_algorithms(prev_det)
        torch.set_num_threads(prev_threads)


def _split_queries(num_queries: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of held-out queries (none when too few to validate)."""
    held = np.zeros(num_queries, dtype=bool)
    n_val = int(round(num_queries * fraction))
    if n_val >= 2 and num_queries - n_val >= 2:
        held[rng.permutation(num_queries)[:n_val]] = True
    return held


class _Sampler:
    """Uniform and hard negative chunks for query-chunk links (§3.4 Monte-Carlo loss)."""

    def __init__(self, data: LinkGraph, pool: int, rng: np.random.Generator) -> None:
        self.n = data.num_chunks
        self.rng = rng
        self.positive_codes = np.unique(data.pos_query * self.n + data.pos_chunk)
        k = min(pool, self.n)
        idx, _ = knn_graph(data.z_queries, k, others=data.z_chunks) if k else (None, None)
        self.pool = idx if idx is not None else np.zeros((data.num_queries, 0), np.int64)
        if self.pool.size:
            linked = self.is_positive(
                np.repeat(np.arange(data.num_queries), self.pool.shape[1]), self.pool.reshape(-1)
            ).reshape(self.pool.shape)
            # Move linked chunks to the end of each row; count the usable ones.
            order = np.argsort(linked, axis=1, kind="stable")
            self.pool = np.take_along_axis(self.pool, order, axis=1)
            self.pool_size = (~linked).sum(1)
        else:
            self.pool_size = np.zeros(data.num_queries, np.int64)

    def is_positive(self, q: np.ndarray, c: np.ndarray) -> np.ndarray:
        codes = np.asarray(q, np.int64) * self.n + np.asarray(c, np.int64)
        pos = np.minimum(np.searchsorted(self.positive_codes, codes), self.positive_codes.size - 1)
        return self.positive_codes[pos] == codes

    def uniform(self, queries: np.ndarray) -> np.ndarray:
        chunks = self.rng.integers(0, self.n, size=len(queries))
        clash = self.is_positive(queries, chunks)
        if clash.any():  # one redraw; the rare survivors are harmless noise
            chunks[clash] = self.rng.integers(0, self.n, size=int(clash.sum()))
        return chunks

    def hard(self, queries: np.ndarray) -> np.ndarray:
        sizes = self.pool_size[queries]
        out = self.uniform(queries)
        ok = sizes > 0
        if ok.any():
            pick = (self.rng.random(int(ok.sum())) * sizes[ok]).astype(np.int64)
            out[ok] = self.pool[queries[ok], pick]
        return out

    def sample(self, queries: np.ndarray, hard_fraction: float) -> np.ndarray:
        hard = self.rng.random(len(queries)) < hard_fraction
        out = self.uniform(queries)
        if hard.any():
            out[hard] = self.hard(queries[hard])
        return out


def pair_logits(
    model: LinkPredictor,
    data_t: dict[str, torch.Tensor],
    graph: ChunkStructure,
    query_neighbors: np.ndarray,
    pair_query: np.ndarray,
    pair_chunk: np.ndarray,
    states: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """Logits of (query, chunk) pairs, computed the way inference computes them.

    ``states`` are the model's chunk states (:meth:`LinkPredictor.chunk_states`),
    computed here when not given.
    """
    if states is None:
        states = model.chunk_states(data_t["z_chunks"], graph)
    uq = np.unique(pair_query)
    h_q = model.query_states(
        data_t["z_queries"][uq],
        data_t["query_neighbors"][uq],
        data_t["query_weights"][uq],
        states,
        graph,
    )
    where = np.searchsorted(uq, pair_query)
    hq = h_q[torch.from_numpy(where)]
    pc = torch.from_numpy(np.asarray(pair_chunk, np.int64))
    hc = states[-1][pc]
    cos = (
        data_t["z_queries"][torch.from_numpy(np.asarray(pair_query, np.int64))]
        * data_t["z_chunks"][pc]
    ).sum(1)
    common = None
    if model.kind == "ncn":
        common = common_neighbor_sum(query_neighbors, pair_query, pair_chunk, states[-1], graph)
    return model.decode(hq, hc, cos, common)


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """ROC-AUC by ranks (ties count half)."""
    scores = np.concatenate([pos, neg])
    order = scores.argsort(kind="stable")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    # average ranks over ties
    _, inv, counts = np.unique(scores, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, weights=ranks)
    ranks = (sums / counts)[inv]
    n_pos, n_neg = len(pos), len(neg)
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _tensors(data: LinkGraph) -> dict[str, torch.Tensor]:
    return {
        "z_chunks": torch.from_numpy(np.ascontiguousarray(data.z_chunks, np.float32)),
        "z_queries": torch.from_numpy(np.ascontiguousarray(data.z_queries, np.float32)),
        "query_neighbors": torch.from_numpy(np.ascontiguousarray(data.query_neighbors, np.int64)),
        "query_weights": torch.from_numpy(np.ascontiguousarray(data.query_weights, np.float32)),
    }


def _slices(total: int, size: int) -> Iterator[slice]:
    return (slice(a, min(a + size, total)) for a in range(0, total, size))


def _epoch_links(
    queries: np.ndarray, chunks: np.ndarray, most: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The links one epoch trains on: all of them, or a fresh sample of ``most``."""
    if len(queries) <= most:
        return queries, chunks
    pick = np.sort(rng.choice(len(queries), most, replace=False))
    return queries[pick], chunks[pick]


@dataclass(frozen=True)
class _Scoring:
    """What scoring pairs needs besides the pairs: the model and its graph."""

    model: LinkPredictor
    data_t: dict[str, torch.Tensor]
    graph: ChunkStructure
    query_neighbors: np.ndarray

    def chunk_states(self) -> list[torch.Tensor]:
        return self.model.chunk_states(self.data_t["z_chunks"], self.graph)

    def logits(
        self, pair_query: np.ndarray, pair_chunk: np.ndarray, states: list[torch.Tensor] | None
    ) -> torch.Tensor:
        return pair_logits(
            self.model, self.data_t, self.graph, self.query_neighbors, pair_query, pair_chunk,
            states,
        )  # fmt: skip


def _bce_step(
    scoring: _Scoring,
    pair_query: np.ndarray,
    pair_chunk: np.ndarray,
    n_pos: int,
    pair_batch: int,
) -> float:
    """Back-propagate one epoch's BCE loss (positives first, then negatives); return it.

    The loss is the mean BCE of the positive pairs plus the mean BCE of the negative
    ones. Up to ``pair_batch`` pairs it is one computation. Beyond, the pairs are
    scored in slices and their gradients summed, which is the same gradient: the
    per-pair activations (gathered states, decoder layers, NCN's common-neighbour
    sums) are what grew with the corpus: about 4 KB per pair (the scale corpus at
    16k chunks, 184k pairs an epoch, peaked at 1,749 MB in one computation and
    1,153 MB in slices), and at 64k chunks one computation swung the process
    between 2.4 and 9.9 GB.
    """
    n_neg = len(pair_query) - n_pos
    if len(pair_query) <= pair_batch:
        logits = scoring.logits(pair_query, pair_chunk, None)
        loss = F.binary_cross_entropy_with_logits(
            logits[:n_pos], torch.ones(n_pos)
        ) + F.binary_cross_entropy_with_logits(logits[n_pos:], torch.zeros(n_neg))
        loss.backward()
        return float(loss.detach())
    # The chunk encoder runs once per epoch, not once per slice: the slices see its
    # states as leaves, collect their gradients, and one backward pass at the end
    # carries the sum into the encoder's weights.
    states = scoring.chunk_states()
    leaves = [states[0]] + [h.detach().requires_grad_() for h in states[1:]]
    total = 0.0
    for part in _slices(len(pair_query), pair_batch):
        logits = scoring.logits(pair_query[part], pair_chunk[part], leaves)
        positive = torch.from_numpy(np.arange(part.start, part.stop) < n_pos)
        per_pair = F.binary_cross_entropy_with_logits(logits, positive.float(), reduction="none")
        loss = torch.where(positive, per_pair / n_pos, per_pair / n_neg).sum()
        loss.backward()
        total += float(loss.detach())
    reached = [
        (h, leaf.grad)
        for h, leaf in zip(states[1:], leaves[1:], strict=True)
        if leaf.grad is not None
    ]
    if reached:
        torch.autograd.backward([h for h, _ in reached], [g for _, g in reached])
    return total


@torch.no_grad()
def _score_pairs(
    scoring: _Scoring, pair_query: np.ndarray, pair_chunk: np.ndarray, pair_batch: int
) -> np.ndarray:
    """Logits of many pairs, ``pair_batch`` at a time over one set of chunk states."""
    states = scoring.chunk_states()
    parts = [
        scoring.logits(pair_query[p], pair_chunk[p], states).numpy()
        for p in _slices(len(pair_query), pair_batch)
    ]
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def train_link_predictor(
    data: LinkGraph,
    config: TrainConfig | None = None,
    *,
    model: LinkPredictor | None = None,
    show_progress: bool = False,
) -> tuple[LinkPredictor, TrainReport]:
    """Train a predictor on the query-chunk links of ``data`` (§3.4, App. A.3).

    Loss: BCE over every supervision link and ``negatives`` sampled chunks per link,
    the Monte-Carlo form of the paper's loss. One Adam step per epoch on every link
    (on a fresh sample of ``links_per_epoch`` links when there are more; the
    gradient summed over slices of ``pair_batch`` pairs); every ``eval_every``
    epochs the held-out queries' links are scored against sampled negatives and the
    best weights by validation AUC are kept (early stopping after ``patience``
    evaluations without gain).

    Args:
        data: The graph and its supervision links.
        config: Settings (defaults: the paper's NCN settings).
        model: Continue training this model (fine-tuning) instead of a fresh one.
        show_progress: Log each validation at INFO level.

    Returns:
        The trained model (eval mode) and a :class:`TrainReport`.

    Raises:
        ValueError: No supervision links or no chunks.
    """
    config = config or TrainConfig()
    if data.num_chunks == 0 or len(data.pos_query) == 0:
        raise ValueError("training needs at least one chunk and one query-chunk link")
    start = time.perf_counter()
    report = TrainReport(predictor=config.predictor, queries=data.num_queries)
    rng = np.random.default_rng(config.seed)
    graph = ChunkStructure(data.num_chunks, data.edge_rows, data.edge_cols, data.edge_weights)
    with deterministic_torch(config.seed, config.threads):
        if model is None:
            model = LinkPredictor(
                config.predictor, data.z_chunks.shape[1], config.hidden, config.layers
            )
        elif model.kind != config.predictor:
            raise ValueError(f"cannot fine-tune a {model.kind} model as {config.predictor}")
        data_t = _tensors(data)
        held = _split_queries(data.num_queries, config.val_fraction, rng)
        is_val = held[data.pos_query]
        tq, tc = data.pos_query[~is_val], data.pos_chunk[~is_val]
        vq, vc = data.pos_query[is_val], data.pos_chunk[is_val]
        report.train_links, report.val_links = len(tq), len(vq)
        report.epoch_links = min(len(tq), config.links_per_epoch)
        sampler = _Sampler(data, config.hard_pool, rng)
        val_neg_q = val_neg_c = None
        if len(vq):
            val_queries = np.flatnonzero(held)
            per = 20
            rep = np.repeat(val_queries, per)
            val_neg_q = np.concatenate([rep, rep])
            val_neg_c = np.concatenate([sampler.uniform(rep), sampler.hard(rep)])
        optim = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        best_auc, best_state, stale = -1.0, None, 0

        scoring = _Scoring(model, data_t, graph, data.query_neighbors)

        def validate() -> tuple[float, float]:
            return _validate(
                scoring, (vq, vc), (val_neg_q, val_neg_c), report.hits_k, config.pair_batch
            )

        if val_neg_q is not None:  # epoch 0: the untrained (encoder-similarity) predictor
            auc, hits = validate()
            report.history.append((0, None, round(auc, 5)))
            best_auc, report.val_auc, report.val_hits = auc, auc, hits
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        for epoch in range(1, config.epochs + 1):
            model.train()
            eq, ec = _epoch_links(tq, tc, config.links_per_epoch, rng)
            neg_q = np.repeat(eq, config.negatives)
            neg_c = sampler.sample(neg_q, config.hard_negative_fraction)
            pq = np.concatenate([eq, neg_q])
            pc = np.concatenate([ec, neg_c])
            optim.zero_grad()
            report.final_loss = _bce_step(scoring, pq, pc, len(eq), config.pair_batch)
            optim.step()
            report.epochs_run = epoch
            if val_neg_q is None or (epoch % config.eval_every and epoch != config.epochs):
                continue
            auc, hits = validate()
            report.history.append((epoch, round(report.final_loss, 5), round(auc, 5)))
            if show_progress:
                logger.info("epoch %d loss %.4f val AUC %.4f", epoch, report.final_loss, auc)
            if auc > best_auc + 1e-5:
                best_auc, stale = auc, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                report.best_epoch, report.val_auc, report.val_hits = epoch, auc, hits
            else:
                stale += 1
                if stale > config.patience:
                    break
        if best_state is not None:
            model.load_state_dict(best_state)
        else:
            report.best_epoch = report.epochs_run
        model.eval()
        # The gradients are only for training: kept, they are a second copy of
        # every weight (0.9 MB at the default sizes) for the index's lifetime.
        model.zero_grad(set_to_none=True)
    report.train_seconds = round(time.perf_counter() - start, 3)
    logger.info(
        "trained %s link predictor: %d epochs (best %d) in %.1fs, val AUC %s, %d links",
        config.predictor,
        report.epochs_run,
        report.best_epoch,
        report.train_seconds,
        "n/a" if report.val_auc is None else f"{report.val_auc:.3f}",
        report.train_links,
    )
    return model, report


@torch.no_grad()
def _validate(scoring: _Scoring, positives, negatives, k, batch) -> tuple[float, float]:
    (vq, vc), (nq, nc) = positives, negatives
    scoring.model.eval()
    pos = _score_pairs(scoring, vq, vc, batch)
    neg = _score_pairs(scoring, nq, nc, batch)
    auc = _auc(pos, neg)
    # Hits@k per query: how many of its own negatives beat each positive.
    order = np.argsort(nq, kind="stable")
    nq_sorted, neg_sorted = nq[order], neg[order]
    starts = np.searchsorted(nq_sorted, vq, side="left")
    ends = np.searchsorted(nq_sorted, vq, side="right")
    beaten = np.array(
        [(neg_sorted[s:e] > p).sum() for s, e, p in zip(starts, ends, pos, strict=True)]
    )
    return auc, float((beaten < k).mean())


# --------------------------------------------------------------------------- inference


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
    ) -> np.ndarray:
        """``phi(q, C)`` for every chunk ``C`` for one new query node (§3.4 Inference).

        Args:
            z_query: ``(d,)`` unit query feature.
            neighbors: ``(M,)`` chunks the query is attached to (message edges only).
            weights: ``(M,)`` their edge weights.
            rows: Score only these chunk rows (``None``: all). The decoder is an MLP
                on every (query, chunk) pair, ``n x hidden^2`` work per query, so
                large indexes score a candidate set (see the retriever).

        Returns:
            One logit per chunk of ``rows`` (or per chunk), in that order.
        """
        zq = torch.from_numpy(np.asarray(z_query, np.float32)[None, :])
        nb = torch.from_numpy(np.asarray(neighbors, np.int64)[None, :])
        ww = torch.from_numpy(np.asarray(weights, np.float32)[None, :])
        hq = self.model.query_states(zq, nb, ww, self.states, self.graph)
        states, z_chunks = self.states[-1], self.z_chunks
        if rows is None:
            rows_np = np.arange(self.num_chunks)
        else:
            rows_np = np.asarray(rows, np.int64)
            index = torch.from_numpy(rows_np)
            states, z_chunks = states[index], z_chunks[index]
        n = len(rows_np)
        cos = z_chunks @ zq[0]
        common = None
        if self.model.kind == "ncn":
            common = common_neighbor_sum(
                np.asarray(neighbors, np.int64)[None, :],
                np.zeros(n, np.int64),
                rows_np,
                self.states[-1],
                self.graph,
            )
        return self.model.decode(hq.expand(n, -1), states, cos, common).numpy()
