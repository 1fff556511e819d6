"""Fusion of the suite's retrievers inside LlamaIndex's QueryFusionRetriever."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core import Document
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from support import ScriptedLLM

from llama_index_graphrag_ext.baselines import BM25Retriever, DenseRetriever, build_dense_index
from llama_index_graphrag_ext.compose import (
    PassageNode,
    PassageRetriever,
    fuse_retrievers,
    normalise_scores,
)
from llama_index_graphrag_ext.core.nodes import EVIDENCE_KEY, source_id, with_evidence


def chunk(passage: str, text: str | None = None, part: int = 0) -> TextNode:
    node = TextNode(id_=f"{passage}#{part}", text=text or f"text of {passage}")
    node.relationships = {}
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo

    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=passage)
    return node


class ListRetriever(BaseRetriever):
    """Returns fixed (passage, score) results, with evidence like the suite's retrievers."""

    def __init__(self, name: str, results: list[tuple[str, float | None]], **kw):
        self.name = name
        self.results = results
        self.queries: list[str] = []
        super().__init__(**kw)

    def _make(self, query: str) -> list[NodeWithScore]:
        self.queries.append(query)
        out = []
        for i, (pid, score) in enumerate(self.results):
            passage, _, part = pid.partition("/")
            node = chunk(passage, part=int(part or 0))
            out.append(with_evidence(node, score, {"by": self.name, "position": i}))
        return out

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._make(query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        await asyncio.sleep(0)
        return self._make(query_bundle.query_str)


def ids(results: list[NodeWithScore]) -> list[str]:
    return [source_id(r) for r in results]


def test_plain_fusion_never_sums_a_passage_found_twice_and_adapted_fusion_does():
    a = ListRetriever("a", [("p1", 0.9), ("p2", 0.5)])
    b = ListRetriever("b", [("p1", 30.0), ("p3", 10.0)])
    plain = QueryFusionRetriever(
        [a, b],
        llm=ScriptedLLM(default=""),
        mode="reciprocal_rerank",
        num_queries=1,
        similarity_top_k=2,
        use_async=False,
    )
    # the problem this module fixes: evidence is part of the hash, so both copies of
    # p1 fill the top 2 with single-list scores; retrieve() then drops the repeat
    results = plain.retrieve("q")
    assert ids(results) == ["p1"]
    assert results[0].score == pytest.approx(1 / 60)
    fused = fuse_retrievers({"a": a, "b": b}, mode="rrf", similarity_top_k=2)
    results = fused.retrieve("q")
    assert ids(results) == ["p1", "p2"]
    assert results[0].score == pytest.approx(2 / 60)  # both ranked p1 first (k = 60)
    assert all(isinstance(r.node, PassageNode) for r in results)


def test_retriever_order_survives_scores_that_disagree_with_it():
    # like CUE-RAG's Q-Iter: the list is ranked, but the reported scores are not sorted
    r = ListRetriever("q-iter", [("p1", 0.75), ("p2", 0.28), ("p3", 0.43)])
    plain = QueryFusionRetriever(
        [r],
        llm=ScriptedLLM(default=""),
        mode="reciprocal_rerank",
        num_queries=1,
        similarity_top_k=10,
        use_async=False,
    )
    assert ids(plain.retrieve("q")) == ["p1", "p3", "p2"]  # LlamaIndex re-sorts by score
    assert ids(fuse_retrievers([r], mode="rrf").retrieve("q")) == ["p1", "p2", "p3"]
    assert ids(fuse_retrievers([r], mode="rel").retrieve("q")) == ["p1", "p2", "p3"]


def test_relative_score_fusion_puts_different_scales_on_one_footing():
    bm25_like = ListRetriever("bm25", [("p1", 30.0), ("p2", 29.0), ("p3", 1.0)])
    cosine_like = ListRetriever("dense", [("p3", 0.9), ("p2", 0.89), ("p1", 0.1)])
    fused = fuse_retrievers({"bm25": bm25_like, "dense": cosine_like}, mode="rel")
    results = fused.retrieve("q")
    # p2 is near the top of both lists; p1 and p3 each top one list and bottom the other
    assert ids(results)[0] == "p2"
    assert results[0].score == pytest.approx(0.5 * (28 / 29) + 0.5 * (0.79 / 0.8), abs=1e-3)
    weighted = fuse_retrievers(
        {"bm25": bm25_like, "dense": cosine_like}, mode="rel", weights=[3, 1]
    ).retrieve("q")
    assert ids(weighted) == ["p2", "p1", "p3"]  # p1 (BM25's top) now beats p3


def test_normalise_scores():
    assert normalise_scores([10.0, 5.0, 0.0]) == [1.0, 0.5, 0.0]
    assert normalise_scores([0.2, 0.9, 0.1]) == [pytest.approx(0.125), pytest.approx(0.125), 0.0]
    assert normalise_scores([3.0, 3.0]) == [1.0, 1.0]
    assert normalise_scores([0.5, None, 0.1]) == [1.0, 0.5, pytest.approx(1 / 3)]
    assert normalise_scores([7.0, 9.0], "raw") == [7.0, 9.0]
    assert normalise_scores([7.0, 9.0, 1.0], "rank") == [1.0, 0.5, pytest.approx(1 / 3)]
    assert normalise_scores([]) == []
    with pytest.raises(ValueError, match="score mode"):
        normalise_scores([1.0], "zscore")  # type: ignore[arg-type]


def test_passage_retriever_collapses_chunks_of_one_passage_and_keeps_evidence():
    inner = ListRetriever("sentences", [("p1/0", 0.9), ("p2/0", 0.8), ("p1/1", 0.7)])
    adapted = PassageRetriever(inner, "sentences")
    results = adapted.retrieve("q")
    assert ids(results) == ["p1", "p2"]
    evidence = results[0].node.metadata[EVIDENCE_KEY]
    assert evidence["retriever"] == "sentences"
    assert evidence["rank"] == 1 and evidence["raw_score"] == 0.9
    assert evidence["results_merged"] == 2
    assert evidence["evidence"] == {"by": "sentences", "position": 0}
    # evidence stays out of what the LLM and the embedder read
    assert EVIDENCE_KEY not in results[0].node.get_content(metadata_mode=MetadataMode.LLM)
    by_node = PassageRetriever(inner, key="node").retrieve("q")
    assert len(by_node) == 3


def test_passage_node_hash_ignores_metadata_and_serialises_as_text_node():
    a = PassageNode.from_node(chunk("p1"), "p1")
    b = PassageNode.from_node(chunk("p1", text="another chunk"), "p1")
    b.metadata = {"x": 1}
    assert a.hash == b.hash
    assert a.hash != PassageNode.from_node(chunk("p2"), "p2").hash
    restored = TextNode.from_dict(a.to_dict())
    assert restored.text == a.text and restored.ref_doc_id == "p1"


def test_async_paths_give_the_same_results():
    a = ListRetriever("a", [("p1", 0.9), ("p2", 0.5)])
    b = ListRetriever("b", [("p3", 3.0), ("p1", 2.0)])
    sync = ids(fuse_retrievers([a, b], mode="rrf").retrieve("q"))
    tasks = ids(fuse_retrievers([a, b], mode="rrf", use_async=True).retrieve("q"))
    awaited = ids(asyncio.run(fuse_retrievers([a, b], mode="rrf").aretrieve("q")))
    assert sync == tasks == awaited == ["p1", "p3", "p2"]


def test_no_openai_key_needed_and_query_generation_uses_the_given_llm(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    a = ListRetriever("a", [("p1", 0.9)])
    fuse_retrievers([a]).retrieve("q")  # plain QueryFusionRetriever(llm=None) raises here
    with pytest.raises(ValueError, match="llm="):
        fuse_retrievers([a], num_queries=2)
    llm = ScriptedLLM(["who founded the firm"])
    fuse_retrievers([a], num_queries=2, llm=llm).retrieve("q")
    assert llm.call_count == 1
    assert a.queries[-2:] == ["q", "who founded the firm"]


def test_bad_arguments_are_clear_errors():
    a = ListRetriever("a", [("p1", 0.9)])
    with pytest.raises(ValueError, match="at least one"):
        fuse_retrievers([])
    with pytest.raises(ValueError, match="unknown fusion mode"):
        fuse_retrievers([a], mode="borda")
    with pytest.raises(ValueError, match="weights"):
        fuse_retrievers([a], weights=[1, 2])
    with pytest.raises(ValueError, match="scores"):
        PassageRetriever(a, scores="z")  # type: ignore[arg-type]


def test_suite_retrievers_fuse_end_to_end(bow_embed):
    docs = [
        Document(id_="curie", text="Marie Curie studied radioactivity in Paris."),
        Document(id_="sorbonne", text="Pierre Curie taught physics at the Sorbonne in Paris."),
        Document(id_="bees", text="Beekeepers in Ohio sell raw honey at markets."),
        Document(id_="almonds", text="California almond growers rent hives each spring."),
    ]
    dense = DenseRetriever(build_dense_index(docs, bow_embed), similarity_top_k=3)
    bm25 = BM25Retriever.from_documents(docs, similarity_top_k=3)
    fused = fuse_retrievers({"dense": dense, "bm25": bm25}, mode="rrf", similarity_top_k=3)
    results = fused.retrieve("Where did Marie Curie study radioactivity?")
    assert ids(results)[0] == "curie"
    assert len(set(ids(results))) == len(results)
    assert {r.node.metadata[EVIDENCE_KEY]["retriever"] for r in results} <= {"dense", "bm25"}
