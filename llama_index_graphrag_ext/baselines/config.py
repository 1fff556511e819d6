"""The baselines' settings: dense, BM25 and the LlamaIndex hybrid (each a method of its own)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..core.config import MethodConfig, Preset, Section


class DenseSettings(Section):
    """What the vectors are of, and how many are read per passage asked for."""

    nodes: Literal["chunks", "sentences"] = Field(
        "chunks",
        description="One vector per chunk, or per sentence (LlamaIndex's "
        "SentenceWindowNodeParser: a passage ranks by its best sentence).",
    )
    window_size: int = Field(1, ge=0, description="Sentences: neighbours kept for the answer.")
    sentences_per_passage: int = Field(
        5, gt=0, description="Sentences: sentences retrieved per passage asked for."
    )


class DenseConfig(MethodConfig):
    """Dense top-k cosine retrieval with the same embedder as every method."""

    retrieval: DenseSettings = DenseSettings()
    presets = {
        "default": Preset("One vector per chunk (LlamaIndex's VectorStoreIndex)."),
        "sentences": Preset(
            "One vector per sentence: what sentence granularity gives without a graph.",
            {"nodes": "sentences"},
        ),
    }


class BM25Settings(Section):
    """Okapi BM25's two constants."""

    k1: float = Field(1.5, ge=0, description="Term-frequency saturation.")
    b: float = Field(0.75, ge=0, le=1, description="Length normalisation.")


class BM25Config(MethodConfig):
    """Okapi BM25 over title and text."""

    bm25: BM25Settings = BM25Settings()
    presets = {"default": Preset("k1 = 1.5, b = 0.75 (Lucene's defaults are 1.2 and 0.75).")}


class HybridConfig(MethodConfig):
    """LlamaIndex's BM25 and vector retrievers fused by reciprocal rank, one query."""

    presets = {"default": Preset("The hybrid as LlamaIndex documents it (RRF, k = 60).")}
