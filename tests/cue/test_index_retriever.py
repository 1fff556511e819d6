"""MultiPartiteIndex and QIterRetriever end to end on a tiny corpus."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import Document, NodeWithScore
from support import ScriptedLLM

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.cue import MultiPartiteIndex, QIterRetriever
from llama_index_graphrag_ext.cue.layers import CHUNK, ENTITY, UNIT
from llama_index_graphrag_ext.cue.view import entity_id

DOCS = [
    Document(
        id_="green",
        text="Green\nGreen is an album by Steve Hillage. It was released in 1978.",
        metadata={"title": "Green"},
    ),
    Document(
        id_="hillage",
        text="Steve Hillage\nSteve Hillage is an English guitarist. He was born in Chingford.",
        metadata={"title": "Steve Hillage"},
    ),
    Document(
        id_="chingford",
        text="Chingford\nChingford is a town in London. It lies near Epping Forest.",
        metadata={"title": "Chingford"},
    ),
    Document(
        id_="paris",
        text="Paris\nParis is the capital of France. The Seine flows through Paris.",
        metadata={"title": "Paris"},
    ),
]
QUESTION = "Where was the guitarist of Green born?"


@pytest.fixture
def index(bow_embed):
    return MultiPartiteIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()]
    )


def ranked(index, query=QUESTION, **kw):
    return [r.node.ref_doc_id for r in index.as_retriever(**kw).retrieve(query)]


def test_three_layers_and_two_edge_kinds(index):
    stats = index.stats()
    assert stats["chunks"] == 4 and stats["units"] >= 8 and stats["entities"] >= 6
    g = index.graph
    assert set(g.node_kinds()) == {CHUNK, UNIT, ENTITY}
    assert set(g.edge_kind_names()) == {"has_unit", "mentions"}
    assert g.has_node(entity_id("steve hillage"))


def test_retrieval_follows_the_entity_chain_and_explains_itself(index):
    results = index.as_retriever(similarity_top_k=4, fill="none").retrieve(QUESTION)
    by_id = {r.node.ref_doc_id: r.node.metadata["evidence"] for r in results}
    assert {"green", "hillage", "chingford"} <= set(by_id)
    # Chingford's chunk shares no word with the question: only the path reaches it,
    # Green -> "Green is an album by Steve Hillage." -> Steve Hillage -> "He was born ..."
    paths = by_id["chingford"]["paths"]
    assert any("He was born in Chingford." in p["units"] for p in paths)
    assert any(h["entity"] == "Steve Hillage" for p in paths for h in p["hops"])
    # with path evidence in the final score the chain outranks the distractor
    weighted = ranked(index, similarity_top_k=3, path_weight=1.0)
    assert set(weighted) == {"green", "hillage", "chingford"}
    ev = results[0].node.metadata["evidence"]
    assert ev["method"] == "cue-qiter" and ev["source"] == "paths"
    assert ev["paths"] and {"depth", "score", "units", "hops"} <= set(ev["paths"][0])
    assert "Green" in ev["query_entities"]
    assert "evidence" in results[0].node.excluded_llm_metadata_keys


def test_fill_tops_up_with_dense_and_none_does_not(index):
    few = index.as_retriever(similarity_top_k=4, D=1, M=1, K=1, use_ka=False)
    results = few.retrieve("Paris capital")
    assert len(results) == 4
    assert {r.node.metadata["evidence"]["source"] for r in results} == {"paths", "dense-fill"}
    only = index.as_retriever(similarity_top_k=4, D=1, M=1, K=1, use_ka=False, fill="none")
    assert all(r.node.metadata["evidence"]["source"] == "paths" for r in only.retrieve("Paris"))


def test_ablation_switches_change_the_anchors(index):
    full = index.as_retriever(similarity_top_k=4).retrieve(QUESTION)[0].node.metadata["evidence"]
    no_sa = index.as_retriever(similarity_top_k=4, use_sa=False).retrieve(QUESTION)[0]
    assert full["query_entities"] and not no_sa.node.metadata["evidence"]["query_entities"]
    no_both = dict(similarity_top_k=4, use_sa=False, use_ka=False, fill="none")
    assert index.as_retriever(**no_both, bm25_weight=0).retrieve(QUESTION) == []  # no anchor
    # with BM25 fused, only the passages BM25 ranks come back, and say so
    lexical = index.as_retriever(**no_both).retrieve(QUESTION)
    assert lexical and {r.node.metadata["evidence"]["source"] for r in lexical} == {"bm25"}


def test_delete_keeps_shared_entities_and_drops_orphans(index):
    g = index.graph
    hillage, chingford = entity_id("steve hillage"), entity_id("chingford")
    forest = entity_id("epping forest")
    assert g.has_node(forest)
    index.delete_ref_doc("chingford")
    assert g.has_node(forest)  # the graph handed out is a snapshot ...
    g = index.graph  # ... so ask again after a change
    assert not g.has_node(forest)  # only the deleted chunk mentioned it
    assert g.has_node(chingford)  # "He was born in Chingford." still mentions it
    assert g.has_node(hillage)
    assert "chingford" not in ranked(index, similarity_top_k=4)
    index.delete_ref_doc("hillage")
    g = index.graph
    assert not g.has_node(chingford) and g.has_node(hillage)  # Green's unit still names him
    assert len(index.view().unit_ids) == g.num_nodes(UNIT) == len(index._units)


def test_shared_units_survive_the_deletion_of_one_chunk(bow_embed):
    docs = [
        Document(id_="a", text="Oslo is in Norway. Alpha text here."),
        Document(id_="b", text="Oslo is in Norway. Beta text there."),
    ]
    index = MultiPartiteIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()]
    )
    shared = [u for u in index.graph.nodes(UNIT) if len(index.graph.neighbors(u, "has_unit")) == 2]
    assert len(shared) == 1
    index.delete_ref_doc("a")
    assert index.graph.has_node(shared[0]) and index.graph.has_node(entity_id("oslo"))


def test_insert_is_incremental_and_idempotent(index):
    before = index.stats()["units"]
    doc = Document(id_="lyon", text="Lyon\nLyon is a city in France.", metadata={"title": "Lyon"})
    index.insert(doc)
    index.insert(doc)
    assert index.stats()["chunks"] == 5 and index.stats()["units"] > before
    assert ranked(index, "Lyon city", similarity_top_k=1) == ["lyon"]


def test_persist_and_load_give_identical_retrieval(index, bow_embed, tmp_path):
    index.persist(tmp_path / "cue")
    loaded = MultiPartiteIndex.load(tmp_path / "cue", embed_model=bow_embed)
    for q in (QUESTION, "capital of France", "English guitarist"):
        a = index.as_retriever(similarity_top_k=4).retrieve(q)
        b = loaded.as_retriever(similarity_top_k=4).retrieve(q)
        assert [r.node.node_id for r in a] == [r.node.node_id for r in b]
        assert [r.score for r in a] == pytest.approx([r.score for r in b])
        assert json.dumps(a[0].node.metadata["evidence"]) == json.dumps(
            b[0].node.metadata["evidence"]
        )
    assert loaded.stats() == index.stats()
    assert loaded.config == index.config
    loaded.delete_ref_doc("paris")  # stays writable
    assert loaded.stats()["chunks"] == 3


def test_retriever_inside_retriever_query_engine(index):
    llm = ScriptedLLM(lambda prompt: "Chingford" if "Chingford" in prompt else "unknown")
    engine = RetrieverQueryEngine.from_args(index.as_retriever(similarity_top_k=3), llm=llm)
    response = engine.query(QUESTION)
    assert str(response) == "Chingford"
    assert {"green", "hillage"} <= {n.node.ref_doc_id for n in response.source_nodes}
    qe = index.as_query_engine(llm=llm, similarity_top_k=3)
    assert str(qe.query(QUESTION)) == "Chingford"
    assert "as few words as possible" in llm.calls[-1]


def test_async_and_threads_agree_with_sync(index):
    retriever = index.as_retriever(similarity_top_k=3)
    sync = [r.node.node_id for r in retriever.retrieve(QUESTION)]
    async_ids = [r.node.node_id for r in asyncio.run(retriever.aretrieve(QUESTION))]
    assert async_ids == sync
    with ThreadPoolExecutor(4) as pool:
        outs = list(
            pool.map(lambda _: [r.node.node_id for r in retriever.retrieve(QUESTION)], range(8))
        )
    assert all(o == sync for o in outs)


def test_llm_query_entities_and_fallback(index):
    llm = ScriptedLLM({"Question: Where": '{"entities": ["Steve Hillage"]}'}, default="garbage")
    r = index.as_retriever(similarity_top_k=3, query_entities="llm", llm=llm)
    ev = r.retrieve(QUESTION)[0].node.metadata["evidence"]
    assert ev["query_entities"] == ["Steve Hillage"]
    bad = index.as_retriever(similarity_top_k=3, query_entities="llm", llm=ScriptedLLM("not json"))
    ev = bad.retrieve(QUESTION)[0].node.metadata["evidence"]
    assert "Green" in ev["query_entities"] and bad.fallbacks["query_entities_llm"] == 1


def test_reranker_postprocessor_is_used_for_paths_and_chunks(index):
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    calls = []

    class LengthReranker(BaseNodePostprocessor):
        top_n: int = 2

        def _postprocess_nodes(self, nodes, query_bundle=None):
            calls.append(len(nodes))
            scored = [NodeWithScore(node=n.node, score=-len(n.node.get_content())) for n in nodes]
            return sorted(scored, key=lambda n: -n.score)[: self.top_n]

    retriever = index.as_retriever(similarity_top_k=3, reranker=LengthReranker())
    results = retriever.retrieve(QUESTION)
    assert len(calls) >= 2 and len(results) == 3
    assert retriever.scorer.name == "LengthReranker"
    lengths = [
        len(r.node.get_content())
        for r in results
        if r.node.metadata["evidence"]["source"] == "paths"
    ]
    assert lengths == sorted(lengths)


def test_bad_arguments_and_empty_queries(index):
    with pytest.raises(ValueError, match="D"):
        QIterRetriever(index, D=0)
    with pytest.raises(ValueError):
        QIterRetriever(index, query_entities="magic")
    with pytest.raises(ValueError, match="query is empty"):
        index.as_retriever().retrieve("   ")
    with pytest.raises(TypeError):
        index.as_retriever(reranker=object())


def _late_and_separate(docs, embed_model):
    """The same documents indexed with one-pass and with separate unit and entity vectors."""

    def build(**vectors):
        return MultiPartiteIndex.from_documents(
            docs, embed_model=embed_model, transformations=[PassageParser()], **vectors
        )

    return (
        build(unit_vectors="late", entity_vectors="late"),
        build(unit_vectors="separate", entity_vectors="separate"),
    )


def test_late_unit_and_entity_vectors_are_pooled_from_the_chunk_pass(minilm):
    late, separate = _late_and_separate(DOCS, minilm)
    assert late.config.vectors.unit_vectors == "late"
    # Every sentence unit and every entity was found in its chunk: nothing embedded alone.
    assert late.build_stats["late_spans_alone"] == 0
    assert len(late._units) == len(separate._units) and len(late._entities) == len(
        separate._entities
    )
    # One pass gave the chunks their own vectors; units are close to (not equal to) alone.
    assert np.allclose(late._chunks.matrix, separate._chunks.matrix, atol=1e-5)
    sims = (late._units.matrix * separate._units.matrix).sum(axis=1)
    assert sims.min() > 0.5 and sims.max() < 0.9999
    # The entity chain is still walked: the two-hop answer's passage is reached.
    assert "chingford" in ranked(late)[:3]


def test_a_long_chunk_s_later_units_are_pooled_from_its_later_windows(minilm):
    filler = " ".join(f"Clause {i} of the charter names no one in particular." for i in range(40))
    text = f"{filler} The Velden Charter was signed by Mira Holt in Graz."
    docs = [Document(id_="charter", text=text, metadata={"title": "Velden Charter"})]
    late, separate = _late_and_separate(docs, minilm)
    # Read window by window: nothing past the first window is embedded alone, and
    # the chunk's vector is the pooled one the normal path gives.
    assert late.build_stats["late_chunks_windowed"] == 1
    assert late.build_stats["late_spans_alone"] == 0
    assert np.allclose(late._chunks.matrix, separate._chunks.matrix, atol=1e-5)
    texts = list(late._layers.unit_texts)
    assert texts == list(separate._layers.unit_texts)
    row = next(i for i, t in enumerate(texts) if "Mira Holt" in t)
    assert 0.5 < float(late._units.matrix[row] @ separate._units.matrix[row]) < 0.9999


def test_batches_embedded_while_the_next_are_parsed_give_the_one_batch_index(minilm, monkeypatch):
    from llama_index_graphrag_ext.core.text.parallel import TASK_TEXTS

    # Enough chunks for several batches and for the parse workers; a statement shared
    # by chunks of different batches is one unit, pooled where it was first met.
    docs = [
        Document(
            id_=f"{d.id_}-{i}",
            text=f"{d.text} Copy {i} was filed. It was released in 1978.",
            metadata=d.metadata,
        )
        for i in range(TASK_TEXTS // len(DOCS) + 2)
        for d in DOCS
    ]

    def build(**settings):
        return MultiPartiteIndex.from_documents(
            docs,
            embed_model=minilm,
            transformations=[PassageParser()],
            unit_vectors="late",
            entity_vectors="late",
            **settings,
        )

    whole = build(nlp_processes=1)
    monkeypatch.setattr(MultiPartiteIndex, "extract_batch", 5)
    batched = build(nlp_processes=2)  # parsed ahead in worker processes
    assert whole._layers.unit_texts == batched._layers.unit_texts
    assert whole._layers.entity_names == batched._layers.entity_names
    for name in ("_chunks", "_units", "_entities"):
        a, b = getattr(whole, name), getattr(batched, name)
        assert a.ids == b.ids
        np.testing.assert_allclose(a.matrix, b.matrix, atol=1e-5)
    assert whole.build_stats["late_spans_alone"] == batched.build_stats["late_spans_alone"]


def test_late_vectors_with_a_hash_embedder_warn_and_embed_separately(bow_embed, caplog):
    index = MultiPartiteIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()], unit_vectors="late"
    )
    assert index.build_stats["late_unavailable"] == len(DOCS)
    assert "late vectors are unavailable" in caplog.text
    from llama_index_graphrag_ext.core.late_chunking import LateChunkingUnavailable

    with pytest.raises(LateChunkingUnavailable):
        MultiPartiteIndex.from_documents(
            DOCS,
            embed_model=bow_embed,
            transformations=[PassageParser()],
            unit_vectors="late",
            late_fallback="raise",
        )
