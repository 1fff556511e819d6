"""LP-RAG's settings (Nascimento, Franco, Souza) and presets.

The class defaults are the paper's: atomic chunks and questions written by an
LLM (§3.1-3.2), a mutual 5-NN chunk graph (§3.3), NCN trained with the generic
hyper-parameters of Table 8 (§3.4, App. A.3), one predictor, ranking by its
link score alone. Field names are the paper's symbols where it has one (``k``,
``n_B``, ``tau``); ``M`` is ours (the paper attaches the user query to every chunk).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..core.config import MethodConfig, Preset, Section
from ..core.llm.settings import LLMSettings

Predictor = Literal["sage", "gcn", "mlp", "ncn"]
BridgeLinks = Literal["titles", "entities", "both"]
#: ``cosine_prior`` value for the parameter-free fusion of the predictor and the encoder.
STANDARDIZED = "standardized"


class LPRAGGraph(Section):
    """The chunk graph and the query nodes' attachments to it (§3.3)."""

    k: int = Field(5, gt=0, description="§3.3 Eq. 4: neighbours of the mutual-kNN chunk graph.")
    knn_edges: bool = Field(
        True,
        description="§3.3 Eq. 4: join chunks by mutual kNN; false: messages pass along "
        "bridge links only (needs bridges; ours).",
    )
    on_no_title_links: Literal["none", "knn", "raise"] = Field(
        "none",
        description="With knn_edges false and no bridge link at all: no chunk edge, the "
        "paper's mutual-kNN graph, or an error (logged and counted; ours).",
    )
    M: int = Field(
        10,
        gt=0,
        description="Chunks a query node (synthetic or the user's) receives messages from, "
        "its nearest by cosine (ours: the paper attaches the user query to every chunk).",
    )


class LPRAGQueries(Section):
    """Batches and the query nodes written for them (§3.2, App. A.2), and bridges (ours)."""

    query_source: Literal["llm", "pseudo", "auto"] = Field(
        "llm",
        description="§3.2 Eq. 3: the LLM writes the queries ('llm'; no LLM is an error); "
        "'pseudo': LLM-free sentence windows, not questions (ours); 'auto': the LLM the "
        "suite's rule picks, pseudo-queries when none resolves.",
    )
    n_B: int = Field(2, gt=0, description="App. A.2: queries written per batch.")
    pseudo_max_words: int = Field(
        20, gt=0, description="Longest sentence window in a pseudo-query (ours)."
    )
    bridges: bool = Field(
        False,
        description="Bridge chunk edges (a chunk naming another's title or sharing a rare "
        "entity with it) and bridge pseudo-queries linked to both chunks (ours; lprag/bridges.py).",
    )
    bridge_links: BridgeLinks = Field(
        "titles",
        description="What a bridge links by: titles, rare named entities (spaCy NER) or both "
        "(ours).",
    )
    bridge_entity_chunks: int = Field(
        5, ge=2, description="An entity named by more chunks is a hub, not a bridge (ours)."
    )
    bridge_mask: bool = Field(
        False, description="Drop the mentioned title from a bridge query (ours)."
    )
    bridges_per_chunk: int = Field(1, gt=0, description="Most bridge queries of one chunk (ours).")


