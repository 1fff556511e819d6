"""Rerankers: any LlamaIndex reranker, asked for what the method needs; the BGE path offline.

The cross-encoder is built by the test from the bundled MiniLM weights and loaded
through FlagEmbedding's ``FlagReranker`` behind LlamaIndex's
``FlagEmbeddingReranker``, exactly as a downloaded BGE reranker is. Its head is
untrained: these tests check plumbing (every candidate scored, no ``top_n``
truncation, evidence), not ranking quality.
"""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import Document, QueryBundle

from llama_index_graphrag_ext.core.nodes import EVIDENCE_KEY, PassageParser
from llama_index_graphrag_ext.core.rerank import rerank, rerank_scores, with_top_n

DOCS = [
    Document(id_="bambi", text="Bambi is a 1923 novel by Felix Salten. It follows a roe deer."),
    Document(id_="salten", text="Felix Salten was an Austrian author. He was born in Pest."),
    Document(id_="vienna", text="Vienna is the capital of Austria. It lies on the Danube."),
    Document(id_="pest", text="Pest is the eastern part of Budapest in Hungary."),
    Document(id_="danube", text="The Danube flows through Vienna and Budapest."),
    Document(id_="deer", text="Roe deer live in the forests of Europe."),
]
QUESTION = "Where was the author of Bambi born?"


class WordOverlap(BaseNodePostprocessor):
    """A reranker that, like SentenceTransformerRerank, keeps only its ``top_n`` (2) nodes."""

    top_n: int = 2

    def _postprocess_nodes(self, nodes, query_bundle: QueryBundle | None = None):
        words = set(query_bundle.query_str.lower().split())
        for n in nodes:
            n.score = float(len(words & set(n.node.get_content().lower().split())))
        return sorted(nodes, key=lambda n: -n.score)[: self.top_n]


def test_the_reranker_is_asked_for_what_the_caller_needs():
    reranker = WordOverlap()
    texts = [d.text for d in DOCS]
    assert len(rerank(reranker, QUESTION, texts)) == len(texts)  # all, whatever its top_n
    assert len(rerank(reranker, QUESTION, texts, keep=4)) == 4
    scores = rerank_scores(reranker, QUESTION, texts)
    assert np.isfinite(scores).all() and scores.shape == (len(texts),)
    assert reranker.top_n == 2 and with_top_n(reranker, 5).top_n == 5  # the caller's is untouched


def test_small_top_n_shrinks_nothing_in_qcg_cue_and_chainrag(bow_embed):
    from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
    from llama_index_graphrag_ext.cue import MultiPartiteIndex
    from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex

    parser = [PassageParser()]
    qcg = QueryCentricGraphIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=parser, config="default"
    )
    hits = qcg.as_retriever(similarity_top_k=4, reranker=WordOverlap()).retrieve(QUESTION)
    assert len(hits) == 4
    evidence = hits[0].node.metadata[EVIDENCE_KEY]
    assert evidence["reranker"] == "WordOverlap" and "qcg_score" in evidence
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    cue = MultiPartiteIndex.from_documents(DOCS, embed_model=bow_embed, transformations=parser)
    cue_hits = cue.as_retriever(similarity_top_k=4, reranker=WordOverlap()).retrieve(QUESTION)
    assert len(cue_hits) == 4

    chain = SentenceGraphIndex.from_documents(DOCS, embed_model=bow_embed, transformations=parser)
    retriever = chain.as_retriever(similarity_top_k=4, k=3, reranker=WordOverlap())
    state = retriever.search.start(QUESTION)
    assert sum(g.role == "seed" for g in state.gathered.values()) == 3
    assert len(state.candidates) > 2  # the whole first-round pool stays ranked
    assert len(retriever.retrieve(QUESTION)) == 4


@pytest.fixture(scope="module")
def bge_path(tmp_path_factory):
    from support.cross_encoder import build_minilm_cross_encoder

    return build_minilm_cross_encoder(tmp_path_factory.mktemp("cross-encoder"))


@pytest.mark.embedded
def test_flag_embedding_reranker_drives_the_methods_offline(bge_path, bow_embed):
    from FlagEmbedding import FlagReranker
    from llama_index.postprocessor.flag_embedding_reranker import FlagEmbeddingReranker

    from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
    from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex

    reranker = FlagEmbeddingReranker(model=str(bge_path), top_n=2, use_fp16=False)
    parser = [PassageParser()]
    qcg = QueryCentricGraphIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=parser, config="default"
    )
    hits = qcg.as_retriever(similarity_top_k=3, reranker=reranker).retrieve(QUESTION)
    assert len(hits) == 3  # top_n=2 of the reranker truncated nothing
    direct = FlagReranker(str(bge_path), use_fp16=False, devices=["cpu"])
    expected = direct.compute_score([[QUESTION, h.node.get_content()] for h in hits])
    assert np.allclose([h.score for h in hits], expected, atol=1e-5)  # the cross-encoder's scores

    chain = SentenceGraphIndex.from_documents(DOCS, embed_model=bow_embed, transformations=parser)
    retriever = chain.as_retriever(similarity_top_k=3, k=3, reranker=reranker)
    state = retriever.search.start(QUESTION)
    assert sum(g.role == "seed" for g in state.gathered.values()) == 3
