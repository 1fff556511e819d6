"""LLM-free supervision that the encoder lacks: masked cross-passage queries, title-link graph, hard negatives."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex
from llama_index_graphrag_ext.lprag.bridges import bridge_queries, title_mentions
from llama_index_graphrag_ext.lprag.link_graph import LinkGraph
from llama_index_graphrag_ext.lprag.training import _Sampler

PAGES = {
    "Song X": "Song X is a ballad recorded by Ann Lee in 1990. It topped the charts.",
    "Ann Lee": "Ann Lee is a singer born in Oslo. She married Bo Berg in 2001.",
    "Oslo": "Oslo is the capital of Norway. It lies on a fjord.",
    "Bo Berg": "Bo Berg is a painter. He studied in Oslo and Rome.",
    "Green tea": "Green tea is made from unoxidised leaves. It is popular in Japan.",
    "Rome": "Rome is the capital of Italy. Ann Lee sang in Rome in 1995.",
}
DOCS = [Document(id_=t, text=v, metadata={"title": t}) for t, v in PAGES.items()]
SMALL = {"hidden": 16, "epochs": 5, "lr": 0.01, "threads": 1, "k": 2, "M": 2}


def test_masked_cross_passage_query_names_the_source_but_not_the_target():
    titles = list(PAGES)
    sentences = [[s.strip() + "." for s in t.split(".") if s.strip()] for t in PAGES.values()]
    pairs = title_mentions(titles, list(PAGES.values()))
    assert (0, 1) in pairs  # Song X names Ann Lee
    rng = np.random.default_rng(0)
    out = bridge_queries(pairs, titles, sentences, [0], rng, mask=True)
    assert out == [("Song X is a ballad recorded by in 1990.", [0, 1])]
    # Unmasked, the window carries the target's title (what dense already matches).
    plain = bridge_queries(pairs, titles, sentences, [0], np.random.default_rng(0))
    assert "Ann Lee" in plain[0][0] and plain[0][1] == [0, 1]


def test_per_source_bounds_the_queries_of_a_chunk():
    titles = list(PAGES)
    sentences = [[s.strip() + "." for s in t.split(".") if s.strip()] for t in PAGES.values()]
    pairs = title_mentions(titles, list(PAGES.values()))
    ann = titles.index("Ann Lee")
    mentioned = sorted(b for a, b in pairs if a == ann)
    assert len(mentioned) == 2  # Oslo and Bo Berg
    rng = np.random.default_rng(0)
    every = bridge_queries(pairs, titles, sentences, [ann], rng, mask=True, per_source=5)
    assert sorted(linked[1] for _, linked in every) == mentioned
    assert all(titles[linked[1]].lower() not in text.lower() for text, linked in every)
    one = bridge_queries(pairs, titles, sentences, [ann], rng, mask=True, per_source=1)
    assert len(one) == 1
    with pytest.raises(ValueError, match="per_source"):
        bridge_queries(pairs, titles, sentences, [ann], rng, per_source=0)


def test_title_link_graph_has_only_mention_edges(bow_embed):
    index = ChunkQueryLinkIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()], config="pseudo",
        bridges=True, knn_edges=False, bridge_mask=True, bridges_per_chunk=3, **SMALL,
    )  # fmt: skip
    ids = index.chunk_ids()
    title = {n.node_id: n.metadata["title"] for n in index.get_chunks(ids)}
    rows, cols, _ = index._edges
    edges = {frozenset((title[ids[a]], title[ids[b]])) for a, b in zip(rows, cols, strict=True)}
    expected = {
        frozenset(p)
        for p in [("Song X", "Ann Lee"), ("Ann Lee", "Oslo"), ("Ann Lee", "Bo Berg"),
                  ("Bo Berg", "Oslo"), ("Bo Berg", "Rome"), ("Rome", "Ann Lee")]
    }  # fmt: skip
    assert edges == expected  # no cosine-kNN edge; "Green tea" stays isolated
    bridge = [q for q in index.queries() if q["origin"] == "bridge"]
    assert len(bridge) == index.build_stats["bridge_queries"] == 6  # every mention pair
    for q in bridge:
        assert title[q["chunks"][1]].lower() not in q["text"].lower()
    assert index.as_retriever(similarity_top_k=3).retrieve("Who recorded Song X?")
    with pytest.raises(ValueError, match="knn_edges=False needs bridges"):
        ChunkQueryLinkIndex.from_documents(
            DOCS, embed_model=bow_embed, transformations=[PassageParser()],
            config="pseudo", knn_edges=False, **SMALL,
        )  # fmt: skip


def test_hard_negatives_come_from_the_query_s_dense_top_k():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(40, 8)).astype(np.float32)
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    zq = z[:3] + 0.05 * rng.normal(size=(3, 8)).astype(np.float32)
    zq /= np.linalg.norm(zq, axis=1, keepdims=True)
    none = np.zeros(0, np.int64)
    data = LinkGraph(z, none, none, np.zeros(0, np.float32), zq, np.zeros((3, 1), np.int64),
                     np.ones((3, 1), np.float32), np.arange(3), np.arange(3))  # fmt: skip
    sampler = _Sampler(data, pool=5, rng=rng)
    queries = np.repeat(np.arange(3), 200)
    hard = sampler.hard(queries)
    top5 = np.argsort(-(zq @ z.T), axis=1)[:, :5]
    for q in range(3):
        drawn = set(hard[queries == q].tolist())
        assert drawn <= set(top5[q].tolist()) - {q}  # dense top-k, never the positive
        assert len(drawn) == 4


def test_no_title_link_can_fall_back_to_the_paper_s_knn_graph_loudly(bow_embed, caplog):
    # Titles that no other passage names (chat sessions, say): the title graph is empty.
    docs = [
        Document(
            text=f"Session {i}\nWe talked about topic {i} and tea number {i}.",
            metadata={"title": f"Session {i}"},
        )
        for i in range(8)
    ]
    settings = dict(
        embed_model=bow_embed, transformations=[PassageParser()], config="pseudo",
        bridges=True, knn_edges=False, **SMALL,
    )  # fmt: skip
    index = ChunkQueryLinkIndex.from_documents(docs, on_no_title_links="knn", **settings)
    assert index.build_stats["bridge_edges"] == 0
    assert index.build_stats["graph_fallback"] == "mutual-kNN edges: no title links"
    assert len(index._edges[0]) > 0 and "no chunk names another chunk's title" in caplog.text
    assert index.config.graph.on_no_title_links == "knn"
    with pytest.raises(ValueError, match="no chunk names another chunk's title"):
        ChunkQueryLinkIndex.from_documents(docs, on_no_title_links="raise", **settings)
    # Where titles are named, nothing falls back.
    linked = ChunkQueryLinkIndex.from_documents(DOCS, **settings)
    assert "graph_fallback" not in linked.build_stats


def test_no_title_link_leaves_the_chunk_graph_without_edges_by_default(bow_embed, caplog, tmp_path):
    docs = [
        Document(
            text=f"Session {i}\nWe talked about topic {i} and tea number {i}.",
            metadata={"title": f"Session {i}"},
        )
        for i in range(8)
    ]
    index = ChunkQueryLinkIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()], config="pseudo",
        bridges=True, knn_edges=False, **SMALL,
    )  # fmt: skip
    assert len(index._edges[0]) == 0
    assert index.build_stats["graph_fallback"] == "no edges: no title links"
    assert "the chunk graph has no edge" in caplog.text
    # The predictor still trains on the query-chunk links and ranks every chunk.
    hits = index.as_retriever(similarity_top_k=3).retrieve("tea number 5")
    assert len(hits) == 3 and "number 5." in hits[0].node.get_content()
    # The fallback is persisted with the index and its setting comes back on load.
    index.persist(tmp_path / "lp")
    loaded = ChunkQueryLinkIndex.load(tmp_path / "lp", embed_model=bow_embed)
    assert loaded.build_stats["graph_fallback"] == "no edges: no title links"
    assert loaded.config.graph.on_no_title_links == "none"
    with pytest.raises(ValueError, match="on_no_title_links"):
        ChunkQueryLinkIndex.from_documents(docs, embed_model=bow_embed, on_no_title_links="drop")


def test_entity_links_make_the_graph_of_a_corpus_without_titles(bow_embed, caplog):
    docs = [Document(id_=t, text=v) for t, v in PAGES.items()]  # no title metadata
    index = ChunkQueryLinkIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()], config="pseudo",
        bridges=True, knn_edges=False, bridge_mask=True, bridges_per_chunk=3,
        bridge_links="entities", bridge_entity_chunks=3, **SMALL,
    )  # fmt: skip
    ids = index.chunk_ids()
    doc = {n.node_id: n.ref_doc_id for n in index.get_chunks(ids)}
    rows, cols, _ = index._edges
    edges = {frozenset((doc[ids[a]], doc[ids[b]])) for a, b in zip(rows, cols, strict=True)}
    # Song X and Rome name Ann Lee; Ann Lee, Oslo and Bo Berg name Oslo; ...
    assert frozenset(("Song X", "Rome")) in edges and frozenset(("Oslo", "Bo Berg")) in edges
    assert not any("Green tea" in e for e in edges)  # names nothing another chunk names
    assert "graph_fallback" not in index.build_stats
    bridge = [q for q in index.queries() if q["origin"] == "bridge"]
    assert bridge and len(bridge) == index.build_stats["bridge_queries"]
    assert index.config.queries.bridge_links == "entities"
    # With titles only, the same corpus has no link at all: the counted fallback.
    plain = ChunkQueryLinkIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()], config="pseudo",
        bridges=True, knn_edges=False, **SMALL,
    )  # fmt: skip
    assert plain.build_stats["graph_fallback"] == "no edges: no title links"
    with pytest.raises(ValueError, match="bridge_links"):
        ChunkQueryLinkIndex(embed_model=bow_embed, bridges=True, bridge_links="pages")


def test_entity_links_after_an_insert_parse_only_the_new_chunk(bow_embed, monkeypatch):
    from llama_index_graphrag_ext.lprag import chunk_graph

    parsed: list[int] = []
    real = chunk_graph.entity_keys
    monkeypatch.setattr(chunk_graph, "entity_keys", lambda t: parsed.append(len(t)) or real(t))
    docs = [Document(id_=t, text=v) for t, v in PAGES.items()]
    index = ChunkQueryLinkIndex.from_documents(
        docs[:5], embed_model=bow_embed, transformations=[PassageParser()], config="pseudo",
        bridges=True, knn_edges=False, bridge_links="entities", update_policy="none", **SMALL,
    )  # fmt: skip
    before = index.build_stats["bridge_edges"]
    index.insert_nodes(PassageParser().get_nodes_from_documents(docs[5:]))  # Rome
    assert parsed == [5, 1]
    assert index.build_stats["bridge_edges"] > before  # Rome names Ann Lee, as Song X does
    index.delete_ref_doc("Song X")
    assert parsed == [5, 1]  # a removal relinks the rest without parsing them again
    rows, cols, _ = index._edges
    assert len(rows) and "Song X" not in {n.ref_doc_id for n in index.get_chunks(index.chunk_ids())}
