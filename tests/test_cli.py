import json

import pytest

from llama_index_graphrag_ext.cli import main
from llama_index_graphrag_ext.core.graph import TypedGraph
from llama_index_graphrag_ext.core.index_persist import GRAPH_FILE
from llama_index_graphrag_ext.core.persist import atomic_dir, write_manifest


def test_bench_list(capsys):
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert "dense" in out and "bm25" in out


def test_bench_writes_table_json_and_plot(musique_slice, tmp_path, capsys):
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    code = main(
        [
            "bench",
            "--data",
            str(musique_slice),
            "--methods",
            "bm25",
            "--limit",
            "4",
            "--out",
            str(out_json),
            "--plot",
            str(out_png),
            "--quiet",
        ]
    )
    assert code == 0
    table = capsys.readouterr().out
    assert "| bm25 | llm-free |" in table
    report = json.loads(out_json.read_text())
    assert report["questions"] == 4 and set(report["methods"]) == {"bm25"}
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_rejects_unknown_methods_and_bad_sets(musique_slice, capsys):
    for methods, sets, message in (
        ("nope", [], "unknown method 'nope'"),
        ("qcg-sentences", [], "unknown method 'qcg-sentences' (now qcg)"),
        ("qcg:nope", [], "no preset 'nope'"),
        ("bm25", ["--set", "gamma=1"], "--set gamma: no method of this run"),
    ):
        argv = ["bench", "--data", str(musique_slice), "--methods", methods, "--quiet", *sets]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and "Traceback" not in err
    with pytest.raises(SystemExit, match="key=value"):
        main(["bench", "--data", str(musique_slice), "--methods", "bm25", "--set", "oops"])


def _persisted_graph_index(folder):
    graph = TypedGraph()
    graph.add_node("c1", "chunk", text="Paris is the capital of France.")
    graph.add_node("q1", "query", text="What is the capital of France?")
    graph.add_node("q2", "query", text="Which city is France's capital?")
    graph.add_edge("q1", "c1", "inter")
    graph.add_edge("q1", "q2", "intra", 0.9)
    with atomic_dir(folder) as tmp:
        write_manifest(tmp, "qcg-test", 1)
        graph.save(tmp / GRAPH_FILE)
    return folder


def test_viz_exports_html_and_graphml(tmp_path, capsys):
    index_dir = _persisted_graph_index(tmp_path / "idx")
    assert main(["viz", str(index_dir), "--out", str(tmp_path / "g.html")]) == 0
    page = (tmp_path / "g.html").read_text()
    assert "qcg-test index" in page and "Paris is the capital" in page and "https://" not in page
    assert (
        main(
            [
                "viz",
                str(index_dir),
                "--out",
                str(tmp_path / "g.graphml"),
                "--center",
                "q2",
                "--max-nodes",
                "2",
            ]
        )
        == 0
    )
    assert "Showing 2 of 3 nodes" in capsys.readouterr().out


def test_viz_errors_are_one_line(tmp_path, capsys):
    assert main(["viz", str(tmp_path), "--out", str(tmp_path / "g.html")]) == 2
    assert "no persisted index" in capsys.readouterr().err
    index_dir = _persisted_graph_index(tmp_path / "idx")
    assert main(["viz", str(index_dir), "--out", str(tmp_path / "g.html"), "--center", "zz"]) == 2
    assert "unknown centre" in capsys.readouterr().err
    assert main(["viz", str(index_dir), "--out", str(tmp_path / "g.png")]) == 2
    err = capsys.readouterr().err
    assert "unsupported suffix" in err and "Traceback" not in err


def test_judge_subcommand_is_wired(capsys):
    with pytest.raises(SystemExit):
        main(["judge", "--help"])
    out = capsys.readouterr().out
    assert "--a {fgrag,naive}" in out and "--judge-llm" in out
    from llama_index_graphrag_ext.eval.judge import SYSTEMS

    assert sorted(SYSTEMS) == ["fgrag", "naive"]  # the choices --help lists, kept by hand
