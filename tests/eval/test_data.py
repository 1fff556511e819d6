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


def test_joined_makes_long_untitled_documents_and_maps_gold(tmp_path):
    bench = load_benchmark(_write(tmp_path / "b", CORPUS, QUESTIONS))
    joined = bench.joined(4)
    assert joined.name == "b-joined4" and [len(p.text.split("\n\n")) for p in joined.passages] == [
        4,
        2,
    ]
    assert all(not p.title for p in joined.passages)
    # Every passage lands in exactly one document, as a "title: text" paragraph.
    paragraphs = [para for p in joined.passages for para in p.text.split("\n\n")]
    assert sorted(paragraphs) == sorted(f"T{i}: text {i}" for i in range(6))
    home = {para: p.id for p in joined.passages for para in p.text.split("\n\n")}
    q1, q2 = joined.questions
    assert q1.gold_ids == tuple(dict.fromkeys([home["T4: text 4"], home["T5: text 5"]]))
    assert q2.gold_ids == (home["T0: text 0"],)
    assert joined.meta["joined"] == {"per_document": 4, "seed": 0}
    # The same seed joins the same way; another seed shuffles otherwise.
    assert [p.text for p in bench.joined(4).passages] == [p.text for p in joined.passages]
    assert {p.text for p in bench.joined(4, seed=1).passages} != {p.text for p in joined.passages}
    with pytest.raises(ValueError, match="at least 2"):
        bench.joined(1)
