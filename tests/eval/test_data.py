import json

import pytest

from llama_index_graphrag_ext.eval.data import load_benchmark


def _write(folder, corpus, questions):
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in questions))
    return folder


CORPUS = [{"id": f"p{i}", "title": f"T{i}", "text": f"text {i}"} for i in range(6)]
QUESTIONS = [
    {"id": "q1", "question": "?", "answers": ["a"], "gold_ids": ["p4", "p5"], "type": "2hop"},
    {"id": "q2", "question": "?", "answers": [], "gold_ids": ["p0"], "type": "2hop"},
]


def test_load_and_documents(tmp_path):
    bench = load_benchmark(_write(tmp_path / "b", CORPUS, QUESTIONS))
    assert bench.name == "b" and len(bench.passages) == 6
    doc = bench.documents()[1]
    assert doc.doc_id == "p1" and doc.text == "T1\ntext 1" and doc.metadata["title"] == "T1"
    assert "T1" not in doc.get_content(metadata_mode="embed").split("\n", 1)[1]


def test_subset_keeps_gold_passages(tmp_path):
    bench = load_benchmark(_write(tmp_path / "b", CORPUS, QUESTIONS))
    small = bench.subset(limit=1, max_passages=3)
    assert len(small.questions) == 1
    assert {p.id for p in small.passages} == {"p4", "p5", "p0"}


def test_without_titles_drops_the_title_line_and_field_and_keeps_gold(tmp_path):
    bench = load_benchmark(_write(tmp_path / "b", CORPUS, QUESTIONS)).without_titles()
    assert bench.name == "b-no-titles"
    doc = bench.documents()[1]
    assert doc.text == "text 1" and not doc.metadata.get("title")
    assert [q.gold_ids for q in bench.questions] == [("p4", "p5"), ("p0",)]


def test_bad_folders_give_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="benchmark folder"):
        load_benchmark(tmp_path)
    dup = _write(tmp_path / "dup", [*CORPUS, CORPUS[0]], QUESTIONS)
    with pytest.raises(ValueError, match="duplicate passage id"):
        load_benchmark(dup)
    missing = _write(tmp_path / "missing", CORPUS[:2], QUESTIONS)
    with pytest.raises(ValueError, match="gold ids are not in the corpus"):
        load_benchmark(missing)
    broken = _write(tmp_path / "broken", CORPUS, QUESTIONS)
    (broken / "questions.jsonl").write_text('{"id": 1\n')
    with pytest.raises(ValueError, match="questions.jsonl:1"):
        load_benchmark(broken)
