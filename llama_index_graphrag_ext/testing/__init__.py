"""Test helpers that ship with the suite.

* [`ScriptedLLM`][llama_index_graphrag_ext.testing.ScriptedLLM]: a deterministic
  LlamaIndex LLM that answers from a script (unit tests of LLM logic).
* [`BagOfWordsEmbedding`][llama_index_graphrag_ext.testing.BagOfWordsEmbedding]:
  a fast, dependency-free embedder for plumbing tests.
* [`HashEmbedding`][llama_index_graphrag_ext.testing.HashEmbedding]: signed
  hashed bag-of-words vectors of any dimension that count their input (huge
  inputs in tests; ``graphrag-ext scale --embed-model hash:384``).
* [`WireServer`][llama_index_graphrag_ext.testing.wire.server.WireServer]: a real
  OpenAI-compatible HTTP server on loopback (``testing.wire``), for exercising
  the full-LLM tier over a real wire.
"""

from .embeddings import HashEmbedding
from .scripted import BagOfWordsEmbedding, Delay, ScriptedLLM, ScriptExhaustedError

__all__ = [
    "BagOfWordsEmbedding",
    "Delay",
    "HashEmbedding",
    "ScriptExhaustedError",
    "ScriptedLLM",
]
