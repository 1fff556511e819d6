"""CUE-RAG's settings (Su et al.) and presets.

The class defaults are the paper's (§4.1: alpha = 1 "if not explicitly
specified", K = 3, D = 3, M = 5, N = 5, LLM query entities); field names are
its symbols. The paper's cross-encoder R(q, .) is replaced by the embedding
scorer (:mod:`.scoring`): no re-ranker ships offline.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..core.config import MethodConfig, Preset, Section
from ..core.llm.settings import LLMSettings
from ..core.text import DEFAULT_ENTITY_LABELS

VectorMode = Literal["separate", "late"]


class CUEGraph(Section):
    """Building the chunk-unit-entity graph (§3.2, Algorithms 1 and 2)."""

    alpha: float = Field(
        1.0,
        ge=0,
        le=1,
        description="§3.2, Alg. 2: share of the corpus's tokens whose chunks the LLM rewrites "
        "into knowledge units; 0 is LLM-free (sentence units), 1 sends every chunk (§4.1).",
    )
    selection: Literal["bleu", "cos", "random"] = Field(
        "bleu", description="Alg. 2, §4.3: chunk value of the knapsack (BLEU in the paper)."
    )
    bleu_max_n: int = Field(4, gt=0, description="Alg. 2: longest n-gram order of BLEU.")
    knapsack_max_cells: int = Field(
        50_000_000,
        gt=0,
        description="Largest knapsack table before weights are rounded up (ours; the paper "
        "cites an approximate solver).",
    )
    seed: int = Field(0, description="§4.3: seed of the random selection.")
    sentence_splitter: Literal["rule", "model"] = Field(
        "rule",
        description="Alg. 1 line 10: sentence units by punctuation rules (§4.1: NLTK's "
        "sent_tokenize is one) or by spaCy's parser.",
    )
    min_unit_chars: int = Field(3, gt=0, description="Shorter units are dropped (ours).")
    repair_attempts: int = Field(
        1, ge=0, description="LLM units: re-asks after an unusable reply (ours)."
    )
    spacy_model: str | None = Field(
        None, description="§3.2: spaCy pipeline for NER (None: the package's default chain)."
    )
    entity_labels: tuple[str, ...] | None = Field(
        tuple(sorted(DEFAULT_ENTITY_LABELS)),
        description="spaCy labels kept as entities (the paper is silent; ours: all but purely "
        "numeric ones). None keeps all.",
    )
    title_entity: bool = Field(
        False,
        description="Link a chunk's title to each of its units as an entity: an LLM-free "
        "stand-in for the pronoun resolution of LLM units (ours).",
    )
    title_key: str = Field("title", description="Metadata key of a chunk's title.")
    nlp_processes: int | None = Field(
        1,
        ge=1,
        description="Processes for spaCy: 1 in this process, 2+ worker processes, None the "
        "machine's CPUs, at most 4. The same units either way (ours).",
    )


class CUEVectors(Section):
    """Embedding chunks, units and entities (§3.2, §4.1)."""

    unit_vectors: VectorMode = Field(
        "separate",
        description="Units embedded on their own (the paper), or pooled from their chunk's "
        "forward pass ('late': one pass over the text; ours, cue/vectors.py).",
    )
    entity_vectors: VectorMode = Field(
        "separate", description="Entity names embedded on their own, or pooled from a mention."
    )
    late_fallback: Literal["separate", "raise"] = Field(
        "separate",
        description="Late vectors with an embedder without word pieces: embed separately "
        "(warned, counted) or raise.",
    )


class CUERetrieval(Section):
    """Q-Iter (§3.3, Algorithms 3 and 4)."""

    K: int = Field(
        3,
        gt=0,
        description="§3.3: entity matches per query entity, anchor units, and units "
        "expanded per state.",
    )
    D: int = Field(3, gt=0, description="§3.3: search depth.")
    M: int = Field(5, gt=0, description="§3.3: paths kept per depth (the beam).")
    N: int = Field(5, gt=0, description="§3.3: chunks returned (similarity_top_k).")
    use_sa: bool = Field(True, description="Alg. 4: Spreading Activation (Table 4 ablates it).")
    use_ka: bool = Field(True, description="Alg. 4: Knowledge Anchoring.")
    use_qu: bool = Field(True, description="Alg. 3 line 11: query updating, phi' = phi - phi(k).")
    query_entities: Literal["llm", "spacy", "auto"] = Field(
        "llm",
        description="§3.3: the question's entities by the LLM (the paper; an LLM that cannot "
        "write JSON gets spaCy's, with a warning), by spaCy NER plus the names of known "
        "entities the question contains, or 'auto': the LLM's when alpha > 0 and the LLM "
        "writes JSON, else spaCy's.",
    )
    lexical_weight: float = Field(
        0.0,
        ge=0,
        description="Embedding scorer: weight of the question's IDF-weighted words a path "
        "names, added to its cosine (ours; 0 is cosine alone, cue/lexical.py).",
    )
    bm25_weight: float = Field(
        0.0,
        ge=0,
        description="Weight of BM25's rankings (units in Knowledge Anchoring, chunks in the "
        "final ranking) fused with the cosine's and Q-Iter's by reciprocal rank (ours, "
        "core/lexical.py; 0 is the paper).",
    )
    path_weight: float = Field(
        0.0,
        ge=0,
        description="Times the best kept path citing a chunk, added to its final score "
        "(ours; 0 is the paper: chunks by R(q, t) alone).",
    )
    long_chunks: Literal["best-window", "pooled"] = Field(
        "pooled",
        description="Embedding scorer: a chunk longer than the embedder's window scored by its "
        "best window, or by its pooled vector (core/windows.py).",
    )
    fill: Literal["dense", "none"] = Field(
        "none",
        description="Top the result up to N with the chunks nearest the question when the "
        "paths cite fewer ('dense', ours; marked in the evidence), or return only path chunks.",
    )


class CUEConfig(MethodConfig):
    """CUE-RAG: chunks, knowledge units and entities, searched by Q-Iter."""

    graph: CUEGraph = CUEGraph()
    vectors: CUEVectors = CUEVectors()
    retrieval: CUERetrieval = CUERetrieval()
    llm: LLMSettings = LLMSettings()

    presets = {
        "paper": Preset(
            "§4.1: alpha = 1 (the LLM writes every chunk's units), the LLM's query entities, "
            "K = 3, D = 3, M = 5, N = 5; the embedding scorer stands in for the cross-encoder. "
            "The paper's own setting: only its cost is measured here, on the loopback wire "
            "(docs/methods/cue.md, What it costs)."
        ),
        "default": Preset(
            "LLM-free (alpha = 0; before: cue-0.0): sentence units, spaCy query entities, "
            "title entities, word coverage in path scores and the best path in chunk scores, "
            "one-pass unit and entity vectors, the dense fill, BM25 fused at weight 0.25. Chosen "
            "on 2wiki-101 with MiniLM, reported on musique-100 (docs/methods/cue.md, Presets).",
            {
                "alpha": 0.0,
                "title_entity": True,
                "nlp_processes": None,
                "unit_vectors": "late",
                "entity_vectors": "late",
                "M": 10,
                "query_entities": "spacy",
                "lexical_weight": 0.8,
                "path_weight": 0.25,
                "long_chunks": "best-window",
                "fill": "dense",
                "bm25_weight": 0.25,
            },
        ),
        "path-weighted": Preset(
            "`default` with M = 8 and path_weight = 0.5 (before: cue-0.0-tuned-musique): chosen "
            "on musique-100, reported on 2wiki-101 (docs/methods/cue.md, Presets).",
            {"M": 8, "path_weight": 0.5},
            base="default",
        ),
    }

    @property
    def uses_llm(self) -> bool:
        return self.graph.alpha > 0 or self.retrieval.query_entities == "llm"
