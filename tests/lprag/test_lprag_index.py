"""ChunkQueryLinkIndex and LinkPredictionRetriever end to end on a tiny corpus."""

from __future__ import annotations

import hashlib
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import Document
from support import ScriptedLLM

from llama_index_graphrag_ext.core.embeddings import knn_graph
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex, LinkPredictionRetriever

TEXTS = {
    "crux": "Crux is an American comic book. Crux was published by CrossGen Entertainment.",
    "crossgen": "CrossGen Entertainment was a comic book publisher. CrossGen operated from "
    "1998 to 2004 in Florida.",
    "paris": "Paris is the capital of France. Paris lies on the river Seine.",
    "seine": "The Seine is a river in northern France. The Seine flows into the English Channel.",
    "curie": "Marie Curie was a physicist born in Warsaw. Marie Curie won two Nobel Prizes.",
    "warsaw": "Warsaw is the capital of Poland. Warsaw lies on the river Vistula.",
    "tea": "Green tea is made from unoxidised leaves. Tea is popular in Japan and China.",
    "japan": "Japan is an island country in East Asia. Tokyo is the capital of Japan.",
}
DOCS = [Document(id_=k, text=v) for k, v in TEXTS.items()]
SMALL = {"hidden": 32, "epochs": 30, "lr": 0.01, "threads": 1, "k": 3, "M": 3}


@pytest.fixture
def index(bow_embed):
    return ChunkQueryLinkIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()], config="pseudo",
        **SMALL,
    )  # fmt: skip


def test_build_links_every_query_to_its_batch(index):
    assert len(index) == 8 and index.num_queries >= 8
    assert index.build_stats["pseudo_queries"] == index.num_queries
    ids = index.chunk_ids()
    rows, cols, _ = index._edges
    edges = {(ids[a], ids[b]) for a, b in zip(rows, cols, strict=True)}
    edges |= {(b, a) for a, b in edges}
    for q in index.queries():
        target, *others = q["chunks"]
        assert all((target, o) in edges for o in others)  # a batch = target + neighbours
        assert q["origin"] == "pseudo"
    assert index.graph.num_nodes("query") == index.num_queries
    assert index.graph.num_edges("asks") == sum(len(q["chunks"]) for q in index.queries())
    assert index.train_report is not None and index.train_report.predictor == "ncn"


def test_mutual_knn_graph_matches_brute_force(index):
    ids = index.chunk_ids()
    z = index._chunks.get(ids)
    sims = z @ z.T
    np.fill_diagonal(sims, -np.inf)
    top = [set(np.argsort(-sims[i], kind="stable")[:3].tolist()) for i in range(len(ids))]
    brute = {(i, j) for i in range(len(ids)) for j in top[i] if i < j and i in top[j]}
    rows, cols, weights = index._edges
    assert set(zip(rows.tolist(), cols.tolist(), strict=True)) == brute
    np.testing.assert_allclose(weights, sims[rows, cols], rtol=1e-5)


def test_retrieval_ranks_by_link_probability_with_evidence(index):
    results = index.as_retriever(similarity_top_k=3).retrieve("Who published the comic book Crux?")
    assert len(results) == 3
    assert {r.node.ref_doc_id for r in results} & {"crux", "crossgen"}
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    evidence = results[0].node.metadata["evidence"]
    assert evidence["method"] == "lp-rag" and evidence["predictor"] == "ncn"
    assert evidence["link_probability"] == pytest.approx(results[0].score, abs=1e-6)
    only_confident = index.as_retriever(similarity_top_k=None, tau=0.5).retrieve("Crux")
    assert all(r.score >= 0.5 for r in only_confident)
    with pytest.raises(ValueError):
        LinkPredictionRetriever(index, similarity_top_k=None, tau=None)


async def test_async_and_threads_agree(index):
    retriever = index.as_retriever(similarity_top_k=4)
    question = "capital of Poland"
    expected = [(r.node.node_id, r.score) for r in retriever.retrieve(question)]
    got = [(r.node.node_id, r.score) for r in await retriever.aretrieve(question)]
    assert got == expected
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: retriever.retrieve(question), range(8)))
    assert all([(r.node.node_id, r.score) for r in run] == expected for run in runs)


