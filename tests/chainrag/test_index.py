"""SentenceGraphIndex and its LLM-free retriever on a hand-written corpus."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
from llama_index_graphrag_ext.core.config import ConfigError
from llama_index_graphrag_ext.core.nodes import PassageParser

DOCS = [
    Document(
        id_="bambi",
        text="Bambi\nBambi, a Life in the Woods is a 1923 novel by Felix Salten. "
        "The novel follows a roe deer. The book was banned in Nazi Germany in 1936.",
        metadata={"title": "Bambi"},
    ),
    Document(
        id_="salten",
        text="Felix Salten was an Austrian author and critic. "
        "He was born in Pest and lived in Vienna for most of his life.",
        metadata={"title": "Felix Salten"},
    ),
    Document(id_="vienna", text="Vienna is the capital of Austria. It lies on the Danube."),
]


@pytest.fixture
def index(bow_embed):
    return SentenceGraphIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()]
    )


def _ids(index, query, **kw):
    return [r.node.ref_doc_id for r in index.as_retriever(**kw).retrieve(query)]


def test_sentences_entities_and_edges(index):
    sg = index.sentence_graph
    assert len(sg) == 7
    texts = [r.text for r in sg.records]
    assert "Bambi" not in texts  # the title line is context, not a sentence
    assert texts[0].startswith("Bambi, a Life")
    assert sg.records[1].position == 1 and sg.records[3].chunk_id != sg.records[2].chunk_id
    assert "felix salten" in sg.records[0].entities
    # EC: the two sentences naming Felix Salten share that key entity
    assert "felix salten" in sg.shared_entities(0, 3)
    assert sg.num_edges("SA") == 3 + 1 + 1
    assert sg.num_edges("SS") > 0 and sg.num_edges("EC") >= 1
    graph = index.graph
    assert graph.num_nodes("sentence") == 7 and graph.num_edges("SA") == 5


def test_retriever_returns_chunks_with_sentence_evidence(index):
    results = index.as_retriever(similarity_top_k=3).retrieve("Where was Felix Salten born?")
    assert results[0].node.ref_doc_id == "salten"
    evidence = results[0].node.metadata["evidence"]
    assert evidence["method"] == "chainrag"
    assert evidence["sentences"][0]["role"] == "seed"
    roles = {s["role"] for r in results for s in r.node.metadata["evidence"]["sentences"]}
    assert "neighbor" in roles
    neighbour = next(
        s
        for r in results
        for s in r.node.metadata["evidence"]["sentences"]
        if s["role"] == "neighbor"
    )
    assert neighbour["hop"] == 1 and neighbour["edges"][0]["kind"] in ("EC", "SS", "SA")
    assert "evidence" not in results[0].node.get_content(metadata_mode="llm")


def test_budget_and_edge_ablation(index):
    # the gathered sentences alone (rank="graph" without the pool) respect the budget
    small = index.as_retriever(similarity_top_k=3, k=1, word_budget=12, rank="graph", fill=False)
    results = small.retrieve("Where was Felix Salten born?")
    words = sum(
        len(s["text"].split()) for r in results for s in r.node.metadata["evidence"]["sentences"]
    )
    assert words <= 12 or len(results) == 1
    no_edges = {"follow_ec": False, "follow_ss": False, "follow_sa": False}
    none = index.as_retriever(k=1, rank="graph", fill=False, **no_edges).retrieve("Danube")
    assert [r.node.ref_doc_id for r in none] == ["vienna"]
    with pytest.raises(ConfigError, match="no setting 'follow_xx'"):
        index.as_retriever(follow_xx=True)
    # the graph is the index's: a retriever cannot change how it was built
    with pytest.raises(ConfigError, match="max_df: a setting of the index"):
        index.as_retriever(max_df=50)


def test_insert_delete_persist_reload(index, bow_embed, tmp_path):
    extra = Document(id_="pest", text="Pest is a part of Budapest in Hungary.")
    index.insert(extra)
    index.insert(extra)
    assert len(index.sentence_graph) == 8
    index.delete_ref_doc("vienna")
    assert {r.chunk_id.split("#")[0] for r in index.sentence_graph.records} == {
        "bambi",
        "salten",
        "pest",
    }
    index.persist(tmp_path / "idx")
    loaded = SentenceGraphIndex.load(tmp_path / "idx", embed_model=bow_embed)
    for q in ("Where was Felix Salten born?", "Budapest", "roe deer novel"):
        assert _ids(loaded, q) == _ids(index, q)
    assert loaded.config == index.config and loaded.config.origin == "default"
    assert loaded.sentence_graph.num_edges("EC") == index.sentence_graph.num_edges("EC")


def test_retrieval_is_thread_safe(index):
    expected = _ids(index, "Vienna Danube")
    out, errors = [], []

    def worker():
        try:
            for _ in range(5):
                out.append(_ids(index, "Vienna Danube"))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(o == expected for o in out)


def test_empty_index_and_bad_settings(bow_embed):
    empty = SentenceGraphIndex([], embed_model=bow_embed)
    assert empty.as_retriever().retrieve("anything") == []
    with pytest.raises(ConfigError, match="alpha"):
        SentenceGraphIndex([], embed_model=bow_embed, alpha=1.5)
    with pytest.raises(TypeError):
        SentenceGraphIndex([], embed_model=bow_embed, beta=1)


def _same_graph(a, b):
    assert list(a.records) == list(b.records)
    assert list(a.key_entities) == list(b.key_entities)
    assert np.array_equal(a.vectors, b.vectors)
    for name in ("key_matrix", "ss", "sa"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape and (x != y).nnz == 0, name


def test_parsing_in_batches_gives_the_one_batch_index(bow_embed, monkeypatch):
    from llama_index_graphrag_ext.chainrag import index as index_module

    build = lambda: SentenceGraphIndex.from_documents(  # noqa: E731
        DOCS, embed_model=bow_embed, transformations=[PassageParser()]
    )
    whole = build()
    monkeypatch.setattr(index_module, "_PARSE_BATCH", 1)
    _same_graph(build().sentence_graph, whole.sentence_graph)


def test_delete_and_reload_give_the_fresh_index(index, bow_embed, tmp_path):
    index.delete_ref_doc("bambi")
    fresh = SentenceGraphIndex.from_documents(
        DOCS[1:], embed_model=bow_embed, transformations=[PassageParser()]
    )
    _same_graph(index.sentence_graph, fresh.sentence_graph)
    # entity numbering is compacted too: no name of a deleted sentence is left
    names = set(index.sentence_graph.sentences.entity_names)
    assert names == {e for r in fresh.sentence_graph.records for e in r.entities}
    index.persist(tmp_path / "idx")
    rows = json.loads((tmp_path / "idx" / "sentences.json").read_text())
    first = fresh.sentence_graph.records[0]
    assert rows[0] == [first.text, first.chunk_id, first.position, list(first.entities)]
    loaded = SentenceGraphIndex.load(tmp_path / "idx", embed_model=bow_embed)
    _same_graph(loaded.sentence_graph, fresh.sentence_graph)


def test_worker_processes_build_the_same_graph(bow_embed, pools_started):
    from llama_index_graphrag_ext.core.text.parallel import TASK_TEXTS

    # Distinct texts (the parse cache would answer repeats), more than one worker task.
    docs = [
        Document(id_=f"{d.id_}-{i}", text=f"{d.text} Copy {i} was read.", metadata=d.metadata)
        for i in range(TASK_TEXTS // len(DOCS) + 2)
        for d in DOCS
    ]
    build = dict(embed_model=bow_embed, transformations=[PassageParser()])
    pooled = SentenceGraphIndex.from_documents(docs, nlp_processes=2, **build)
    alone = SentenceGraphIndex.from_documents(docs, nlp_processes=1, **build)
    assert len(pools_started) == 1  # one pool for the whole build
    one, two = pooled.sentence_graph, alone.sentence_graph
    assert [(r.text, r.chunk_id, r.entities) for r in one.records] == [
        (r.text, r.chunk_id, r.entities) for r in two.records
    ]
    assert {k: one.num_edges(k) for k in ("SS", "SA", "EC")} == {
        k: two.num_edges(k) for k in ("SS", "SA", "EC")
    }
    # A resource: the only setting that differs.
    assert pooled.config.updated(nlp_processes=1) == alone.config
    with pytest.raises(ConfigError, match="nlp_processes"):
        SentenceGraphIndex.from_documents(DOCS, nlp_processes=0, **build)
