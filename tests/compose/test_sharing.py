"""Several indexes over one corpus: shared embeddings and spaCy parses change costs, not results."""

from __future__ import annotations

import pytest
from llama_index.core import Document

from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
from llama_index_graphrag_ext.compose.sharing import SharedResources
from llama_index_graphrag_ext.core.llm.cache import LLMCache
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.core.text import (
    DEFAULT_ENTITY_LABELS,
    ParseCache,
    analyze_batch,
    load_spacy,
    shared_parses,
)
from llama_index_graphrag_ext.cue import MultiPartiteIndex
from llama_index_graphrag_ext.fgrag import FGRAGIndex
from llama_index_graphrag_ext.fgrag.extract import CooccurrenceExtractor

DOCS = [
    Document(id_="curie", text="Marie Curie studied radioactivity in Paris. She won in 1911."),
    Document(id_="sorbonne", text="Pierre Curie taught physics at the Sorbonne in Paris."),
    Document(id_="bees", text="Beekeepers in Ohio sell raw honey. Candle makers buy beeswax."),
]
QUESTION = "Where did Pierre Curie teach physics?"


@pytest.fixture(scope="module")
def nlp():
    return load_spacy()


def test_parse_cache_analyses_each_text_once_and_filters_labels_on_the_way_out(nlp):
    texts = [d.text for d in DOCS]
    plain_all = analyze_batch(texts, nlp)
    plain_named = analyze_batch(texts, nlp, labels={"PERSON"})
    with shared_parses() as cache:
        first = analyze_batch(texts, nlp)
        assert (cache.hits, cache.misses) == (0, 3)
        named = analyze_batch([texts[0], texts[1], texts[0]], nlp, labels={"PERSON"})
        assert (cache.hits, cache.misses) == (3, 3)
    assert first == plain_all
    assert named == [plain_named[0], plain_named[1], plain_named[0]]
    # a caller editing its result does not change what the next caller gets
    named[0].entities.clear()
    with shared_parses(cache):
        again = analyze_batch([texts[0]], nlp, labels={"PERSON"})
    assert again[0] == plain_named[0]
    # outside the block nothing is cached
    analyze_batch(texts, nlp)
    assert cache.misses == 3


def test_parse_cache_is_per_pipeline(nlp):
    import spacy

    blank = spacy.blank("en")
    blank.add_pipe("sentencizer")
    cache = ParseCache()
    with shared_parses(cache):
        analyze_batch([DOCS[0].text], nlp)
        no_ner = analyze_batch([DOCS[0].text], blank)
    assert cache.misses == 2 and no_ner[0].entities == []


def test_shared_resources_build_the_same_indexes_for_less(bow_embed, tmp_path):
    def build(embed_model):
        # The parser's sentences, as ChainRAG's: the two can share one spaCy pass.
        cue = MultiPartiteIndex.from_documents(
            DOCS,
            embed_model=embed_model,
            transformations=[PassageParser()],
            alpha=0.0,
            sentence_splitter="model",
        )
        chain = SentenceGraphIndex.from_documents(
            DOCS, embed_model=embed_model, transformations=[PassageParser()]
        )
        return cue, chain

    def ranked(index):
        return [
            r.node.ref_doc_id for r in index.as_retriever(similarity_top_k=3).retrieve(QUESTION)
        ]

    separate = build(bow_embed)
    shared = SharedResources(bow_embed, cache_dir=tmp_path)
    with shared.sharing():
        together = build(shared.embed_model)
    stats = shared.stats()
    assert stats["parse_misses"] == len(DOCS)  # CUE parsed the passages ...
    assert stats["parse_hits"] == len(DOCS)  # ... and ChainRAG reused every parse
    assert stats["embedding_hits"] > 0  # the sentences both methods embed
    assert (tmp_path / "embeddings.sqlite").exists()
    assert ranked(together[0]) == ranked(separate[0])
    chain_separate = [r.node.ref_doc_id for r in separate[1].as_retriever().retrieve(QUESTION)]
    chain_together = [r.node.ref_doc_id for r in together[1].as_retriever().retrieve(QUESTION)]
    assert chain_together == chain_separate


def test_a_parse_is_reused_only_with_the_same_sentence_splitter(bow_embed):
    shared = SharedResources(bow_embed)
    with shared.sharing():
        MultiPartiteIndex.from_documents(
            DOCS, embed_model=shared.embed_model, transformations=[PassageParser()], alpha=0.0
        )  # rule sentences (the default): NER alone
        SentenceGraphIndex.from_documents(
            DOCS, embed_model=shared.embed_model, transformations=[PassageParser()]
        )  # the parser's sentences
    assert shared.stats()["parse_misses"] == 2 * len(DOCS)
    assert shared.stats()["parse_hits"] == 0


def test_fgrag_with_rule_sentences_reuses_cue_rags_parses(bow_embed):
    def entities(index):
        return sorted(index.graph_snapshot().names)

    shared = SharedResources(bow_embed)
    with shared.sharing():
        MultiPartiteIndex.from_documents(
            DOCS, embed_model=shared.embed_model, transformations=[PassageParser()], alpha=0.0
        )
        fg = FGRAGIndex.from_documents(
            DOCS,
            embed_model=shared.embed_model,
            transformations=[PassageParser()],
            kg_extractors=[CooccurrenceExtractor(sentence_splitter="rule")],
        )
    assert shared.stats()["parse_hits"] == len(DOCS)
    # The same NER either way: the splitter changes sentence scopes, not the entities.
    parsed = FGRAGIndex.from_documents(
        DOCS,
        embed_model=bow_embed,
        transformations=[PassageParser()],
        kg_extractors=[CooccurrenceExtractor(sentence_splitter="model")],
    )
    assert entities(fg) == entities(parsed) and entities(fg)


def test_llm_cache_location(bow_embed, tmp_path):
    assert SharedResources(bow_embed).llm_cache_path is None
    assert SharedResources(bow_embed).llm_cache() is None
    shared = SharedResources(bow_embed, cache_dir=tmp_path / "c")
    assert shared.llm_cache_path == str(tmp_path / "c" / "llm.sqlite")
    assert isinstance(shared.llm_cache(), LLMCache)
    assert SharedResources(shared.embed_model).embed_model is shared.embed_model  # no double wrap


def test_default_entity_labels_survive_sharing(nlp):
    with shared_parses():
        out = analyze_batch([DOCS[0].text], nlp, labels=set(DEFAULT_ENTITY_LABELS))
    assert {e.label for e in out[0].entities} <= set(DEFAULT_ENTITY_LABELS)