class LPRAGTraining(Section):
    """Training the link predictor (§3.4, App. A.3; Table 8's NCN hyper-parameters)."""

    predictor: Predictor = Field(
        "ncn",
        description="§4.1: NCN, the predictor of every headline run; 'mlp' is the paper's "
        "baseline without message passing (§4.5); 'gcn' and 'sage' are ours.",
    )
    hidden: int = Field(256, gt=0, description="Table 8: hidden size.")
    layers: int = Field(1, gt=0, description="Table 8: message-passing layers.")
    lr: float = Field(0.0043, gt=0, description="Table 8: Adam's learning rate.")
    weight_decay: float = Field(1e-8, ge=0, description="Table 8: Adam's weight decay.")
    epochs: int = Field(100, gt=0, description="Table 8: most epochs (Table 7: 1000).")
    negatives: int = Field(
        3, gt=0, description="§3.4: negatives per link, |P(u)| (the paper does not say; ours)."
    )
    hard_negative_fraction: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Share of negatives drawn from the query's nearest non-linked chunks "
        "(ours; 0: the paper's uniform sampling, A.3).",
    )
    hard_pool: int = Field(32, gt=0, description="Nearest chunks a hard negative is drawn from.")
    val_fraction: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="Queries held out for early stopping (ours; the paper has no split).",
    )
    patience: int = Field(4, ge=0, description="Validations without gain before stopping.")
    eval_every: int = Field(5, gt=0, description="Epochs between validations.")
    seed: int = Field(0, description="Seed of sampling and initialisation (member i: seed + i).")
    threads: int = Field(2, gt=0, description="Torch CPU threads while training.")
    pair_batch: int = Field(
        32768,
        gt=0,
        description="Most (query, chunk) pairs scored at once: an epoch with more sums its "
        "gradient over slices (the same full-batch step, bounded memory).",
    )
    links_per_epoch: int = Field(
        65536,
        gt=0,
        description="Most links one epoch trains on; more are sampled afresh every epoch (ours).",
    )
    ensemble: int = Field(
        1,
        gt=0,
        description="Predictors trained from consecutive seeds, their logits averaged "
        "(ours; 1: the paper's single predictor).",
    )
    update_policy: Literal["finetune", "retrain", "none"] = Field(
        "finetune",
        description="After an insert: go on training for finetune_epochs, train afresh, or "
        "keep the model (the paper's inductive use, App. B.3).",
    )
    finetune_epochs: int = Field(20, gt=0, description="Epochs of a fine-tune after an insert.")


class LPRAGRetrieval(Section):
    """Scoring a user query's links (§3.4, Eq. 9)."""

    tau: float | None = Field(
        None,
        ge=0,
        le=1,
        description="A.3: keep chunks whose link probability is at least tau (the paper "
        "passes those above 0.5 to the generator and ranks by score for R@k); None: rank only.",
    )
    cosine_prior: float | Literal["standardized"] = Field(
        0.0,
        description="Weight b of the encoder's cosine added to the logit, phi + 10 b cos "
        "(ours; 0: the paper's phi alone), or 'standardized': phi and the cosine each "
        "standardised over the scored chunks and summed.",
    )
    max_candidates: int | None = Field(
        None,
        gt=0,
        description="Score at most this many chunks per query, the nearest by cosine "
        "(ours); None: every chunk, as the paper does.",
    )
    bm25_weight: float = Field(
        0.0,
        ge=0,
        description="Weight of BM25's rankings (the chunks the query node attaches to, the "
        "final passages) fused with the cosine's and the link scores' by reciprocal rank "
        "(ours, core/lexical.py; 0 is the paper).",
    )
    long_chunks: Literal["best-sentences", "best-window", "pooled"] = Field(
        "pooled",
        description="A chunk longer than the embedder's window: its cosine from its best "
        "run of whole sentences (at most 60 words), its best window, or its pooled vector "
        "(core/windows.py; ours). The runs or windows are embedded when the index is built: "
        "'best-sentences' and 'best-window' need an index built with that value.",
    )

    @field_validator("cosine_prior", mode="before")
    @classmethod
    def _prior(cls, value: Any) -> float | str:
        if isinstance(value, str) and value.strip().lower() == STANDARDIZED:
            return STANDARDIZED
        try:
            weight = float(value)
        except (TypeError, ValueError):
            weight = -1.0
        if weight < 0:
            raise ValueError(f"cosine_prior must be a number >= 0 or {STANDARDIZED!r}")
        return weight


