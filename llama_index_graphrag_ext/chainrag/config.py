"""ChainRAG's settings (Zhu et al. 2025) and presets.

The class defaults are the paper's (§3.1, §4.1); where it is silent they are
this package's choices, each saying so (the digest's §8 lists those points).
Building the graph and the LLM-free retriever never call an LLM; the query
engine does (its ``answer`` and ``llm`` sections).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..core.config import MethodConfig, Preset, Section
from ..core.llm.settings import LLMSettings

#: The three edge kinds of the paper (§3.1), in the order the paper lists them.
EDGE_KINDS: tuple[str, ...] = ("EC", "SS", "SA")


class ChainRAGGraph(Section):
    """Building the sentence graph (§3.1; no LLM)."""

    alpha: float = Field(
        0.6, gt=0, le=1, description="§3.1, §4.1: share of entities kept as key entities (60 %)."
    )
    key_importance: Literal["bm25", "idf"] = Field(
        "bm25",
        description="§3.1: an entity's importance, 'i.e., BM25' (as the authors' code: its mean "
        "BM25 weight over all sentences); 'idf': inverse sentence frequency, rarer is more "
        "important (ours).",
    )
    key_cut: Literal["sentence", "global"] = Field(
        "sentence",
        description="§3.1: the α share taken within each sentence (K_i ⊆ E_i), or 'global': "
        "entities above the (1 - α) quantile of importance, as the authors' code's percentile.",
    )
    max_df: int | None = Field(
        None,
        ge=0,
        description="An entity named by more sentences than this is never key (a hub); "
        "None or 0: no cap, as in the paper (ours).",
    )
    keep_rarest: bool = Field(
        False, description="Always keep each sentence's rarest linking entity (ours)."
    )
    m: int = Field(10, ge=0, description="§3.1, §4.1: SS neighbours per sentence (top-m).")
    window: int = Field(
        3,
        ge=0,
        description="§3.1: SA links sentences at most this far apart (|i - j| <= 3); inside "
        "one chunk here, since a corpus has no per-question context (ours).",
    )
    entity_labels: tuple[str, ...] | None = Field(
        None,
        description="spaCy labels kept as entities; None: all but purely numeric ones "
        "(the paper is silent, digest §8.A-2).",
    )
    spacy_model: str | None = Field(
        None,
        description="spaCy pipeline for sentences and entities (App. B: en_core_web_sm; "
        "None: it or its repackaging).",
    )
    title_key: str | None = Field(
        "title",
        description="Metadata key whose value prefixes each sentence for embedding "
        "('Title: sentence'; a leading title line is no sentence); None: bare sentences (ours).",
    )
    nlp_processes: int | None = Field(
        1,
        ge=1,
        description="Processes for spaCy's sentences and NER: 1 in this process, 2+ worker "
        "processes (a script on macOS or Windows then needs a __main__ guard), None the "
        "machine's CPUs, at most 4. The same graph either way (ours).",
    )


class ChainRAGRetrieval(Section):
    """Retrieval on the sentence graph (§3.2): the engine's search and the LLM-free retriever."""

    candidate_k: int = Field(
        100, gt=0, description="§3.2, §4.1: first-round candidates by embedding similarity."
    )
    k: int = Field(3, gt=0, description="§3.2, §4.1, §4.6: seed sentences kept (top-k).")
    word_budget: int = Field(
        3000, gt=0, description="§3.2, §4.1: the gathered sentences' word limit."
    )
    follow_ec: bool = Field(True, description="§3.1: expand over EC edges (§4.4 ablates each).")
    follow_ss: bool = Field(True, description="§3.1: expand over SS edges.")
    follow_sa: bool = Field(True, description="§3.1: expand over SA edges.")
    hops: int | None = Field(
        1,
        ge=0,
        description="LLM-free retriever: expansions at most; 1 is §3.2's first exploration "
        "(all 1-hop neighbours), the paper's further hops wait for its LLM. None: until the "
        "word budget (ours).",
    )
    neighbor_score: Literal["question", "propagate"] = Field(
        "question",
        description="LLM-free retriever: a neighbour scored against the question like any "
        "candidate (§3.2), or 'propagate': its cosine raised by w_<kind> times its source's "
        "score, capped at that score (ours; a stand-in for §3.3's entity completion).",
    )
    w_ec: float = Field(
        0.4, ge=0, description="'propagate': share of its source's score an EC neighbour adds."
    )
    w_ss: float = Field(
        0.0, ge=0, description="'propagate': share of its source's score an SS neighbour adds."
    )
    w_sa: float = Field(
        0.4, ge=0, description="'propagate': share of its source's score an SA neighbour adds."
    )
    bm25_weight: float = Field(
        0.0,
        ge=0,
        description="Weight of BM25's rankings (the first round's sentences, the final "
        "passages) fused with the cosine's and the search's by reciprocal rank (ours, "
        "core/lexical.py; 0 is the paper).",
    )
    rank: Literal["one", "graph"] = Field(
        "one",
        description="LLM-free retriever: one ranking of every candidate (seeds, pool, "
        "neighbours), as §3.4's CxtInt reranks the union; 'graph': gathered sentences' "
        "chunks first, then the pool's (ours).",
    )
    fill: bool = Field(
        True, description="rank='graph': complete the list from the candidate pool (ours)."
    )

    @property
    def edge_kinds(self) -> tuple[str, ...]:
        """The edge kinds followed, in the paper's order."""
        follow = {"EC": self.follow_ec, "SS": self.follow_ss, "SA": self.follow_sa}
        return tuple(kind for kind in EDGE_KINDS if follow[kind])

    @property
    def edge_weights(self) -> dict[str, float]:
        """``w_<kind>`` by edge kind."""
        return {"EC": self.w_ec, "SS": self.w_ss, "SA": self.w_sa}


