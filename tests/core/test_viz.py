"""Tests for `llama_index_graphrag_ext.core.viz`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib import resources

import networkx as nx
import pytest

from llama_index_graphrag_ext.core.graph import TypedGraph
from llama_index_graphrag_ext.core.viz import (
    export,
    export_graphml,
    export_html,
    neighbourhood,
    node_label,
)

EVIL = '<script>alert("x")</script> & "quotes"'


def _graph() -> TypedGraph:
    """A chunk-sentence-entity graph with two edge kinds on one pair and hostile text."""
    g = TypedGraph()
    g.add_nodes(
        [f"c{i}" for i in range(4)], "chunk", [{"text": f"chunk {i} " * 20} for i in range(4)]
    )
    g.add_nodes(
        [f"s{i}" for i in range(20)],
        "sentence",
        [{"text": EVIL if i == 0 else f"sentence {i}", "pos": i} for i in range(20)],
    )
    g.add_node("e0", "entity", label="Paris", aliases=["City of Light"], score=1)
    g.add_node("e1", "entity", label="Lyon", score=2.5)
    for i in range(20):
        g.add_edge(f"s{i}", f"c{i // 5}", "in_chunk")
    for i in range(19):
        g.add_edge(f"s{i}", f"s{i + 1}", "SS", weight=0.5 + i / 100)
    g.add_edge("s0", "s1", "EC", shared=["Paris"])
    g.add_edge("s0", "e0", "mentions", weight=1.0)
    g.add_edge("s7", "e1", "mentions")
    return g


def test_node_label():
    g = _graph()
    assert node_label(g, "e0") == "Paris"
    label = node_label(g, "c0")
    assert len(label) <= 80 and label.startswith("chunk 0") and label.endswith("\u2026")
    g.add_node("bare", "entity")
    assert node_label(g, "bare") == "bare"


def test_neighbourhood_center_and_degree():
    g = _graph()
    assert neighbourhood(g, None) == g.nodes()
    assert neighbourhood(g, 100) == g.nodes()
    around = neighbourhood(g, 5, center="s10")
    assert len(around) == 5 and around[0] == "s10"
    # Breadth-first: each node after the centre hangs off an earlier one.
    assert all(set(g.neighbors(n)) & set(around[:i]) for i, n in enumerate(around) if i)
    assert neighbourhood(g, 5, center=["s10"]) == around  # deterministic
    top = neighbourhood(g, 3)
    assert top[0] == "c0"  # chunks have the highest degree (5); ties broken by id
    # A center in a small component: BFS stops at the component.
    g.add_nodes(["x", "y"], "entity")
    g.add_edge("x", "y", "rel")
    assert neighbourhood(g, 10, center="x") == ["x", "y"]
    # Without a center, isolated components are reached by restarting.
    assert len(neighbourhood(g, g.num_nodes())) == g.num_nodes()
    with pytest.raises(KeyError, match="unknown center"):
        neighbourhood(g, 5, center=["nope"])
    with pytest.raises(ValueError):
        neighbourhood(g, 0)


def test_graphml_round_trip(tmp_path):
    g = _graph()
    path = tmp_path / "g.graphml"
    summary = export_graphml(g, path)
    assert (summary.nodes_shown, summary.edges_shown) == (g.num_nodes(), g.num_edges())
    h = nx.read_graphml(path, force_multigraph=True)
    assert h.number_of_nodes() == g.num_nodes()
    assert h.number_of_edges() == g.num_edges()
    assert h.graph["nodes_total"] == g.num_nodes() and h.graph["edges_shown"] == g.num_edges()
    assert h.nodes["e0"]["kind"] == "entity" and h.nodes["e0"]["label"] == "Paris"
    assert h.nodes["e0"]["aliases"] == '["City of Light"]'  # non-scalar: JSON string
    assert h.nodes["s0"]["label"] == EVIL  # XML-escaped on disk, exact on reading
    # score is int on e0 and float on e1: one GraphML type (float) for both.
    assert h.nodes["e0"]["score"] == 1.0 and h.nodes["e1"]["score"] == 2.5
    # Two kinds between s0 and s1 survive as parallel edges.
    pair = h.get_edge_data("s0", "s1")
    assert sorted(d["kind"] for d in pair.values()) == ["EC", "SS"]
    ss = next(d for d in pair.values() if d["kind"] == "SS")
    assert ss["weight"] == pytest.approx(0.5)
    assert all("weight" not in d for d in pair.values() if d["kind"] == "EC")
    text = path.read_text()
    assert "<script>" not in text
    ids = re.findall(r'<edge [^>]*id="([^"]+)"', text)
    assert len(ids) == len(set(ids)) == g.num_edges()  # unique edge ids for Gephi


def _expected_graphml_value(value):
    """What `export_graphml` writes for an attribute value: scalars as they are, else JSON."""
    if isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def test_graphml_round_trips_every_node_edge_and_attribute(tmp_path):
    """``networkx.read_graphml`` gives back the graph's nodes, edges and attributes."""
    g = _graph()
    path = tmp_path / "g.graphml"
    export_graphml(g, path)
    h = nx.read_graphml(path, force_multigraph=True)
    assert list(h.nodes) == g.nodes()
    for n in g.nodes():
        want = {k: _expected_graphml_value(v) for k, v in g.node_attrs(n).items() if k != "label"}
        want.update(kind=g.node_kind(n), label=node_label(g, n))
        assert h.nodes[n] == want
    assert type(h.nodes["s3"]["pos"]) is int and type(h.nodes["e0"]["score"]) is float

    def edge_rows(edges):
        return sorted((tuple(sorted((u, v))), json.dumps(d, sort_keys=True)) for u, v, d in edges)

    expected = []
    for u, v, kind, weight, attrs in g.edges_with_attrs():
        row = {k: _expected_graphml_value(x) for k, x in attrs.items()}
        row["kind"] = kind
        if weight is not None:
            row["weight"] = weight
        expected.append((u, v, row))
    assert edge_rows(h.edges(data=True)) == edge_rows(expected)


