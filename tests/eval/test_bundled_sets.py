"""The dev sets the docs use travel with the checkout, and larger ones convert from their sources."""

from __future__ import annotations

import importlib.util
import json

import pytest

from llama_index_graphrag_ext.cli import main
from llama_index_graphrag_ext.eval.data import BUNDLED, bundled_sets, find_benchmark, load_benchmark


@pytest.mark.parametrize("name", ["musique-100", "2wiki-101"])
def test_a_bundled_set_is_found_by_name_and_matches_its_meta(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # any working folder
    assert name in bundled_sets()
    bench = load_benchmark(name)
    meta = json.loads((find_benchmark(name) / "meta.json").read_text())
    assert "license" in meta and "source" in meta
    assert (len(bench.passages), len(bench.questions)) == (meta["passages"], meta["questions"])


def test_an_unknown_set_names_the_bundled_ones():
    with pytest.raises(FileNotFoundError, match="bundled sets: 2wiki-101, musique-100"):
        find_benchmark("musique-9000")


def test_bench_runs_on_a_bundled_set_from_any_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["bench", "--data", "musique-100", "--methods", "bm25", "--limit", "3"]
    assert main([*argv, "--max-passages", "60", "--quiet", "--out", "r.json"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["questions"] == 3 and "recall@5" in report["methods"]["bm25"]


def _convert():
    spec = importlib.util.spec_from_file_location("convert", BUNDLED / "convert.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_musique_source_rows_convert_to_the_format(tmp_path):
    row = {
        "id": "2hop__1_2",
        "question": "Where was the author of Dune born?",
        "answer": "Tacoma",
        "answer_aliases": ["Tacoma, Washington"],
        "answerable": True,
        "paragraphs": [
            {
                "title": "Dune",
                "paragraph_text": "Dune was written by Frank Herbert.",
                "is_supporting": True,
            },
            {
                "title": "Frank Herbert",
                "paragraph_text": "Herbert was born in Tacoma.",
                "is_supporting": True,
            },
            {"title": "Noise", "paragraph_text": "Unrelated text.", "is_supporting": False},
        ],
    }
    source = tmp_path / "musique.jsonl"
    source.write_text(json.dumps(row) + "\n" + json.dumps({**row, "id": "2hop__3_4"}) + "\n")
    meta = _convert().convert("musique", source, tmp_path / "out", limit=None)
    assert meta["passages"] == 3 and meta["questions"] == 2  # shared paragraphs kept once
    bench = load_benchmark(tmp_path / "out")
    assert bench.questions[0].gold_ids == ("p0", "p1")
    assert bench.questions[0].answers == ("Tacoma", "Tacoma, Washington")
    assert bench.questions[0].type == "2hop"


def test_2wiki_source_rows_convert_to_the_format(tmp_path):
    rows = [
        {
            "_id": "q1",
            "type": "compositional",
            "question": "Who is the father of the director of Film X?",
            "answer": "John Doe",
            "context": [
                ["Film X", ["Film X is directed by Jane Doe."]],
                ["Jane Doe", ["Her father is John Doe.", "She lives in Rome."]],
            ],
            "supporting_facts": [["Film X", 0], ["Jane Doe", 0]],
        }
    ]
    source = tmp_path / "dev.json"
    source.write_text(json.dumps(rows))
    _convert().main(["2wiki", str(source), "--out", str(tmp_path / "out")])
    bench = load_benchmark(tmp_path / "out")
    assert [p.text for p in bench.passages][1] == "Her father is John Doe. She lives in Rome."
    assert (
        bench.questions[0].gold_ids == ("p0", "p1") and bench.questions[0].type == "compositional"
    )
