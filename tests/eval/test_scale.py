"""Growth curves: corpus synthesis, exponent fits and a tiny end-to-end scale run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llama_index_graphrag_ext.cli import main
from llama_index_graphrag_ext.core.llm.cache import LLMCache
from llama_index_graphrag_ext.eval.data import Passage
from llama_index_graphrag_ext.eval.scale import (
    ScaleConfig,
    cell_key,
    fit_exponent,
    format_scale_table,
    load_pool,
    perturb,
    plot_scale,
    query_set,
    run_scale,
    split_sentences_rule,
    synthesize,
)

LONG_TEXT = " ".join(
    f"Chapter {i} tells how the ferry crossed the river at dawn. The crew counted {i} crates."
    for i in range(40)
)


@pytest.fixture(scope="module")
def book_set(tmp_path_factory):
    """A second benchmark folder holding one long text (cut into pieces) and no gold."""
    folder = tmp_path_factory.mktemp("book-set")
    (folder / "corpus.jsonl").write_text(
        json.dumps({"id": "book", "title": "Ferry log", "text": LONG_TEXT}) + "\n"
    )
    (folder / "questions.jsonl").write_text(
        json.dumps({"id": "q1", "question": "What did the ferry carry?"}) + "\n"
    )
    return folder


@pytest.fixture(scope="module")
def pool_and_sets(musique_slice, book_set):
    return load_pool([musique_slice, book_set], max_chars=300)


def test_pool_prefixes_ids_and_cuts_long_texts(pool_and_sets, musique_slice, book_set):
    pool, sets = pool_and_sets
    ids = [p.id for p in pool]
    assert len(ids) == len(set(ids))
    assert [name for name, _ in sets] == [musique_slice.name, book_set.name]
    pieces = [p for p in pool if p.id.startswith(f"{book_set.name}/book#")]
    assert len(pieces) >= len(LONG_TEXT) // 300
    assert all(len(p.text) <= 300 and p.title == "Ferry log" for p in pieces)
    # The pieces cover the whole book, in order.
    assert " ".join(p.text for p in pieces).split() == LONG_TEXT.split()
    # Gold ids carry the same prefix, so they name passages of the pool.
    questions = query_set(sets, 3)
    assert len(questions) == 3 + 1
    gold = {g for q in questions for g in q.gold_ids}
    assert gold and gold <= set(ids)


@pytest.mark.parametrize("size", [1, 25, 200, 1000])
def test_synthesize_exact_size_unique_ids_deterministic(pool_and_sets, size):
    pool, sets = pool_and_sets
    gold = [g for q in query_set(sets, 2) for g in q.gold_ids]
    corpus = synthesize(pool, size, first=gold, seed=3)
    assert len(corpus) == size
    assert len({p.id for p in corpus}) == size
    again = synthesize(pool, size, first=gold, seed=3)
    assert corpus == again
    if size >= len(gold):
        assert [p.id for p in corpus[: len(set(gold))]] == list(dict.fromkeys(gold))


def test_synthesize_is_nested_and_copies_are_perturbed(pool_and_sets):
    pool, _ = pool_and_sets
    small, big = synthesize(pool, 50), synthesize(pool, 3 * len(pool) + 7)
    assert big[:50] == small
    originals = {p.id: p for p in pool}
    copies = big[len(pool) :]
    assert all("~c" in p.id for p in copies)
    assert {p.id.rsplit("~c", 1)[1] for p in copies} == {"1", "2", "3"}
    changed = 0
    for copy in copies:
        source = originals[copy.id.rsplit("~c", 1)[0]]
        assert copy.title == source.title
        # Only words of the source, at most one sentence or one word fewer.
        assert set(copy.text.split()) <= set(source.text.split())
        changed += copy.text != source.text
    assert changed >= 0.9 * len(copies)
    # A different seed gives a different order.
    assert [p.id for p in synthesize(pool, 50, seed=1)] != [p.id for p in small]


def test_perturb_keeps_sentences_intact_when_it_can():
    text = "Alpha one. Beta two. Gamma three. Delta four."
    copy = perturb(Passage("p", "T", text), copy=2, seed=0)
    assert copy.id == "p~c2"
    kept = split_sentences_rule(copy.text)
    assert len(kept) == 3 and set(kept) < set(split_sentences_rule(text))
    short = perturb(Passage("s", "T", "Only one sentence here."), copy=1)
    assert len(short.text.split()) == 3


def test_synthesize_rejects_bad_input():
    with pytest.raises(ValueError, match="positive"):
        synthesize([Passage("a", "", "x")], 0)
    with pytest.raises(ValueError, match="empty"):
        synthesize([], 5)


@pytest.mark.parametrize("exponent", [0.5, 1.0, 1.3, 2.0])
def test_fit_exponent_recovers_power_laws(exponent):
    sizes = [1000, 4000, 16000, 64000]
    fit = fit_exponent(sizes, [0.02 * n**exponent for n in sizes])
    assert fit["exponent"] == pytest.approx(exponent, abs=1e-6)
    assert fit["r2"] == pytest.approx(1.0)
    assert fit["points"] == 4


def test_fit_exponent_with_noise_and_unusable_points():
    rng = np.random.default_rng(0)
    sizes = [1000, 2000, 4000, 8000, 16000, 32000, 64000]
    noisy = [5e-4 * n**1.2 * float(np.exp(rng.normal(0, 0.05))) for n in sizes]
    fit = fit_exponent(sizes, noisy)
    assert fit["exponent"] == pytest.approx(1.2, abs=0.05)
    assert 0.95 < fit["r2"] <= 1.0
    # Non-positive values (memory lost in noise) are left out.
    assert fit_exponent([10, 20, 40], [0.0, 2.0, 4.0])["points"] == 2
    assert fit_exponent([10, 20], [-1.0, 3.0]) is None


def _config(musique_slice, book_set, **kw) -> ScaleConfig:
    return ScaleConfig(
        methods=["dense", "bm25"],
        sizes=[60, 30],
        benchmarks=[str(musique_slice), str(book_set)],
        queries_per_set=4,
        embed_model="mock:16",
        calibrate_with=None,
        isolate=False,
        calibration_texts=8,
        **kw,
    )


def test_tiny_scale_run_writes_valid_json(musique_slice, book_set, tmp_path):
    out = tmp_path / "scale.json"
    cache = tmp_path / "embed.sqlite"
    report = run_scale(_config(musique_slice, book_set, embed_cache=str(cache)), out=out)
    saved = json.loads(out.read_text())
    assert saved["cells"].keys() == report["cells"].keys()
    assert set(saved["cells"]) == {cell_key(m, s) for m in ("dense", "bm25") for s in (30, 60)}
    for key, row in saved["cells"].items():
        assert "error" not in row, (key, row)
        assert row["chunks"] in (30, 60)
        assert row["queries"] == 5  # 4 musique questions and the book set's one
        assert row["index_seconds"] >= row["index_seconds_no_embed"] >= 0
        assert 0 <= row["p50_ms"] <= row["p95_ms"]
    dense = saved["cells"]["dense@60"]
    assert dense["embedded_texts"] == 60 and dense["dimension"] == 16
    assert dense["vectors_mb"] == pytest.approx(60 * 16 * 4 / 2**20, abs=0.01)
    assert dense["disk_mb"] > 0  # the VectorStoreIndex was persisted and measured
    assert saved["cells"]["bm25@60"]["disk_mb"] is None
    assert "no persistable index" in saved["cells"]["bm25@60"]["persist_note"]
    assert saved["fits"]["dense"]["sizes"] == [30, 60]
    assert saved["fits"]["bm25"]["targets"]["memory_within_2x_vectors_at_largest"] is None
    # The shared cache now holds every chunk's vector.
    assert len(LLMCache(cache)) >= 60

    table = format_scale_table(saved)
    assert "| dense | 30 |" in table and "| bm25 |" in table
    plot_scale(saved, tmp_path / "scale.png")
    assert (tmp_path / "scale.png").stat().st_size > 5000

    # Cells already in the report are kept, not measured again.
    again = run_scale(_config(musique_slice, book_set), out=out)
    assert again["cells"]["dense@30"] == saved["cells"]["dense@30"]


def test_timeout_is_recorded_and_larger_sizes_skipped(musique_slice, book_set, tmp_path):
    config = _config(musique_slice, book_set, timeout=0.2)
    config.methods, config.isolate = ["bm25"], True
    report = run_scale(config, out=tmp_path / "scale.json")
    assert report["cells"]["bm25@30"]["error"].startswith("timeout")
    assert report["cells"]["bm25@60"]["skipped"] == "failed at a smaller size"
    assert "bm25" not in report["fits"]


def test_unknown_method_fails_fast(musique_slice, book_set):
    config = _config(musique_slice, book_set)
    config.methods = ["no-such-method"]
    with pytest.raises(KeyError, match="unknown method"):
        run_scale(config)


def test_cli_scale_runs_a_cell_in_a_child_process(musique_slice, book_set, tmp_path, capsys):
    out = tmp_path / "cli.json"
    code = main(
        [
            "scale",
            "--methods",
            "bm25",
            "--sizes",
            "40",
            "--benchmarks",
            f"{musique_slice},{book_set}",
            "--queries-per-set",
            "2",
            "--embed-model",
            "mock:8",
            "--calibrate-with",
            "none",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    row = json.loads(out.read_text())["cells"]["bm25@40"]
    assert row["queries"] == 3 and row["p50_ms"] > 0
    assert "| bm25 | 40 |" in printed


def test_hash_embedding_is_deterministic_and_word_sensitive():
    from llama_index_graphrag_ext.eval.scale import HashEmbedding, make_embedder

    embed = make_embedder("hash:384")
    assert isinstance(embed, HashEmbedding) and embed.dim == 384
    a, b, c = embed.get_text_embedding_batch(
        ["The ferry crossed the river", "the river: ferry crossed THE", "Quantum chromodynamics"]
    )
    assert len(a) == 384 and np.linalg.norm(a) == pytest.approx(1.0, abs=1e-5)
    assert np.dot(a, b) == pytest.approx(1.0, abs=1e-5)  # same words, any order
    assert np.dot(a, c) < 0.5
    assert HashEmbedding(dim=384).get_query_embedding("The ferry") == embed.get_query_embedding(
        "the ferry"
    )
    assert np.linalg.norm(embed.get_text_embedding("")) == pytest.approx(1.0)


def test_numpy_store_ranks_like_simple_vector_store(bow_embed, musique_slice, tmp_path):
    """The dense baseline's default store (the scale fix) gives SimpleVectorStore's top-k."""
    from llama_index.core.vector_stores import SimpleVectorStore
    from llama_index.core.vector_stores.types import (
        MetadataFilter,
        MetadataFilters,
        VectorStoreQuery,
    )

    from llama_index_graphrag_ext.baselines import DenseRetriever, build_dense_index
    from llama_index_graphrag_ext.baselines.numpy_store import NumpyVectorStore
    from llama_index_graphrag_ext.eval.data import load_benchmark

    bench = load_benchmark(musique_slice)
    docs = bench.documents()
    fast = build_dense_index(docs, bow_embed)
    store = fast.vector_store
    assert isinstance(store, NumpyVectorStore) and len(store) == len(docs)
    slow = build_dense_index(docs, bow_embed, vector_store=SimpleVectorStore())
    for q in bench.questions:
        got = DenseRetriever(fast, similarity_top_k=5).retrieve(q.question)
        want = DenseRetriever(slow, similarity_top_k=5).retrieve(q.question)
        assert [r.node.ref_doc_id for r in got] == [r.node.ref_doc_id for r in want]
        assert [r.score for r in got] == pytest.approx([r.score for r in want], abs=1e-5)

    vector = bow_embed.get_query_embedding(bench.questions[0].question)
    top = store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3))
    first_doc = fast.docstore.get_node(top.ids[0]).ref_doc_id
    store.delete(first_doc)
    assert len(store) == len(docs) - 1
    assert (
        top.ids[0]
        not in store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3)).ids
    )
    only = store.query(
        VectorStoreQuery(query_embedding=vector, similarity_top_k=5, node_ids=top.ids[1:3])
    )
    assert only.ids == top.ids[1:3]

    store.persist(str(tmp_path / "vectors.json"))
    again = NumpyVectorStore.from_persist_path(str(tmp_path / "vectors.json"))
    assert again.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3)).ids == (
        store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3)).ids
    )
    filters = MetadataFilters(filters=[MetadataFilter(key="title", value="x")])
    with pytest.raises(ValueError, match="does not filter"):
        store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3, filters=filters))


def test_metered_embedding_keeps_a_bounded_even_sample_of_texts():
    from llama_index_graphrag_ext.eval.scale import MeteredEmbedding, make_embedder

    metered = MeteredEmbedding(make_embedder("hash:384"), keep_texts=True)
    texts = [f"passage {i} über the river" for i in range(1000)]
    for start in range(0, 1000, 37):  # batches of odd sizes, as builds send them
        metered.get_text_embedding_batch(texts[start : start + 37])
    seen = metered.seen
    assert metered.texts == 1000
    # Every 8th text: the smallest power-of-two stride that keeps at most 128.
    assert seen == texts[::8] and len(seen) == 125
    metered.reset()
    assert metered.texts == 0 and metered.seen == []
    off = MeteredEmbedding(make_embedder("hash:384"))
    off.get_text_embedding_batch(texts[:10])
    assert off.seen == []