class ChainRAGAnswer(Section):
    """The query engine's LLM steps (§3.2-§3.4)."""

    integration: Literal["answer", "context"] = Field(
        "context",
        description="§3.4: the final answer from the sub-answers (AnsInt) or from the merged, "
        "reranked sentences (CxtInt); the paper reports both (digest §8.A-19).",
    )
    decompose: bool | None = Field(
        None,
        description="§3.2: decompose the question; None: when the LLM writes JSON (not the "
        "embedded SmolLM2, which keeps the question whole).",
    )
    max_subquestions: int = Field(
        4, gt=0, description="Sub-questions kept (Fig. 8 asks for usually 2 at most; ours)."
    )
    max_hops: int = Field(
        3,
        gt=0,
        description="Expansions per sub-question at most (the paper stops at sufficiency or "
        "the word budget only; ours).",
    )


class ChainRAGConfig(MethodConfig):
    """ChainRAG: a sentence graph and progressive retrieval against lost-in-retrieval."""

    graph: ChainRAGGraph = ChainRAGGraph()
    retrieval: ChainRAGRetrieval = ChainRAGRetrieval()
    answer: ChainRAGAnswer = ChainRAGAnswer()
    llm: LLMSettings = LLMSettings()

    presets = {
        "paper": Preset(
            "§3.1-§4.1: the authors' key entities (mean BM25, per sentence, no cap), neighbours "
            "scored against the question. The graph and the retriever are LLM-free; the "
            "engine answers."
        ),
        "default": Preset(
            "The LLM-free retriever (before: chainrag-retriever): IDF key entities over one "
            "global cut, hubs on more than 20 sentences never key, each sentence's rarest "
            "entity kept, neighbours' scores propagated, BM25 fused at weight 0.5; chosen on "
            "2wiki-101 by one sweep with MiniLM, reported on musique-100 (docs/methods/chainrag.md).",
            {
                "key_importance": "idf",
                "key_cut": "global",
                "max_df": 20,
                "keep_rarest": True,
                "neighbor_score": "propagate",
                "nlp_processes": None,
                "bm25_weight": 0.5,
            },
        ),
        "common-entities": Preset(
            "`default` with max_df = 50 (hubs on more than 50 sentences never key): chosen on "
            "musique-100, reported on 2wiki-101 (docs/methods/chainrag.md).",
            {"max_df": 50},
            base="default",
        ),
    }

    @property
    def uses_llm(self) -> bool:
        return False
