"""ChainRAG in the benchmark runner: the retriever's names and edge ablations, and the engine."""

from __future__ import annotations

from llama_index_graphrag_ext.eval.registry import REGISTRY


def test_registered_in_the_runner():
    spec, captured = REGISTRY.resolve("chainrag-retriever-no-ss")
    assert spec.tier == "llm-free" and captured == {"drop": "ss"}
    assert REGISTRY.resolve("chainrag-retriever")[1] == {}
    assert REGISTRY.resolve("chainrag")[0].tier == "llm"
