"""QueryCentricGraphIndex end to end with the bag-of-words embedder and scripted LLMs."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import Document
from support import ScriptedLLM

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.core.persist import IndexFormatError
from llama_index_graphrag_ext.qcg import (
    QUERY_NODES_KEY,
    Doc2QueryGenerator,
    QCGConfig,
    QCGRetriever,
    QueryCentricGraphIndex,
    QueryLayer,
    SentenceQueryGenerator,
)

DOCS = [
    Document(
        id_="hall",
        text="G. Stanley Hall was the first president of the American Psychological Association. "
        "He founded the American Journal of Psychology.",
        metadata={"title": "G. Stanley Hall"},
    ),
    Document(
        id_="jpi",
        text="The Journal of Psychotherapy Integration is published by the American Psychological "
        "Association. It covers psychotherapy research.",
        metadata={"title": "Journal of Psychotherapy Integration"},
    ),
    Document(
        id_="paris",
        text="Paris is the capital of France. The Eiffel Tower stands in Paris.",
        metadata={"title": "Paris"},
    ),
    Document(
        id_="rome",
        text="Rome is the capital of Italy. The Colosseum stands in Rome.",
        metadata={"title": "Rome"},
    ),
]


def _build(bow_embed, docs=DOCS, **kw):
    kw.setdefault("config", "default")
    return QueryCentricGraphIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()], **kw
    )


def _top(index, query, **kw):
    return [r.node.ref_doc_id for r in index.as_retriever(**kw).retrieve(query)]


def _knn_lists(layer: QueryLayer):
    return {layer.pairs[r].node_id: layer.neighbor_ids(r) for r in range(len(layer))}


def test_sentence_index_retrieves_with_evidence(bow_embed):
    index = _build(bow_embed)
    assert len(index) == 4 and len(index.layer) == 8
    results = index.as_retriever(similarity_top_k=2).retrieve("capital of France Eiffel Tower")
    assert results[0].node.ref_doc_id == "paris"
    evidence = results[0].node.metadata["evidence"]
    assert evidence["method"] == "qcg" and evidence["rank"] == 1
    assert evidence["query_nodes"][0]["query"].startswith("Paris: ")
    assert {"cosine", "hop", "via", "id"} <= set(evidence["query_nodes"][0])
    assert "chunk_cosine" in evidence  # the default preset uses chunk_weight=1
    # The evidence never reaches the LLM or the embedder.
    assert "evidence" not in results[0].node.get_content(metadata_mode="llm")


def test_graph_view_has_both_layers(bow_embed):
    index = _build(bow_embed)
    stats = index.graph.stats()
    assert index.graph.num_nodes("chunk") == 4 and index.graph.num_nodes("query") == 8
    assert index.graph.num_edges("member") == 8 and index.graph.num_edges("knn") > 0
    assert stats is not None


def test_doc2query_index_with_scripted_llm(bow_embed):
    answers = {
        "G. Stanley Hall was": "Q: Who was the first president of the APA? A: G. Stanley Hall",
        "Journal of Psychotherapy": (
            '[{"query": "Who publishes the Journal of Psychotherapy Integration?", '
            '"answer": "the American Psychological Association"}]'
        ),
        "Paris is": "Q: What is the capital of France? A: Paris",
        "Rome is": "Q: What is the capital of Italy? A: Rome",
    }
    llm = ScriptedLLM(answers)
    index = _build(bow_embed, config="paper", llm=llm, alpha=1.0)
    assert isinstance(index.generator, Doc2QueryGenerator) and llm.call_count == 4
    assert len(index.layer) == 4 and all(p.kind == "qa" for p in index.layer.pairs)
    hits = index.as_retriever(similarity_top_k=2).retrieve(
        "Who publishes the journal of psychotherapy?"
    )
    assert hits[0].node.ref_doc_id == "jpi"
    node = hits[0].node.metadata["evidence"]["query_nodes"][0]
    assert node["answer"] == "the American Psychological Association"
    assert index.build_stats["pairs_generated"] == 4


def test_no_config_is_the_default_preset_and_never_asks_an_llm(bow_embed):
    llm = ScriptedLLM([])  # must not be called: the default preset is LLM-free
    index = QueryCentricGraphIndex.from_documents(
        DOCS[:2], embed_model=bow_embed, transformations=[PassageParser()], llm=llm
    )
    assert isinstance(index.generator, SentenceQueryGenerator)
    assert index.config == QCGConfig.preset("default") and index.config.origin == "default"
    assert llm.call_count == 0


def test_ingestion_pipeline_nodes_are_reused(bow_embed):
    llm = ScriptedLLM(default="Q: What is the capital of France? A: Paris")
    pipeline = IngestionPipeline(
        transformations=[PassageParser(), Doc2QueryGenerator(llm=llm, embed_model=bow_embed)]
    )
    nodes = pipeline.run(documents=DOCS[2:3])
    assert nodes[0].metadata[QUERY_NODES_KEY]
    other = ScriptedLLM([])  # must not be called: the nodes carry their queries
    index = QueryCentricGraphIndex(nodes, embed_model=bow_embed, llm=other, config="paper")
    assert other.call_count == 0 and len(index.layer) == 1
    assert index.build_stats["chunks_with_given_nodes"] == 1


def test_incremental_insert_and_delete_equal_a_rebuild(bow_embed):
    extra = Document(
        id_="oslo",
        text="Oslo is the capital of Norway. The Opera House stands in Oslo.",
        metadata={"title": "Oslo"},
    )
    index = _build(bow_embed, docs=DOCS[:2])
    for doc in [*DOCS[2:], extra]:
        index.insert(doc)
    rebuilt = _build(bow_embed, docs=[*DOCS, extra])
    assert _knn_lists(index.layer) == _knn_lists(rebuilt.layer)
    index.delete_ref_doc("paris")
    rebuilt = _build(bow_embed, docs=[d for d in [*DOCS, extra] if d.doc_id != "paris"])
    assert _knn_lists(index.layer) == _knn_lists(rebuilt.layer)
    assert "paris" not in _top(index, "capital of France", similarity_top_k=5)
    assert np.allclose(index.layer.chunk_matrix, rebuilt.layer.chunk_matrix)


def test_persist_and_load_give_identical_retrieval(bow_embed, tmp_path):
    index = _build(bow_embed, k=2, n=6)
    index.persist(tmp_path / "qcg")
    loaded = QueryCentricGraphIndex.load(tmp_path / "qcg", embed_model=bow_embed)
    assert loaded.config == index.config and loaded.config.graph.k == 2
    assert loaded.config.origin == index.config.origin == "default + k=2, n=6"
    for query in ("capital city", "American Psychological Association president", "Colosseum"):
        a = index.as_retriever().retrieve(query)
        b = loaded.as_retriever().retrieve(query)
        assert [r.node.node_id for r in a] == [r.node.node_id for r in b]
        assert [r.score for r in a] == pytest.approx([r.score for r in b])
        assert a[0].node.metadata["evidence"] == b[0].node.metadata["evidence"]
    loaded.insert(Document(id_="bern", text="Bern is the capital of Switzerland."))
    assert len(loaded) == 5

    class Other(QueryCentricGraphIndex):
        format_version = 99

    with pytest.raises(IndexFormatError):
        Other.load(tmp_path / "qcg", embed_model=bow_embed)


def test_retriever_in_query_engine_and_async(bow_embed):
    index = _build(bow_embed)
    llm = ScriptedLLM(["Paris."])
    engine = RetrieverQueryEngine.from_args(index.as_retriever(similarity_top_k=1), llm=llm)
    response = engine.query("What is the capital of France?")
    assert str(response) == "Paris." and response.source_nodes[0].node.ref_doc_id == "paris"
    assert "Paris is the capital of France." in llm.calls[0]
    qe = index.as_query_engine(llm=ScriptedLLM(["Rome."]), similarity_top_k=1)
    assert "do not know" in qe.get_prompts()["response_synthesizer:text_qa_template"].get_template()
    import asyncio

    results = asyncio.run(index.as_retriever(similarity_top_k=1).aretrieve("capital of Italy"))
    assert results[0].node.ref_doc_id == "rome"


def test_retrieval_is_thread_safe_during_inserts(bow_embed):
    index = _build(bow_embed)
    retriever = index.as_retriever(similarity_top_k=3)
    errors = []

    def reader():
        try:
            for _ in range(30):
                assert retriever.retrieve("capital of France")[0].node.ref_doc_id == "paris"
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(5):
        index.insert(Document(id_=f"x{i}", text=f"Town {i} has a river and a bridge {i}."))
    for t in threads:
        t.join()
    assert not errors and len(index) == 9


def test_retriever_overrides_and_settings(bow_embed):
    index = _build(bow_embed, gamma=1.2, h=2)
    retriever = index.as_retriever(similarity_top_k=1, aggregator="max")
    assert isinstance(retriever, QCGRetriever)
    assert retriever.params.gamma == 1.2 and retriever.params.h == 2
    assert retriever.params.aggregator == "max" and retriever.similarity_top_k == 1
    assert len(retriever.retrieve("capital")) == 1
    assert index.as_retriever(gamma=2.0, fill=False).retrieve("zebra quantum") == []
    with pytest.raises(ValueError, match="preset"):
        _build(bow_embed, config="nope")
    with pytest.raises(TypeError, match="unknown settings"):
        _build(bow_embed, kk=3)
    with pytest.raises(ValueError, match="no setting 'kk'"):
        index.as_retriever(kk=3)


def test_empty_index_returns_nothing(bow_embed):
    index = QueryCentricGraphIndex(nodes=[], embed_model=bow_embed)
    assert index.as_retriever().retrieve("anything") == []
