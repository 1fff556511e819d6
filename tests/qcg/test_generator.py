"""Doc2Query generation with a scripted LLM, the Doc2Query-- filter, sentence nodes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import Document, MetadataMode, TextNode
from support import ScriptedLLM

from llama_index_graphrag_ext.core.llm import LLMFallbackError
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.qcg.doc2query import Doc2QueryGenerator
from llama_index_graphrag_ext.qcg.filtering import doc2query_minus, keep_count
from llama_index_graphrag_ext.qcg.query_nodes import QUERY_NODES_KEY, QueryPair, node_text
from llama_index_graphrag_ext.qcg.sentence_nodes import SentenceQueryGenerator

CHUNK = TextNode(
    id_="bridge", text="The Brooklyn Bridge was designed by John Roebling. It opened in 1883."
)


def _json(pairs):
    return json.dumps([{"index": i, "query": q, "answer": a} for i, (q, a) in enumerate(pairs)])


GOOD = _json(
    [
        ("Who designed the Brooklyn Bridge?", "John Roebling"),
        ("When did the Brooklyn Bridge open?", "1883"),
        ("What did John Roebling design?", "the Brooklyn Bridge"),
        ("Which bridge opened in 1883?", "The Brooklyn Bridge"),
        ("What is the weather on Mars?", "cold"),
    ]
)


def test_keep_count_rounds_half_up_and_keeps_one():
    assert keep_count(20, 0.8) == 16
    assert keep_count(3, 0.8) == 2 and keep_count(5, 0.5) == 3
    assert keep_count(1, 0.2) == 1 and keep_count(0, 0.8) == 0


def test_doc2query_minus_keeps_the_top_alpha_in_order():
    chunk = np.array([1.0, 0.0], dtype=np.float32)
    pairs = np.array([[0.1, 0.99], [0.9, 0.44], [0.5, 0.87], [0.95, 0.31]], dtype=np.float32)
    keep, scores = doc2query_minus(pairs, chunk, 0.5)
    assert keep.tolist() == [1, 3] and scores[3] == pytest.approx(0.95)
    keep, _ = doc2query_minus(pairs, chunk, 1.0)
    assert keep.tolist() == [0, 1, 2, 3]


def test_doc2query_minus_judges_a_pair_by_a_long_chunk_s_best_window():
    # A long chunk read in two windows, one per topic; its pooled vector is between them.
    windows = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=np.float32)
    pooled = windows.mean(0) / np.linalg.norm(windows.mean(0))
    pairs = np.array([[0.0, 0.98, 0.2], [0.6, 0.6, 0.53], [0.1, 0.0, 0.99]], dtype=np.float32)
    pairs /= np.linalg.norm(pairs, axis=1, keepdims=True)
    # Against the pooled vector the pair about the second topic loses to a vague one;
    # against the windows it is kept, and its score is its best window's cosine.
    assert doc2query_minus(pairs, pooled, 0.34)[0].tolist() == [1]
    keep, scores = doc2query_minus(pairs, windows, 0.34)
    assert keep.tolist() == [0] and scores[0] == pytest.approx(pairs[0, 1])
    assert doc2query_minus(pairs[:0], windows, 0.5)[0].tolist() == []


def test_node_text_variants():
    pair = QueryPair("c", 0, "Who?", "Ann")
    assert node_text(pair) == "Who? Ann"
    assert node_text(pair, "query") == "Who?" and node_text(pair, "answer") == "Ann"
    assert node_text(pair, separator=" | ") == "Who? | Ann"
    assert node_text(QueryPair("c", 0, "A sentence.", "", "sentence"), "answer") == "A sentence."


def test_generation_parses_filters_and_counts(bow_embed):
    llm = ScriptedLLM([GOOD])
    gen = Doc2QueryGenerator(llm=llm, embed_model=bow_embed, num_pairs=5, alpha=0.8)
    result = gen.generate([CHUNK])
    assert llm.call_count == 1 and "20" not in llm.calls[0] and "5 different" in llm.calls[0]
    assert CHUNK.text in llm.calls[0]
    queries = [p.query for p in result.pairs]
    assert len(queries) == 4 and "What is the weather on Mars?" not in queries  # the off-topic one
    assert result.vectors.shape == (4, bow_embed.dim)
    assert result.stats["pairs_generated"] == 5 and result.stats["kept"] == 4
    assert all(p.filter_score is not None and p.chunk_id == "bridge" for p in result.pairs)


def test_malformed_output_is_reasked_then_parsed(bow_embed):
    llm = ScriptedLLM(
        ["Sorry, I am not sure what you mean.", "Q: Who designed it? A: John Roebling"]
    )
    gen = Doc2QueryGenerator(llm=llm, embed_model=bow_embed, alpha=1.0)
    result = gen.generate([CHUNK])
    assert llm.call_count == 2 and "could not be read" in llm.calls[1]
    assert [(p.query, p.answer) for p in result.pairs] == [("Who designed it?", "John Roebling")]
    assert result.stats["repairs"] == 1


def test_empty_output_falls_back_to_sentences_and_is_counted(bow_embed, caplog):
    llm = ScriptedLLM(["", "   "])
    gen = Doc2QueryGenerator(llm=llm, embed_model=bow_embed, repair_attempts=1)
    result = gen.generate([CHUNK])
    assert result.stats["fallback_chunks"] == 1
    assert [p.kind for p in result.pairs] == ["sentence", "sentence"]
    assert "1 chunk(s) fell back to sentence nodes (empty reply x1)" in caplog.text
    record = gen.llm_steps.record("doc2query")
    assert (record.tier, record.items, record.fallbacks) == ("full-llm", 1, 1)


def test_on_llm_failure_raise(bow_embed):
    with pytest.raises(LLMFallbackError, match="doc2query"):
        Doc2QueryGenerator(
            llm=ScriptedLLM(default="no idea"), embed_model=bow_embed, on_llm_failure="raise"
        ).generate([CHUNK])


def test_llm_errors_are_retried(bow_embed, monkeypatch):
    from llama_index_graphrag_ext.core.llm import RetryPolicy

    monkeypatch.setattr(RetryPolicy, "backoff", lambda self, attempt: 0.0)
    llm = ScriptedLLM([TimeoutError("slow"), GOOD])
    gen = Doc2QueryGenerator(llm=llm, embed_model=bow_embed, num_pairs=5, max_attempts=3)
    assert len(gen.generate([CHUNK]).pairs) == 4 and llm.call_count == 2
    assert gen.usage.retries == 1


def test_realistic_json_shapes_become_pairs(bow_embed):
    wrapped = (
        "Sure! Here are the pairs:\n```json\n"
        '{"qa_pairs": [{"question": "Who designed the bridge?", "answer": "John Roebling"}]}\n'
        "```\nLet me know if you need more."
    )
    numbered = '{"1": {"q": "Who designed it?", "a": "Roebling"}, "2": ["When?", "1883"]}'
    thinking = (
        '<think>I must write JSON.</think>[{"query": "What opened in 1883?", "answer": "It"}]'
    )
    for reply, want in (
        (wrapped, [("Who designed the bridge?", "John Roebling")]),
        (numbered, [("Who designed it?", "Roebling"), ("When?", "1883")]),
        (thinking, [("What opened in 1883?", "It")]),
    ):
        gen = Doc2QueryGenerator(llm=ScriptedLLM([reply]), embed_model=bow_embed, alpha=1.0)
        result = gen.generate([CHUNK])
        assert [(p.query, p.answer) for p in result.pairs] == want
        assert result.stats["fallback_chunks"] == 0


def test_cache_makes_a_rerun_free(bow_embed, tmp_path):
    cache = str(tmp_path / "d2q.sqlite")
    first = ScriptedLLM([GOOD])
    Doc2QueryGenerator(llm=first, embed_model=bow_embed, cache_path=cache).generate([CHUNK])
    second = ScriptedLLM([])  # would raise if called
    result = Doc2QueryGenerator(llm=second, embed_model=bow_embed, cache_path=cache).generate(
        [CHUNK]
    )
    assert second.call_count == 0 and len(result.pairs) == 4
    assert result.stats["cache_hits"] == 1


def test_concurrent_generation_keeps_chunk_order(bow_embed):
    chunks = [TextNode(id_=f"c{i}", text=f"Fact number {i} is about topic {i}.") for i in range(6)]

    def answer(prompt):
        i = next(c for c in range(6) if f"Fact number {c} " in prompt)
        return f"Q: What is fact {i} about? A: topic {i}"

    gen = Doc2QueryGenerator(llm=ScriptedLLM(answer), embed_model=bow_embed, max_concurrency=3)
    result = gen.generate(chunks)
    assert [p.chunk_id for p in result.pairs] == [f"c{i}" for i in range(6)]
    assert all(p.answer == f"topic {p.chunk_id[1:]}" for p in result.pairs)


def test_output_format_auto_and_prompt_mixin(bow_embed):
    gen = Doc2QueryGenerator(llm=ScriptedLLM([GOOD]), embed_model=bow_embed)
    assert gen.resolved_format() == "json"
    assert set(gen.get_prompts()) == {"doc2query_prompt", "doc2query_lines_prompt"}
    from llama_index.core.prompts import PromptTemplate

    gen.update_prompts({"doc2query_prompt": PromptTemplate("Make {num_pairs} for: {chunk}")})
    assert gen.prompt_for("xyz") == "Make 20 for: xyz"
    with pytest.raises(ValueError):
        Doc2QueryGenerator(num_pairs=0)
    with pytest.raises(ValueError):
        Doc2QueryGenerator(alpha=1.5)


def test_generator_inside_ingestion_pipeline(bow_embed):
    llm = ScriptedLLM(
        default="Q: Who designed the bridge? A: Roebling\nQ: When did it open? A: 1883"
    )
    gen = Doc2QueryGenerator(llm=llm, embed_model=bow_embed, alpha=1.0)
    pipeline = IngestionPipeline(transformations=[PassageParser(), gen])
    nodes = pipeline.run(documents=[Document(id_="d", text=CHUNK.text)])
    stored = nodes[0].metadata[QUERY_NODES_KEY]
    assert [d["query"] for d in stored] == ["Who designed the bridge?", "When did it open?"]
    assert QUERY_NODES_KEY not in nodes[0].get_content(metadata_mode=MetadataMode.EMBED)
    assert QUERY_NODES_KEY not in nodes[0].get_content(metadata_mode=MetadataMode.LLM)


def test_sentence_nodes_with_title_prefix():
    chunk = TextNode(
        id_="j",
        text="Journal of X\nThe Journal of X is a journal. It was founded in 1963. Ok.",
        metadata={"title": "Journal of X"},
    )
    result = SentenceQueryGenerator().generate([chunk])
    texts = [p.query for p in result.pairs]
    assert texts == [
        "Journal of X: The Journal of X is a journal.",
        "Journal of X: It was founded in 1963. Ok.",
    ]
    assert all(p.kind == "sentence" and p.node_id.startswith("j::s") for p in result.pairs)
    plain = SentenceQueryGenerator(title_prefix=False, min_chars=0).generate([chunk])
    assert plain.pairs[-1].query == "Ok." and result.vectors is None


def test_sentence_alpha_filter(bow_embed):
    chunk = TextNode(id_="c", text="Cats purr. Cats purr and sleep. Dogs bark loudly at night.")
    result = SentenceQueryGenerator(alpha=0.5, embed_model=bow_embed, min_chars=0).generate([chunk])
    assert len(result.pairs) == 2 and result.vectors.shape == (2, bow_embed.dim)


def test_late_sentence_vectors_come_from_the_chunk_s_own_pass(minilm):
    chunks = [
        TextNode(
            id_="j",
            text="Journal of X\nThe Journal of X is a journal. It was founded in 1963. Ok.",
            metadata={"title": "Journal of X"},
        ),
        TextNode(
            id_="r", text="Rivers\nThe Danube flows through Vienna.", metadata={"title": "Rivers"}
        ),
    ]
    late = SentenceQueryGenerator(vectors="late", embed_model=minilm).generate(chunks)
    separate = SentenceQueryGenerator(embed_model=minilm).generate(chunks)
    # The same nodes; the vectors pool each sentence (and title) in its chunk.
    assert [p.query for p in late.pairs] == [p.query for p in separate.pairs]
    assert late.vectors.shape == (3, 384) and late.stats["late_spans_alone"] == 0
    texts = [SentenceQueryGenerator().text_of(p) for p in late.pairs]
    alone = np.asarray(minilm.get_text_embedding_batch(texts))
    sims = late.vectors @ alone.T
    assert list(sims.argmax(axis=1)) == [0, 1, 2] and sims.diagonal().min() > 0.6
    # The chunk vectors came with them: the chunks' own embeddings.
    plain = minilm.get_text_embedding_batch([c.get_content(MetadataMode.EMBED) for c in chunks])
    assert np.allclose(late.chunk_vectors, plain, atol=1e-5)


def test_late_vectors_without_word_pieces_fall_back_loudly(bow_embed, caplog):
    chunk = TextNode(id_="c", text="Cats purr. Dogs bark loudly at night.")
    result = SentenceQueryGenerator(vectors="late", embed_model=bow_embed).generate([chunk])
    assert result.vectors is None and result.stats["late_unavailable"] == 1
    assert "vectors='late' is unavailable" in caplog.text


def test_late_vectors_fallback_can_be_made_to_raise(bow_embed):
    from llama_index_graphrag_ext.core.late_chunking import LateChunkingUnavailable

    chunk = TextNode(id_="c", text="Cats purr. Dogs bark loudly at night.")
    strict = SentenceQueryGenerator(vectors="late", late_fallback="raise", embed_model=bow_embed)
    with pytest.raises(LateChunkingUnavailable):
        strict.generate([chunk])
