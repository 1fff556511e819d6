"""Training the link predictor, and choosing its weights (§3.4, App. A.3).

* Loss: BCE over the query-chunk links and ``negatives`` sampled chunks per link,
  the Monte-Carlo form of §3.4's loss, with Adam (App. A.3).
* Negatives: uniform (§4.5), optionally mixed with each query's nearest
  non-linked chunks (:class:`_Sampler`).
* Model selection (ours; the paper has none, gap G1): held-out *queries*, best
  validation AUC, early stopping after ``patience`` evaluations without gain.
* Determinism: seeded, deterministic algorithms, fixed threads (gap G14).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from ..core.embeddings import knn_graph
from .config import LPRAGTraining
from .link_graph import ChunkStructure, LinkGraph
from .predictor import LinkPredictor, pair_logits

logger = logging.getLogger(__name__)


@dataclass
class TrainReport:
    """What training did, for logs, the manifest and benchmark reports.

    Attributes:
        epochs_run: Epochs actually run (early stopping may cut them).
        best_epoch: Epoch whose weights were kept.
        val_auc: ROC-AUC of held-out links against sampled negatives (half uniform,
            half the query's nearest non-linked chunks); None without validation.
        val_hits: Hits@k of held-out links: share ranked within the top ``k`` of
            their query's sampled negatives; None without validation.
        epoch_links: Links each epoch trained on (see ``links_per_epoch``).
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

    def chunk_states(self) -> list[torch.Tensor]:
        return self.model.chunk_states(self.data_t["z_chunks"], self.graph)

    def logits(
        self, pair_query: np.ndarray, pair_chunk: np.ndarray, states: list[torch.Tensor] | None
    ) -> torch.Tensor:
        return pair_logits(self.model, self.data_t, self.graph, pair_query, pair_chunk, states)


def _bce_step(
    scoring: _Scoring,
    pair_query: np.ndarray,
    pair_chunk: np.ndarray,
    n_pos: int,
    pair_batch: int,
) -> float:
    """Back-propagate one epoch's BCE loss (positives first, then negatives); return it.

    The loss is the mean BCE of the positive pairs plus that of the negative ones.
    Beyond ``pair_batch`` pairs it is summed over slices: the same gradient, with
    bounded per-pair activations.
    """
    n_neg = len(pair_query) - n_pos
    if len(pair_query) <= pair_batch:
        logits = scoring.logits(pair_query, pair_chunk, None)
        loss = F.binary_cross_entropy_with_logits(
            logits[:n_pos], torch.ones(n_pos)
        ) + F.binary_cross_entropy_with_logits(logits[n_pos:], torch.zeros(n_neg))
        loss.backward()
        return float(loss.detach())
    # The chunk encoder runs once per epoch: the slices see its states as leaves,
    # and one backward pass at the end carries their gradients into the encoder.
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
    config: LPRAGTraining | None = None,
    *,
    model: LinkPredictor | None = None,
    show_progress: bool = False,
) -> tuple[LinkPredictor, TrainReport]:
    """Train a predictor on the query-chunk links of ``data`` (§3.4, App. A.3; see the module).

    One Adam step per epoch on every link (or a fresh sample of ``links_per_epoch``).

    Args:
        config: The config's training section (default: the paper's NCN settings).
        model: Continue training this model (fine-tuning) instead of a fresh one.
        show_progress: Log each validation at INFO level.

    Returns:
        The trained model (eval mode) and a :class:`TrainReport`.

    Raises:
        ValueError: No supervision links or no chunks.
    """
    config = config or LPRAGTraining()
    if data.num_chunks == 0 or len(data.pos_query) == 0:
        raise ValueError("training needs at least one chunk and one query-chunk link")
    start = time.perf_counter()
    report = TrainReport(predictor=config.predictor, queries=data.num_queries)
    rng = np.random.default_rng(config.seed)
    graph = data.structure()
    with deterministic_torch(config.seed, config.threads):
        if model is None:
            model = LinkPredictor(
                config.predictor, data.z_chunks.shape[1], config.hidden, config.layers
            )
        elif model.kind != config.predictor:
            raise ValueError(f"cannot fine-tune a {model.kind} model as {config.predictor}")
        data_t = data.tensors()
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

        scoring = _Scoring(model, data_t, graph)

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
        # Kept gradients would be a second copy of every weight for the index's lifetime.
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
