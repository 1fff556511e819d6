"""Graph-RAG methods as LlamaIndex components."""

__version__ = "0.1.0"
