"""QCG-RAG's settings (Wu et al. 2025) and presets.

The class defaults are the paper's MultiHop-RAG setting (§4.1, App. B); field
names are the paper's symbols (main text: ``k`` is the kNN degree and ``n`` the
cap on retrieved query nodes; App. B.3 swaps them).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..core.config import MethodConfig, Preset, Section
from ..core.llm.settings import LLMSettings

LongChunks = Literal["best-window", "pooled"]


class QCGGraph(Section):
    """Building the query-centric graph (§3.3)."""

    query_nodes: Literal["doc2query", "sentences"] = Field(
        "doc2query",
        description="Query nodes: the LLM's question-answer pairs (Extended Doc2Query, §3.3) "
        "or each sentence of the chunk (the Sentence Nodes ablation of Fig. 4; no LLM).",
    )
    M: int = Field(20, gt=0, description="§3.3: question-answer pairs asked per chunk.")
    alpha: float = Field(
        0.8, gt=0, le=1, description="§3.3 Doc2Query--: share of a chunk's pairs kept by cosine."
    )
    output_format: Literal["auto", "json", "lines"] = Field(
        "auto",
        description="Pairs as JSON (the paper), as 'Q: .. A: ..' lines, or 'auto': lines for "
        "the embedded SmolLM2, JSON otherwise.",
    )
    k: int = Field(3, gt=0, description="§3.3: kNN degree of E_intra (LiHuaWorld: 2).")
    exclude_same_chunk: bool = Field(
        False, description="Keep a chunk's own query nodes out of each other's kNN lists (ours)."
    )
    chunk_vectors: Literal["embed", "pooled"] = Field(
        "embed",
        description="Chunk vectors for chunk_weight and fill: the chunk's own embedding, or the "
        "mean of its query nodes' (no embedding call; ours).",
    )
    title_prefix: bool = Field(
        True, description="Sentence nodes: prefix each sentence with its chunk's title (ours)."
    )
    splitter: Literal["rule", "spacy"] = Field(
        "rule", description="Sentence nodes: punctuation rules, or spaCy's parser."
    )
    min_chars: int = Field(
        12, ge=0, description="Sentence nodes: a shorter sentence joins the next one."
    )
    sentence_alpha: float = Field(
        1.0, gt=0, le=1, description="Sentence nodes: share kept by the Doc2Query-- filter."
    )
    sentence_vectors: Literal["separate", "late"] = Field(
        "separate",
        description="Sentence nodes embedded on their own, or pooled from their chunk's "
        "forward pass (one pass over the text).",
    )


class QCGRetrieval(Section):
    """Retrieval over the graph (§3.4)."""

    K: int = Field(5, gt=0, description="§3.4: chunks returned (similarity_top_k).")
    n: int = Field(15, gt=0, description="§3.4: most query nodes retrieved (LiHuaWorld: 10).")
    gamma: float = Field(
        1.0, ge=0, le=2, description="§3.4: threshold on cos + epsilon (LiHuaWorld: 1.5)."
    )
    epsilon: float = Field(1.0, description="§3.4: added to the cosine before the threshold.")
    h: int = Field(1, ge=0, description="§3.4: hops of kNN expansion.")
    aggregator: Literal["mean", "max", "sum"] = Field(
        "mean", description="A chunk's score from its query nodes' cosines (§3.4: the mean)."
    )
    chunk_weight: float = Field(
        0.0,
        ge=0,
        description="Votes of the chunk's own cosine in its score (ours; 0 is the paper).",
    )
    fill: bool = Field(
        False,
        description="Top up to K chunks by chunk cosine when the graph collects fewer (ours).",
    )
    bm25_weight: float = Field(
        0.0,
        ge=0,
        description="Weight of BM25's rankings (query nodes in step 1, chunks in step 3) "
        "fused with the cosine's and the graph's by reciprocal rank (ours, core/lexical.py; "
        "0 is the paper).",
    )
    long_chunks: LongChunks = Field(
        "pooled",
        description="A chunk longer than the embedder's window: its own cosine (chunk_weight, "
        "fill) from its best window, or from its pooled vector (core/windows.py).",
    )


class QCGConfig(MethodConfig):
    """QCG-RAG: query-answer pairs as graph nodes between the question and the chunks."""

    graph: QCGGraph = QCGGraph()
    retrieval: QCGRetrieval = QCGRetrieval()
    llm: LLMSettings = LLMSettings()

    presets = {
        "paper": Preset("§4.1 and App. B: the MultiHop-RAG setting (the paper's own defaults)."),
        "paper-lihuaworld": Preset(
            "§4.1 and App. B: the LiHuaWorld setting.", {"k": 2, "n": 10, "gamma": 1.5}
        ),
        "default": Preset(
            "LLM-free sentence nodes, chosen on 2wiki-101 by one sweep with MiniLM and "
            "reported on musique-100 (docs/methods/qcg.md). The chunk's own cosine votes "
            "(chunk_weight 1) and fills short lists; with it the kNN hop lowered R@5, so h = 0. "
            "BM25 fused at weight 0.5 (core/lexical.py).",
            {
                "query_nodes": "sentences",
                "exclude_same_chunk": True,
                "n": 20,
                "h": 0,
                "chunk_weight": 1.0,
                "fill": True,
                "long_chunks": "best-window",
                "bm25_weight": 0.5,
            },
        ),
        "more-nodes": Preset(
            "`default` with n = 30 query nodes and BM25 off (bm25_weight 0 ranked best there): "
            "chosen on musique-100, reported on 2wiki-101.",
            {"n": 30, "bm25_weight": 0.0},
            base="default",
        ),
    }

    @property
    def uses_llm(self) -> bool:
        return self.graph.query_nodes == "doc2query"
