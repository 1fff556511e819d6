"""Test tools (not installed with the package).

* ``ScriptedLLM``: a deterministic LlamaIndex LLM that answers from a script
  (unit tests of LLM logic).
* ``BagOfWordsEmbedding``: a fast, dependency-free embedder for plumbing tests.
* ``support.wire``: a real OpenAI-compatible HTTP server on loopback, and
  ``support.replies``: replies shaped like a capable model's, for the full-LLM
  tier over a real wire.
* ``support.llama_server``: llama.cpp's own server with the embedded SmolLM2.
"""

from .scripted import BagOfWordsEmbedding, Delay, ScriptedLLM, ScriptExhaustedError

__all__ = [
    "BagOfWordsEmbedding",
    "Delay",
    "ScriptExhaustedError",
    "ScriptedLLM",
]