class LPRAGIndexingLLM(Section):
    """What the LLM writes while indexing (§3.1-3.2), besides the call settings (``llm``)."""

    atomic_chunks: bool = Field(
        True,
        description="§3.1: the LLM rewrites each paragraph as atomic chunks (with LLM-written "
        "queries and an LLM other than the embedded SmolLM2; else chunks are passages).",
    )
    max_llm_batches: int | None = Field(
        None,
        ge=0,
        description="Most batches whose queries the LLM writes, a seeded draw; the others get "
        "pseudo-queries (ours). None: every batch, but 200 with the embedded SmolLM2.",
    )


class LPRAGConfig(MethodConfig):
    """LP-RAG: retrieval as link prediction between a new query node and the chunks."""

    graph: LPRAGGraph = LPRAGGraph()
    queries: LPRAGQueries = LPRAGQueries()
    training: LPRAGTraining = LPRAGTraining()
    retrieval: LPRAGRetrieval = LPRAGRetrieval()
    indexing_llm: LPRAGIndexingLLM = LPRAGIndexingLLM()
    llm: LLMSettings = LLMSettings()

    presets = {
        "paper": Preset(
            "§3-4, App. A.3 and Table 8: LLM-written atomic chunks and questions, NCN "
            "(every chunk scored, by the predictor alone)."
        ),
        "paper-musique": Preset("Table 7 (Exp. I, MuSiQue): 1000 epochs.", {"epochs": 1000}),
        "paper-hotpotqa": Preset(
            "Table 7 (Exp. I, HotpotQA): 3 layers, 1000 epochs.", {"layers": 3, "epochs": 1000}
        ),
        "paper-2wiki": Preset(
            "Table 7 (Exp. I, 2Wiki): 3 layers, learning rate 0.0085, hidden size 32, 1000 epochs.",
            {"layers": 3, "lr": 0.0085, "hidden": 32, "epochs": 1000},
        ),
        "pseudo": Preset(
            "The paper's settings with LLM-free pseudo-queries (sentence windows) on the "
            "passages; long chunks scored by their best window, at most 4096 chunks scored "
            "per query. Formerly `lprag-pseudo`; measured on musique-100 and 2wiki-101 "
            "(docs/methods/lprag.md).",
            {
                "query_source": "pseudo",
                "atomic_chunks": False,
                "max_candidates": 4096,
                "long_chunks": "best-window",
            },
        ),
        "default": Preset(
            "LLM-free: `pseudo` with masked bridge queries (3 a chunk) and messages along "
            "title links only, half hard negatives, M = 3, 60 epochs, three predictors and "
            "the standardized cosine prior, BM25 fused at weight 0.5, a long chunk scored by its "
            "best run of sentences. Chosen on 2wiki-101 (plain and joined eight to a document), "
            "reported on musique-100 "
            "(formerly `lprag-pseudo-titles`; docs/methods/lprag.md).",
            {
                "bridges": True,
                "knn_edges": False,
                "bridge_mask": True,
                "bridges_per_chunk": 3,
                "hard_negative_fraction": 0.5,
                "epochs": 60,
                "M": 3,
                "ensemble": 3,
                "cosine_prior": STANDARDIZED,
                "bm25_weight": 0.5,
                "long_chunks": "best-sentences",
            },
            base="pseudo",
        ),
        "short-training": Preset(
            "`default` trained for 30 epochs, BM25 fused at weight 0.25: chosen on musique-100, "
            "reported on 2wiki-101 "
            "(formerly `lprag-pseudo-titles-tuned-musique`; docs/methods/lprag.md).",
            {"epochs": 30, "bm25_weight": 0.25},
            base="default",
        ),
    }

    @model_validator(mode="after")
    def _consistent(self) -> LPRAGConfig:
        if not self.graph.knn_edges and not self.queries.bridges:
            raise ValueError("knn_edges=False needs bridges=True (the graph would have no edges)")
        cap = self.retrieval.max_candidates
        if cap is not None and cap < self.graph.M:
            raise ValueError(f"max_candidates ({cap}) must be at least M ({self.graph.M}) or None")
        return self

    @property
    def uses_llm(self) -> bool:
        return self.queries.query_source != "pseudo"