def test_persist_and_reload_give_identical_scores(index, bow_embed, tmp_path):
    index.persist(tmp_path / "lp")
    assert (tmp_path / "lp" / "link_predictor.pt").is_file()
    loaded = ChunkQueryLinkIndex.load(tmp_path / "lp", embed_model=bow_embed)
    assert loaded.config == index.config and loaded.config.origin == index.config.origin
    assert index.config.origin.startswith("pseudo + ")
    assert loaded.config.training.predictor == "ncn" and loaded.num_queries == index.num_queries
    for q in ("river in France", "Nobel Prize physicist", "tea leaves"):
        a = index.as_retriever().scores(q)
        b = loaded.as_retriever().scores(q)
        assert a.keys() == b.keys()
        np.testing.assert_array_equal(np.array(list(a.values())), np.array(list(b.values())))
    assert loaded.train_report.val_auc == index.train_report.val_auc


def test_insert_finetunes_and_delete_drops_links(index):
    before = {k: v.clone() for k, v in index._models[0].state_dict().items()}
    queries = index.num_queries
    index.insert(Document(id_="lyon", text="Lyon is a city in France. Lyon lies on the Rhone."))
    assert len(index) == 9 and index.num_queries > queries
    assert any(not (v == index._models[0].state_dict()[k]).all() for k, v in before.items())
    top = index.as_retriever(similarity_top_k=9).retrieve("Lyon city on the Rhone")
    assert "lyon" in [r.node.ref_doc_id for r in top]
    index.delete_ref_doc("lyon")
    assert len(index) == 8
    assert all("lyon" not in c for q in index.queries() for c in q["chunks"])
    assert "lyon" not in [
        r.node.ref_doc_id for r in index.as_retriever(similarity_top_k=8).retrieve("Lyon")
    ]


def test_llm_synthetic_queries_are_linked_to_the_whole_batch(bow_embed):
    def answer(prompt: str) -> str:
        first = re.search(r"\[Passage 1\] (\w+ \w+)", prompt).group(1)
        return f"[What do we know about {first}?]\n[Where is {first} from?]\n[extra one ignored?]"

    llm = ScriptedLLM(answer)
    index = ChunkQueryLinkIndex.from_documents(
        DOCS, embed_model=bow_embed, llm=llm, transformations=[PassageParser()],
        config="paper", max_llm_batches=5, **SMALL,
    )  # fmt: skip
    origins = [q["origin"] for q in index.queries()]
    assert llm.call_count == 5 and origins.count("llm") == 10
    assert index.build_stats["llm_batches"] == 5 and index.build_stats["pseudo_queries"] > 0
    for q in index.queries():
        if q["origin"] == "llm":
            assert q["text"].startswith(("What do we know", "Where is"))


def test_retriever_inside_a_query_engine(index):
    llm = ScriptedLLM(lambda prompt: "CrossGen" if "Crux" in prompt else "I don't know.")
    engine = RetrieverQueryEngine.from_args(index.as_retriever(similarity_top_k=2), llm=llm)
    response = engine.query("Who published Crux?")
    assert str(response) == "CrossGen" and len(response.source_nodes) == 2
    engine2 = index.as_query_engine(llm=llm, similarity_top_k=2)
    assert str(engine2.query("Who published Crux?")) == "CrossGen"
    assert "most relevant first" in llm.calls[-1]


def test_bad_settings_and_empty_index(bow_embed):
    with pytest.raises(ValueError):
        ChunkQueryLinkIndex(embed_model=bow_embed, predictor="seal")
    with pytest.raises(ValueError):
        ChunkQueryLinkIndex(embed_model=bow_embed, update_policy="sometimes")
    empty = ChunkQueryLinkIndex(nodes=[], embed_model=bow_embed)
    assert empty.as_retriever().retrieve("anything") == []