def test_graphml_capped_and_odd_characters(tmp_path):
    g = _graph()
    g.add_node("ctl", "sentence", text="bad \x00\x07 chars", blob={"a": [1, 2]})
    g.add_edge("ctl", "s3", "SS", weight=0.1)
    path = tmp_path / "sub" / "cap.graphml"
    summary = export(g, path, max_nodes=6, center="s3")
    h = nx.read_graphml(path, force_multigraph=True)
    assert h.number_of_nodes() == 6 == summary.nodes_shown and "s3" in h
    assert h.graph["nodes_shown"] == 6 and h.graph["nodes_total"] == g.num_nodes()
    assert h.graph["edges_shown"] == h.number_of_edges() < g.num_edges()
    assert "\ufffd" in h.nodes["ctl"]["text"]


def test_html_is_offline_escaped_and_has_legends(tmp_path):
    g = _graph()
    path = tmp_path / "g.html"
    summary = export_html(g, path, title="Title <b>&</b>")
    page = path.read_text(encoding="utf-8")
    assert summary.nodes_shown == g.num_nodes()
    assert page.startswith("<!DOCTYPE html>")
    # Nothing loaded from the network.
    assert "http://" not in page and "https://" not in page
    assert 'src="' not in page and "@import" not in page and "<link" not in page
    assert "url(" not in page
    # The only <script> is ours; hostile text is escaped.
    assert page.count("<script>") == 1
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;quotes&quot;" in page
    assert "<title>Title &lt;b&gt;&amp;&lt;/b&gt;</title>" in page
    # One legend entry per node kind and per edge kind.
    for group, kinds in (("node", g.node_kinds()), ("edge", g.edge_kind_names())):
        found = re.findall(rf'<li data-group="{group}" data-k="\d+" data-kind="([^"]+)"', page)
        assert found == kinds
    assert page.count('class="gx-node ') == g.num_nodes()
    assert page.count('class="gx-edge gx-ek') == g.num_edges()
    assert f"Showing {g.num_nodes()} of {g.num_nodes()} nodes" in page
    # Two kinds on one pair: one straight line and one curve.
    assert re.search(r'class="gx-edge[^"]*" d="M[^"]*Q', page)


def test_html_caps_around_center(tmp_path):
    g = _graph()
    path = tmp_path / "cap.htm"
    summary = export(g, path, max_nodes=7, center=["s12"])
    page = path.read_text(encoding="utf-8")
    assert summary.nodes_shown == 7 and summary.nodes_total == g.num_nodes()
    assert page.count('class="gx-node ') == 7
    assert 'data-id="s12"' in page
    assert f'data-nodes-shown="7" data-nodes-total="{g.num_nodes()}"' in page
    assert f"Showing 7 of {g.num_nodes()} nodes" in page and "neighbourhood of s12" in page
    shown = set(re.findall(r'data-id="([^"]+)"', page))
    assert shown == set(neighbourhood(g, 7, center="s12"))
    # Same input, same bytes (fixed seed, deterministic order).
    export(g, tmp_path / "again.htm", max_nodes=7, center=["s12"])
    assert (tmp_path / "again.htm").read_text(encoding="utf-8") == page


def test_html_small_and_empty_graphs(tmp_path):
    empty = TypedGraph()
    summary = export_html(empty, tmp_path / "empty.html")
    assert (
        summary.nodes_shown == 0 and "Showing 0 of 0 nodes" in (tmp_path / "empty.html").read_text()
    )
    one = TypedGraph()
    one.add_node("only", "chunk")
    export_html(one, tmp_path / "one.html", layout="spring")
    assert 'data-id="only"' in (tmp_path / "one.html").read_text()
    with pytest.raises(ValueError, match="layout"):
        export_html(one, tmp_path / "bad.html", layout="circular")


def test_export_rejects_unknown_suffix(tmp_path):
    with pytest.raises(ValueError, match=r"\.graphml"):
        export(_graph(), tmp_path / "g.png")


def test_viewer_assets_are_package_files(tmp_path):
    """The page's fixed parts come from ``assets/`` (what the wheel ships), filled in full."""
    assets = resources.files("llama_index_graphrag_ext.core.viz") / "assets"
    parts = {
        name: (assets / name).read_text(encoding="utf-8") for name in ("viewer.css", "viewer.js")
    }
    assert "${title}" in (assets / "viewer.html").read_text(encoding="utf-8")
    export_html(_graph(), tmp_path / "g.html")
    page = (tmp_path / "g.html").read_text(encoding="utf-8")
    assert parts["viewer.js"] in page and parts["viewer.css"] in page
    assert "${" not in page and page.endswith("</body></html>\n")


@pytest.mark.skipif(shutil.which("node") is None, reason="node.js not installed")
def test_html_script_is_valid_javascript(tmp_path):
    export_html(_graph(), tmp_path / "g.html")
    page = (tmp_path / "g.html").read_text(encoding="utf-8")
    script = re.search(r"<script>(.*)</script>", page, re.S).group(1)
    (tmp_path / "viewer.js").write_text(script, encoding="utf-8")
    subprocess.run(["node", "--check", str(tmp_path / "viewer.js")], check=True, timeout=30)
