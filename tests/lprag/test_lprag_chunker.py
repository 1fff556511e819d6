"""LLMAtomicChunker: parsing (good, malformed, empty), fallbacks, provenance and order."""

from __future__ import annotations

import pytest
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import Document, NodeRelationship
from support import ScriptedLLM

from llama_index_graphrag_ext.core.llm import LLMFallbackError, is_embedded
from llama_index_graphrag_ext.lprag import LLMAtomicChunker, parse_bracketed_items

GOOD = """[Sentence 1]
Crux is an American comic book published by CrossGen.
[Extracted Chunks in Sentence 1]
[Crux is an American comic book.]
[Crux was published by CrossGen.]
[Crux was published by CrossGen.]
"""

DOC = Document(
    id_="crux",
    text="Crux is an American comic book published by CrossGen. It ran from 2001 to 2004.",
)


def test_parse_keeps_items_and_drops_headers_and_duplicates():
    assert parse_bracketed_items(GOOD) == [
        "Crux is an American comic book.",
        "Crux was published by CrossGen.",
    ]
    assert parse_bracketed_items("Here you go:\n1. First fact.\n2. Second fact.") == [
        "First fact.",
        "Second fact.",
    ]
    assert parse_bracketed_items("") == []
    assert parse_bracketed_items("[Sentence 2]\n[Questions Chunk 1]\n[ab]") == []


def test_llm_chunks_keep_source_and_order():
    llm = ScriptedLLM([GOOD])
    nodes = LLMAtomicChunker(llm=llm).get_nodes_from_documents([DOC])
    assert [n.text for n in nodes] == [
        "Crux is an American comic book.",
        "Crux was published by CrossGen.",
    ]
    assert all(n.ref_doc_id == "crux" for n in nodes)
    assert [n.metadata["lp_position"] for n in nodes] == [0, 1]
    assert nodes[0].relationships[NodeRelationship.NEXT].node_id == nodes[1].node_id
    assert nodes[0].metadata["lp_origin"] == "llm"
    assert "lp_position" in nodes[0].excluded_embed_metadata_keys
    assert llm.call_count == 1


def test_malformed_answer_and_failed_call_fall_back_to_sentences():
    chunker = LLMAtomicChunker(llm=ScriptedLLM(["[Sentence 1]\n"]))
    nodes = chunker.get_nodes_from_documents([DOC])
    assert [n.text for n in nodes] == [
        "Crux is an American comic book published by CrossGen.",
        "It ran from 2001 to 2004.",
    ]
    assert chunker.stats["fallback_paragraphs"] == 1 and chunker.stats["llm_paragraphs"] == 0
    record = chunker.llm_steps.record("atomic-chunks")
    assert (record.tier, record.items, record.fallbacks) == ("full-llm", 1, 1)
    assert dict(record.reasons) == {"unusable reply": 1}
    failing = LLMAtomicChunker(llm=ScriptedLLM([ValueError("boom")]))
    failing_nodes = failing.get_nodes_from_documents([DOC])
    assert len(failing_nodes) == 2 and failing.stats["failures"] == 1
    assert dict(failing.llm_steps.record("atomic-chunks").reasons) == {"ValueError": 1}
    strict = LLMAtomicChunker(llm=ScriptedLLM(["[Sentence 1]\n"]), on_llm_failure="raise")
    with pytest.raises(LLMFallbackError, match="paragraph"):
        strict.get_nodes_from_documents([DOC])


def test_no_llm_empty_document_and_pipeline(monkeypatch):
    monkeypatch.setenv("GRAPHRAG_LLM", "none")  # the rule resolves no LLM at all
    chunker = LLMAtomicChunker()
    docs = [DOC, Document(id_="blank", text="   ")]
    nodes = IngestionPipeline(transformations=[chunker]).run(documents=docs)
    assert len(nodes) == 2 and {n.ref_doc_id for n in nodes} == {"crux"}
    assert chunker.stats["paragraphs"] == 1
    assert chunker.llm_steps.record("atomic-chunks").tier == "llm-free"


def test_paragraphs_are_separate_calls_and_embedded_llm_is_detected():
    doc = Document(id_="two", text="First paragraph here.\n\nSecond paragraph here.")
    llm = ScriptedLLM({"First": "[First fact.]", "Second": "[Second fact.]"})
    nodes = LLMAtomicChunker(llm=llm).get_nodes_from_documents([doc])
    assert [n.text for n in nodes] == ["First fact.", "Second fact."]
    assert llm.call_count == 2
    smol = ScriptedLLM("[x]", model_name="SmolLM2-135M-Instruct-Q4_1.gguf")
    assert is_embedded(smol) and not is_embedded(llm)
    chunker = LLMAtomicChunker(llm=smol)
    fallback = chunker.get_nodes_from_documents([DOC])
    assert smol.call_count == 0 and len(fallback) == 2
    record = chunker.llm_steps.record("atomic-chunks")
    assert record.tier == "llm-free" and "cannot write JSON" in record.note
