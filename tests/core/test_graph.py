"""Tests for `llama_index_graphrag_ext.core.graph` and its file format (`core.graph_format`)."""

from __future__ import annotations

import gzip
import json
import threading

import numpy as np
import pytest

from llama_index_graphrag_ext.core.graph import FORMAT_VERSION, TypedGraph


def _sample() -> TypedGraph:
    """Two chunks, three sentences, one entity, with EC/SS/SA/contains edges."""
    g = TypedGraph(meta={"method": "test"})
    g.add_nodes(["c1", "c2"], "chunk", [{"text": "alpha"}, None])
    g.add_nodes(["s1", "s2", "s3"], "sentence")
    g.add_node("e1", "entity", label="Paris", aliases=["City of Light"])
    g.add_nodes(["c3"], "chunk")  # a kind again after another: two runs of one kind
    g.add_edge("s1", "s2", "EC")
    g.add_edge("s1", "s2", "SS", weight=0.8)
    g.add_edge("s2", "s3", "SA", weight=1)
    g.add_edge("s1", "c1", "in_chunk")
    g.add_edge("s2", "c1", "in_chunk")
    g.add_edge("s3", "c2", "in_chunk", note={"k": [1, 2]})
    g.add_edge("s1", "e1", "mentions", weight=0.5)
    return g


def _canonical(g: TypedGraph) -> tuple:
    nodes = [(n, g.node_kind(n), g.node_attrs(n)) for n in g.nodes()]
    edges = sorted(
        (tuple(sorted((u, v))), k, w, json.dumps(g.edge_attrs(u, v, k), sort_keys=True))
        for u, v, k, w in g.edges()
    )
    return nodes, edges, g.meta, g.stats()


def test_add_and_query_nodes():
    g = _sample()
    assert g.has_node("c1") and "c1" in g and not g.has_node("zz")
    assert g.node_kind("e1") == "entity"
    assert g.node_attrs("e1") == {"label": "Paris", "aliases": ["City of Light"]}
    assert g.nodes("sentence") == ["s1", "s2", "s3"]
    assert g.nodes() == ["c1", "c2", "s1", "s2", "s3", "e1", "c3"]
    assert g.num_nodes() == 7
    assert g.num_nodes("chunk") == 3 and g.num_nodes("nothing") == 0
    assert g.node_kinds() == ["chunk", "entity", "sentence"]
    with pytest.raises(KeyError):
        g.node_kind("zz")


def test_add_node_merges_and_rejects_kind_change():
    g = _sample()
    g.add_node("c1", "chunk", score=3)
    assert g.node_attrs("c1") == {"text": "alpha", "score": 3}
    g.add_nodes(["c2"], "chunk", [{"text": "beta"}])
    assert g.node_attrs("c2") == {"text": "beta"}
    assert g.num_nodes("chunk") == 3
    with pytest.raises(ValueError, match="already exists"):
        g.add_node("c1", "entity")
    with pytest.raises(ValueError, match="already exists"):
        g.add_nodes(["x", "c1"], "entity")
    with pytest.raises(ValueError, match="reserved"):
        g.add_nodes(["y"], "chunk", [{"kind": "bad"}])
    with pytest.raises(ValueError):
        g.add_nodes(["a", "b"], "chunk", [{}])
    with pytest.raises(TypeError):
        g.add_node(3, "chunk")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        g.add_node("q", "")