def test_query_neighbours_are_the_nearest_chunks(index):
    graph = index._link_graph()
    nb, _ = knn_graph(graph.z_queries, index.config.graph.M, others=graph.z_chunks)
    assert (graph.query_neighbors == nb).all()
    assert len(graph.pos_query) == sum(len(q["chunks"]) for q in index.queries())


def test_bridges_add_mention_edges_and_bridge_queries(bow_embed):
    titled = [Document(id_=k, text=v, metadata={"title": k.capitalize()}) for k, v in TEXTS.items()]
    # "Crux" names CrossGen, "Curie" names Warsaw, "Paris" names the Seine.
    index = ChunkQueryLinkIndex.from_documents(
        titled, embed_model=bow_embed, transformations=[PassageParser()],
        config="pseudo", bridges=True, **SMALL,
    )  # fmt: skip
    ids = index.chunk_ids()
    node_of = {n.ref_doc_id: n.node_id for n in index.get_chunks(ids)}
    assert index.build_stats["bridge_pairs"] >= 2
    rows, cols, _ = index._edges
    edges = {frozenset((ids[a], ids[b])) for a, b in zip(rows, cols, strict=True)}
    assert frozenset((node_of["crux"], node_of["crossgen"])) in edges
    assert frozenset((node_of["curie"], node_of["warsaw"])) in edges
    bridge = [q for q in index.queries() if q["origin"] == "bridge"]
    assert index.build_stats["bridge_queries"] == len(bridge) >= 2
    linked = {tuple(q["chunks"]) for q in bridge}
    assert (node_of["curie"], node_of["warsaw"]) in linked
    assert all("warsaw" in q["text"].lower() for q in bridge if q["chunks"][1] == node_of["warsaw"])
    # Without titles the setting is a no-op, not an error.
    plain = ChunkQueryLinkIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()],
        config="pseudo", bridges=True, **SMALL,
    )  # fmt: skip
    assert plain.build_stats["bridge_pairs"] == 0


def test_cosine_prior_pulls_the_ranking_towards_the_encoder(index):
    query = "Which river flows through the capital of France?"
    z = index._chunks.get(index.chunk_ids())
    q = np.asarray(index.embed_model.get_query_embedding(query), np.float32)
    by_cosine = [index.chunk_ids()[i] for i in np.argsort(-(z @ (q / np.linalg.norm(q))))[:3]]
    strong = index.as_retriever(similarity_top_k=3, cosine_prior=1000.0).retrieve(query)
    assert [h.node.node_id for h in strong] == by_cosine
    assert strong[0].node.metadata["evidence"]["cosine_prior"] == 1000.0
    with pytest.raises(ValueError, match="cosine_prior"):
        index.as_retriever(cosine_prior=-1.0)


