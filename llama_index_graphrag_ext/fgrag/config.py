"""FG-RAG's settings (Hong et al.) and presets.

The class defaults are the paper's (§3, §6.1), and the authors' code where
the paper is silent (their ``initial_selected_entity_number`` = 20,
``max_description_number`` = 75, ``max_extract_entity_number`` = 9, up to 10
questions, 50 descriptions per entity). The paper never ranks chunks: the
``ranking`` section is this suite's LLM-free retriever.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..core.config import MethodConfig, Preset, Section
from ..core.llm.settings import LLMSettings


class FGRAGGraph(Section):
    """Building the entity graph (§3.1, Eqs. 1-3)."""

    extractor: Literal["llm", "cooccurrence"] = Field(
        "llm",
        description="§3.1: entities and relations with descriptions extracted by the LLM (an LLM "
        "that cannot write the records gets the co-occurrence graph, with a warning), or spaCy "
        "entities related by sentence co-occurrence (ours; no LLM).",
    )
    max_gleanings: int = Field(1, ge=0, description="§6.1: gleaning rounds of the LLM.")
    max_descriptions_per_entity: int = Field(
        50,
        gt=0,
        description="Eq. 2: descriptions a merged entity keeps (the paper is silent; authors: 50).",
    )
    sentence_splitter: Literal["rule", "model"] = Field(
        "model",
        description="Co-occurrence graph: sentences by spaCy's parser, or by punctuation rules "
        "(NER only: a cheaper pass, the parse CUE-RAG shares; ours).",
    )
    include_noun_chunks: bool = Field(
        False,
        description="Co-occurrence graph: noun chunks become entities too ('beekeepers', "
        "'hive products'), closer to the LLM's for summaries (ours).",
    )


class FGRAGExpansion(Section):
    """Query entities and context-aware entity expansion (§3.2, §3.3, Eqs. 6-9)."""

    max_query_entities: int = Field(
        9, gt=0, description="Eq. 8: query entities kept (the paper is silent; authors: 9)."
    )
    include_query: bool = Field(
        True, description="Add the whole query as one more query entity (the authors' code)."
    )
    top_n: int = Field(20, gt=0, description="Eq. 6: top-n entities of E_w (authors: 20).")
    strong_top_n: int = Field(
        20, gt=0, description="Eq. 7: entities of E_s (the paper is silent; authors: 20)."
    )
    use_strong: bool = Field(
        True, description="Eq. 7: expand from E_s too; False keeps the weak context only."
    )
    description_budget: int = Field(
        75,
        gt=0,
        description="§3.2: new descriptions per BFS pass (the paper is silent; authors: 75).",
    )
    per_entity: int | None = Field(
        None,
        gt=0,
        description="Cap on one entity's descriptions and relations per visit, so the BFS "
        "reaches further hops (ours; None: the authors' behaviour).",
    )
    max_depth: int | None = Field(
        None,
        ge=0,
        description="BFS hops beyond the seeds (the paper is silent; None: until the budget "
        "is spent, as the authors do).",
    )
    names_first: bool = Field(
        False,
        description="Eq. 6: a query entity that is an entity's name (after normalize_entity) "
        "takes that entity first in E_w, its nearest vectors after (ours; the paper matches "
        "by vector alone).",
    )
    store_vector_search: bool = Field(
        False,
        description="Match entities (Eqs. 6-7) with the property graph store's own vector "
        "query, re-scored exactly (ours; some stores claim it and cannot).",
    )


class FGRAGRanking(Section):
    """The LLM-free retriever's chunk ranking (ours: the paper summarises descriptions, §3.3)."""

    chunk_ranking: Literal["combined", "evidence"] = Field(
        "combined",
        description="A reached chunk's score: its similarity to the question plus "
        "evidence_weight times its description evidence, or the evidence alone (ablation).",
    )
    evidence_weight: float = Field(
        0.3, ge=0, description="Weight of the normalised description evidence (ours)."
    )
    bm25_weight: float = Field(
        0.0,
        ge=0,
        description="Weight of BM25's passage ranking fused with this ranking by reciprocal "
        "rank (ours, core/lexical.py; 0: the reached chunks alone).",
    )
    fill: Literal["similarity", "none", "raise"] = Field(
        "none",
        description="Fewer chunks reached than similarity_top_k: top up with the chunks nearest "
        "the question ('similarity', counted), return fewer ('none': what the expansion "
        "reached), or raise.",
    )
    long_chunks: Literal["best-window", "pooled"] = Field(
        "best-window",
        description="A chunk longer than the embedder's window: its similarity from its best "
        "window, or from its pooled vector (core/windows.py).",
    )


class FGRAGAnswer(Section):
    """Query-level fine-grained summarization, the map-reduce answer (§3.3, Eqs. 10-12)."""

    max_questions: int = Field(
        10,
        gt=0,
        description="Eq. 10, Fig. 3: follow-up questions per query entity, at most "
        "({max_question_number}; authors: 10).",
    )
    max_context_tokens: int | None = Field(
        None,
        gt=0,
        description="Token budget of one summary's descriptions and of the reduce step's "
        "summaries (ours; None: the LLM's context window minus a reserve).",
    )
    general_knowledge: bool = Field(
        True,
        description="Fig. 4: the summary may add relevant general knowledge; False keeps it "
        "to the gathered descriptions.",
    )


#: The sections a retriever or query engine may change; the graph is the index's.


class FGRAGConfig(MethodConfig):
    """FG-RAG: an entity graph, context-aware entity expansion, per-entity summaries."""

    graph: FGRAGGraph = FGRAGGraph()
    expansion: FGRAGExpansion = FGRAGExpansion()
    ranking: FGRAGRanking = FGRAGRanking()
    answer: FGRAGAnswer = FGRAGAnswer()
    llm: LLMSettings = LLMSettings()

    presets = {
        "paper": Preset(
            "§3 and §6.1, the authors' code where the paper is silent: the LLM extracts the "
            "graph (one gleaning round) and answers by map-reduce over the query entities "
            "(before: fgrag-llm). Its chunks (the engine's sources) are those the expansion "
            "reached, unfilled. Cost measured in docs/methods/fgrag.md; its answers are not "
            "judged yet."
        ),
        "default": Preset(
            "LLM-free (before: fgrag): spaCy co-occurrence graph, spaCy query entities, every "
            "reached chunk ranked by similarity plus 0.3 x evidence, short lists filled by "
            "similarity, a long chunk by its best window; a query entity that names an entity "
            "anchors on it first; BM25 fused at weight 0.5 (chosen on 2wiki-101, reported on "
            "musique-100). The evidence weight was chosen on each of musique-100 and 2wiki-101 "
            "and reported on the other (docs/methods/fgrag.md).",
            {
                "extractor": "cooccurrence",
                "fill": "similarity",
                "names_first": True,
                "bm25_weight": 0.5,
            },
        ),
        "light-bm25": Preset(
            "`default` with BM25 fused at weight 0.25: chosen on musique-100, reported on "
            "2wiki-101 (docs/methods/fgrag.md).",
            {"bm25_weight": 0.25},
            base="default",
        ),
    }

    query_sections = ("expansion", "ranking", "answer", "llm")

    @property
    def uses_llm(self) -> bool:
        return self.graph.extractor == "llm"