def test_edges_several_kinds_on_one_pair():
    g = _sample()
    assert sorted(g.incident("s1")) == [
        ("c1", "in_chunk", None),
        ("e1", "mentions", 0.5),
        ("s2", "EC", None),
        ("s2", "SS", 0.8),
    ]
    assert sorted(g.incident("s2")) == [
        ("c1", "in_chunk", None),
        ("s1", "EC", None),
        ("s1", "SS", 0.8),
        ("s3", "SA", 1.0),
    ]
    assert isinstance(dict(((v, k), w) for v, k, w in g.incident("s3"))["s2", "SA"], float)
    assert g.edge_attrs("s3", "c2", "in_chunk") == {"note": {"k": [1, 2]}}
    assert g.edge_attrs("c2", "s3", "in_chunk") == {"note": {"k": [1, 2]}}
    assert g.num_edges() == 7
    assert g.num_edges("in_chunk") == 3 and g.num_edges("EC") == 1
    assert g.edge_kind_names() == ["EC", "SA", "SS", "in_chunk", "mentions"]
    # Re-adding updates the weight and merges attributes, never duplicates.
    g.add_edge("s2", "s1", "SS", weight=0.9, source="test")
    assert g.num_edges("SS") == 1 and ("s2", "SS", 0.9) in g.incident("s1")
    assert g.edge_attrs("s1", "s2", "SS") == {"source": "test"}
    assert [e for e in g.edges() if e[2] == "SS"] == [("s1", "s2", "SS", 0.9)]
    assert ("s1", "s2", "SS", 0.9, {"source": "test"}) in g.edges_with_attrs()
    with pytest.raises(KeyError):
        g.add_edge("s1", "missing", "EC")
    with pytest.raises(ValueError):
        g.add_edge("s1", "s1", "EC")
    with pytest.raises(KeyError, match="no 'EC' edge"):
        g.edge_attrs("s1", "s3", "EC")


def test_neighbors_and_degree():
    g = _sample()
    assert g.neighbors("s1") == ["s2", "c1", "e1"]
    assert g.neighbors("s1", "SS") == ["s2"]
    assert g.neighbors("s1", "SA") == []
    assert g.neighbors("c1", "in_chunk") == ["s1", "s2"]
    assert g.degree("s1") == 3 and g.degree("c3") == 0
    with pytest.raises(KeyError):
        g.neighbors("zz")
    with pytest.raises(KeyError):
        g.incident("zz")


def test_remove_nodes_drops_incident_edges():
    g = _sample()
    assert g.remove_nodes(["s2", "nope"]) == 1
    assert not g.has_node("s2")
    assert sorted(g.incident("s1")) == [("c1", "in_chunk", None), ("e1", "mentions", 0.5)]
    assert g.neighbors("s1") == ["c1", "e1"]
    assert g.neighbors("c1") == ["s1"]
    assert g.num_edges("EC") == 0 and g.num_edges("SS") == 0 and g.num_edges("SA") == 0
    assert g.num_edges() == 3 == sum(1 for _ in g.edges())
    assert g.stats()["edge_kinds"] == {"in_chunk": 2, "mentions": 1}
    assert g.nodes("sentence") == ["s1", "s3"]
    g.remove_nodes(["e1"])
    assert "entity" not in g.stats()["node_kinds"]


def test_remove_edges():
    g = _sample()
    assert g.remove_edges(kind="SS") == 1
    assert g.neighbors("s1", "EC") == ["s2"] and g.neighbors("s1", "SS") == []
    assert g.remove_edges(kind="in_chunk") == 3
    assert g.neighbors("c1") == [] and g.stats()["edge_kinds"] == {"EC": 1, "SA": 1, "mentions": 1}
    assert g.remove_edges(kind="nothing") == 0
    assert g.remove_edges() == 3
    assert g.num_edges() == 0 and list(g.edges()) == [] and g.num_nodes() == 7


def test_stats():
    assert _sample().stats() == {
        "nodes": 7,
        "edges": 7,
        "node_kinds": {"chunk": 3, "entity": 1, "sentence": 3},
        "edge_kinds": {"EC": 1, "SA": 1, "SS": 1, "in_chunk": 3, "mentions": 1},
    }