def test_standardized_prior_weighs_predictor_and_cosine_equally(index):
    query = "Which river flows through the capital of France?"
    ids = index.chunk_ids()
    z = index._chunks.get(ids)
    q = np.asarray(index.embed_model.get_query_embedding(query), np.float32)
    cos = (z @ (q / np.linalg.norm(q))).astype(np.float64)
    plain = index.as_retriever(similarity_top_k=None, tau=0.0, max_candidates=None)
    phi = {r.node.node_id: r.metadata["evidence"]["link_logit"] for r in plain.retrieve(query)}
    phi = np.array([phi[i] for i in ids])

    def z_of(x):
        return (x - x.mean()) / x.std()

    expected = [ids[i] for i in np.argsort(-(z_of(phi) + z_of(cos)))]
    fused = index.as_retriever(similarity_top_k=len(ids), cosine_prior="standardized")
    hits = fused.retrieve(query)
    assert [h.node.node_id for h in hits] == expected
    ev = hits[0].metadata["evidence"]
    # The link probability stays the predictor's own; the node score orders the results.
    assert ev["cosine_prior"] == "standardized"
    assert ev["link_probability"] == pytest.approx(
        1 / (1 + np.exp(-phi[ids.index(expected[0])])), abs=1e-5
    )
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # The threshold tests the predictor's link probability, not the fused score.
    probs = 1 / (1 + np.exp(-phi))
    mid = np.sort(probs)[len(probs) // 2 - 1 : len(probs) // 2 + 1]
    tau = float(mid.mean())  # halfway between two chunks' probabilities: no tie at the cut
    above = {i for i, p in zip(ids, probs, strict=True) if p >= tau}
    assert 0 < len(above) < len(ids)
    kept = index.as_retriever(similarity_top_k=None, tau=tau, cosine_prior="standardized")
    assert [h.node.node_id for h in kept.retrieve(query)] == [i for i in expected if i in above]
    with pytest.raises(ValueError, match="standardized"):
        index.as_retriever(cosine_prior="auto")


def test_standardize_is_scale_free_and_safe_on_constants():
    from llama_index_graphrag_ext.lprag.retriever import standardize

    x = np.array([1.0, 3.0, 2.0, 6.0])
    assert standardize(10 * x + 7) == pytest.approx(standardize(x))
    assert standardize(x).mean() == pytest.approx(0.0) and standardize(x).std() == pytest.approx(
        1.0
    )
    assert standardize(np.full(3, 4.2)).tolist() == [0.0, 0.0, 0.0]


def test_candidate_cap_scores_the_nearest_chunks_with_the_same_logits(index):
    query = "Which river flows through the capital of France?"
    exhaustive = index.as_retriever(similarity_top_k=8, max_candidates=None)
    capped = index.as_retriever(similarity_top_k=8, max_candidates=4)
    full = {
        r.node.node_id: r.metadata["evidence"]["link_logit"] for r in exhaustive.retrieve(query)
    }
    got = capped.retrieve(query)
    # Only the 4 chunks nearest by cosine are scored, each with its exhaustive logit.
    z = index._chunks.get(index.chunk_ids())
    q = np.asarray(index.embed_model.get_query_embedding(query), np.float32)
    nearest = {index.chunk_ids()[i] for i in np.argsort(-(z @ (q / np.linalg.norm(q))))[:4]}
    assert {r.node.node_id for r in got} == nearest
    for r in got:
        assert r.metadata["evidence"]["link_logit"] == pytest.approx(full[r.node.node_id], abs=1e-4)
    assert [r.node.node_id for r in got] == [i for i in full if i in nearest]
    # A cap at or above the corpus size is the exhaustive retriever.
    same = index.as_retriever(similarity_top_k=8, max_candidates=8).retrieve(query)
    assert [(r.node.node_id, r.score) for r in same] == [
        (r.node.node_id, r.score) for r in exhaustive.retrieve(query)
    ]
    assert sum(1 for p in capped.scores(query).values() if p > 0) == 4
    with pytest.raises(ValueError, match="max_candidates"):
        index.as_retriever(max_candidates=2)  # fewer than the query's 3 attachments


def test_query_blocks_give_the_same_index_as_one_block(index, bow_embed, monkeypatch):
    from llama_index_graphrag_ext.lprag import query_writer

    monkeypatch.setattr(query_writer, "_QUERY_BLOCK", 3)  # 8 batches: blocks of 3, 3 and 2
    blocked = ChunkQueryLinkIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()], config="pseudo",
        **SMALL,
    )  # fmt: skip
    assert blocked.queries() == index.queries()
    np.testing.assert_array_equal(blocked._queries.vectors, index._queries.vectors)
    for key, value in index._models[0].state_dict().items():
        assert torch.equal(blocked._models[0].state_dict()[key], value)


def test_query_ids_hash_the_target_chunk_and_the_text(index):
    for q in index.queries():
        digest = hashlib.sha1(f"{q['chunks'][0]}|{q['text']}".encode()).hexdigest()[:16]
        assert q["id"] == "q:" + digest


def test_the_build_keeps_no_training_leftovers(bow_embed):
    from llama_index_graphrag_ext.lprag.chunker import rule_sentencizer

    rule_sentencizer.cache_clear()
    built = ChunkQueryLinkIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()], config="pseudo",
        **SMALL,
    )  # fmt: skip
    assert all(p.grad is None for p in built._models[0].parameters())
    # The pseudo-queries split sentences with a pipeline of their own, dropped after.
    assert rule_sentencizer.cache_info().currsize == 0
