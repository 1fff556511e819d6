"""``graphrag-ext viz`` on the folders users have: drawn, or one clear error line."""

from __future__ import annotations

import json

import pytest

from llama_index_graphrag_ext.cli import main
from llama_index_graphrag_ext.core.graph import TypedGraph
from llama_index_graphrag_ext.core.viz import neighbourhood

EMBED = ["--embed-model", "hash:384", "--quiet"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("viz")
    docs = root / "docs"
    docs.mkdir()
    (docs / "curie.txt").write_text(
        "Marie Curie studied radioactivity in Paris with Pierre Curie.\n"
    )
    (docs / "parkes.txt").write_text("The Parkes telescope stands in New South Wales, Australia.\n")
    out = {}
    for method in ("cue", "dense", "fgrag"):
        out[method] = root / method
        assert (
            main(["index", str(docs), "--method", method, "--out", str(out[method]), *EMBED]) == 0
        )
    return out


def test_the_folder_index_wrote_is_drawn_with_entities_by_name(built, tmp_path, capsys):
    page = tmp_path / "cue.html"
    assert main(["viz", str(built["cue"]), "--out", str(page)]) == 0
    html = page.read_text()
    assert "Marie Curie" in html and "Parkes" in html


def test_fgrag_is_drawn(built, tmp_path, capsys):
    page = tmp_path / "fgrag.graphml"
    assert main(["viz", str(built["fgrag"]), "--out", str(page)]) == 0
    assert "Marie Curie" in page.read_text()


def test_a_question_centres_the_view_on_its_evidence(built, tmp_path, capsys):
    capsys.readouterr()
    assert main(["query", str(built["cue"]), "telescope", "--no-answer", "--json"]) == 0
    chunk = json.loads(capsys.readouterr().out)["passages"][0]["chunk_id"]
    page = tmp_path / "q.graphml"
    argv = ["viz", str(built["cue"]), "--out", str(page), "--max-nodes", "3"]
    assert main([*argv, "--query", "telescope", "--top-k", "1"]) == 0
    assert "centred on the 1 passage(s)" in capsys.readouterr().out
    assert chunk in page.read_text()


@pytest.mark.parametrize(
    ("which", "extra", "said"),
    [
        ("dense", [], "has no graph to draw"),
        ("cue", ["--center", "no-such-node"], "unknown centre node"),
    ],
)
def test_what_cannot_be_drawn_is_one_line(built, tmp_path, capsys, which, extra, said):
    code = main(["viz", str(built[which]), "--out", str(tmp_path / "x.html"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and said in err and "Traceback" not in err and err.count("\n") == 1


def test_the_default_view_is_not_one_hub_and_its_leaves():
    graph = TypedGraph()
    graph.add_node("hub", "entity", name="Hub")
    for i in range(200):  # a bibliography: 200 lines tied to one hub
        graph.add_node(f"line{i}", "unit")
        graph.add_edge("hub", f"line{i}", "mentions")
    for c in range(6):  # the chunks, each with a few entities
        graph.add_node(f"chunk{c}", "chunk")
        graph.add_edge("hub", f"chunk{c}", "mentions")
        for e in range(3):
            graph.add_node(f"e{c}-{e}", "entity")
            graph.add_edge(f"chunk{c}", f"e{c}-{e}", "mentions")
    shown = neighbourhood(graph, max_nodes=60)
    assert {f"chunk{c}" for c in range(6)} <= set(shown)
    assert sum(n.startswith("line") for n in shown) < 40