def test_bulk_add_edges_is_consistent():
    n, m = 20_000, 50_000
    rng = np.random.default_rng(0)
    ids = [f"n{i}" for i in range(n)]
    g = TypedGraph()
    g.add_nodes(ids, "sentence")
    us = rng.integers(0, n, m).tolist()
    vs = rng.integers(0, n, m).tolist()
    ws = rng.random(m).tolist()
    triples = [(ids[u], ids[v], w) for u, v, w in zip(us, vs, ws, strict=True)]
    # Speed is measured by the benchmark runner, not asserted here (shared, noisy machines).
    added = g.add_edges(triples, "SS")
    expected = {frozenset((u, v)) for u, v in zip(us, vs, strict=True) if u != v}
    assert added == len(expected) == g.num_edges("SS") == sum(1 for _ in g.edges())
    assert g.num_nodes() == n
    # Idempotent: a second pass adds nothing new.
    assert g.add_edges(triples[:1000], "SS") == 0
    # numpy scalars become plain floats (JSON-serialisable).
    assert g.add_edges([(ids[0], ids[1], np.float32(0.25))], "EC") == 1
    assert [type(w) for _, k, w in g.incident(ids[0]) if k == "EC"] == [float]
    with pytest.raises(KeyError, match="unknown node"):
        g.add_edges([("n0", "missing")], "EC")


def test_to_dict_round_trip_exact():
    g = _sample()
    d = g.to_dict()
    assert d["version"] == FORMAT_VERSION
    assert d["nodes"] == g.nodes()  # ids listed once
    assert d["kinds"] == [[0, 2], [1, 3], [2, 1], [0, 1]]  # run-length kinds
    assert set(d["edges"]) == {"EC", "SS", "SA", "in_chunk", "mentions"}
    assert "weight" not in d["edges"]["EC"]  # no weights, no array
    json.dumps(d)  # JSON-ready
    g2 = TypedGraph.from_dict(json.loads(json.dumps(d)))
    assert _canonical(g2) == _canonical(g)
    assert g2.to_dict() == d


@pytest.mark.parametrize("name", ["graph.json", "graph.json.gz"])
def test_save_load_round_trip(tmp_path, name):
    g = _sample()
    g.add_node("u1", "unit", text="Ünïcödé — 東京 <b>", score=1.5, flag=True, none=None)
    g.add_edge("u1", "c1", "inter", weight=1 / 3)
    path = tmp_path / name
    g.save(path)
    raw = path.read_bytes()
    assert (raw[:2] == b"\x1f\x8b") == name.endswith(".gz")
    g2 = TypedGraph.load(path)
    assert _canonical(g2) == _canonical(g)
    assert ("c1", "inter", 1 / 3) in g2.incident("u1")
    # Deterministic bytes for an identical graph (gzip mtime is fixed).
    g2.save(tmp_path / ("again_" + name))
    assert (tmp_path / ("again_" + name)).read_bytes() == raw


def test_load_rejects_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a typed graph"):
        TypedGraph.load(bad)
    d = _sample().to_dict()
    d["version"] = FORMAT_VERSION + 1
    with gzip.open(tmp_path / "new.json.gz", "wt") as fh:
        json.dump(d, fh)
    with pytest.raises(ValueError, match="not supported"):
        TypedGraph.load(tmp_path / "new.json.gz")
    (tmp_path / "junk.json").write_text("{nope")
    with pytest.raises(ValueError):
        TypedGraph.load(tmp_path / "junk.json")
    g = TypedGraph()
    g.add_node("a", "chunk", obj=object())
    with pytest.raises(TypeError, match="JSON"):
        g.save(tmp_path / "x.json")


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda d: d["kinds"].append([0, 1]), "node kinds for"),
        (lambda d: d["nodes"].__setitem__(1, "c1"), "duplicate node ids"),
        (lambda d: d["edges"]["SS"]["v"].append(0), "differ in length"),
        (lambda d: d.__setitem__("version", "1"), "not supported"),
    ],
)
def test_from_dict_rejects_inconsistent_arrays(corrupt, message):
    d = json.loads(json.dumps(_sample().to_dict()))
    corrupt(d)
    with pytest.raises(ValueError, match=message):
        TypedGraph.from_dict(d)


def test_concurrent_reads():
    g = TypedGraph()
    ids = [f"n{i}" for i in range(2000)]
    g.add_nodes(ids, "query")
    g.add_edges(((ids[i], ids[(i * 7 + 1) % 2000]) for i in range(2000)), "knn")
    expected = g.to_dict()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(20):
                assert g.to_dict() == expected
                g.neighbors("n5", "knn")
                g.incident("n5")
                g.stats()
        except BaseException as exc:  # pragma: no cover - only on failure
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
