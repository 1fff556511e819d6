"""What link-predictor training is told, and what it reports (§3.4, App. A.3, Tables 7-8)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .predictor import PREDICTORS


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
