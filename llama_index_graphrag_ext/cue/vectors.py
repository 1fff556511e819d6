"""The chunk, knowledge-unit and entity vectors of an insert (CUE-RAG §3.2, Alg. 1 line 15).

The paper embeds each text on its own (``separate``). With ``late`` (ours) the chunks
are read once and a unit's or entity's vector is the mean of its word pieces in that
pass (:mod:`~..core.late_chunking`): a unit in the first chunk it was found in, an
entity at its first mention. What is not a span of its chunk (an LLM-written
statement) is embedded on its own (``late_spans_alone``). Long chunks also keep their
windows' vectors (:mod:`~..core.windows`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from ..core.embeddings import embed_texts
from ..core.late_chunking import LateChunkingUnavailable, embed_spans
from ..core.windows import embed_with_windows
from .layers import GrowthBatch

logger = logging.getLogger(__name__)


def index_vectors(
    embed_model: BaseEmbedding,
    chunk_texts: Sequence[str],
    growth: GrowthBatch,
    first_chunk_row: int,
    *,
    units: str = "separate",
    entities: str = "separate",
    on_unavailable: str = "separate",
    show_progress: bool = False,
) -> tuple[
    np.ndarray, np.ndarray | None, np.ndarray | None, list[np.ndarray | None], dict[str, Any]
]:
    """``(chunk_vectors, unit_vectors, entity_vectors, chunk_windows, stats)`` of a batch.

    Units and entities in ``growth`` order (None where there is none); per chunk, its
    windows' vectors or None. An embedder without word pieces embeds everything
    separately (warned, ``late_unavailable``), or raises with ``on_unavailable="raise"``.
    """
    for name, mode in (("unit_vectors", units), ("entity_vectors", entities)):
        if mode not in ("separate", "late"):
            raise ValueError(f"{name} must be 'separate' or 'late', not {mode!r}")
    stats: dict[str, Any] = {}
    late_units = units == "late" and bool(growth.unit_texts)
    late_entities = entities == "late" and bool(growth.entity_names)
    chunk_vectors = unit_vectors = entity_vectors = windows = None
    if late_units or late_entities:
        try:
            chunk_vectors, windows, pooled, stats = _late(
                embed_model,
                chunk_texts,
                growth,
                first_chunk_row,
                late_units,
                late_entities,
                show_progress,
            )
            unit_vectors = pooled.get("units")
            entity_vectors = pooled.get("entities")
        except LateChunkingUnavailable as err:
            if on_unavailable == "raise":
                raise
            logger.warning(
                "CUE index: late vectors are unavailable with %s (%s); "
                "%d unit(s) and %d entity name(s) embedded separately",
                type(embed_model).__name__,
                err,
                len(growth.unit_texts) if late_units else 0,
                len(growth.entity_names) if late_entities else 0,
            )
            stats = {"late_unavailable": len(chunk_texts)}
    if chunk_vectors is None:
        chunk_vectors, windows = embed_with_windows(
            embed_model, chunk_texts, show_progress=show_progress, desc="Chunks"
        )
    if unit_vectors is None and growth.unit_texts:
        unit_vectors = embed_texts(
            embed_model, growth.unit_texts, show_progress=show_progress, desc="Units"
        )
    if entity_vectors is None and growth.entity_names:
        entity_vectors = embed_texts(
            embed_model, growth.entity_names, show_progress=show_progress, desc="Entities"
        )
    stats["chunk_windows"] = sum(len(w) for w in windows if w is not None)
    return chunk_vectors, unit_vectors, entity_vectors, windows, stats


def _late(
    embed_model: BaseEmbedding,
    chunk_texts: Sequence[str],
    growth: GrowthBatch,
    first_chunk_row: int,
    late_units: bool,
    late_entities: bool,
    show_progress: bool,
) -> tuple[np.ndarray, list[np.ndarray | None], dict[str, np.ndarray], dict[str, Any]]:
    first_unit = growth.first_unit_row
    home: dict[int, int] = {}  # new unit's position -> its first chunk's position
    for pairs in growth.unit_chunk:
        for unit_row, chunk_row in pairs.tolist():
            position = unit_row - first_unit
            if 0 <= position < len(growth.unit_texts) and position not in home:
                home[position] = chunk_row - first_chunk_row
    spans: list[list[list[tuple[int, int]]]] = [[] for _ in chunk_texts]
    fallback: list[list[str]] = [[] for _ in chunk_texts]

    def add(chunk: int, found: tuple[int, int] | None, text: str) -> tuple[int, int]:
        spans[chunk].append([found or (0, 0)])  # (0, 0) pools nothing: embedded alone
        fallback[chunk].append(text)
        return chunk, len(spans[chunk]) - 1

    # Units in their first chunk, in order (each search resumes where the last ended).
    cursors = [0] * len(chunk_texts)
    where: list[tuple[int, int] | None] = []
    unit_slots = []
    for position, text in enumerate(growth.unit_texts):
        chunk = home.get(position, 0)
        found = _find(chunk_texts[chunk], text, cursors[chunk])
        if found is not None:
            cursors[chunk] = found[1]
        where.append(found)
        if late_units:
            unit_slots.append(add(chunk, found, text))
    entity_slots = []
    if late_entities:
        # An entity is pooled in its first mentioning unit made here (one of an earlier
        # batch has no chunk here), else anywhere in that unit's chunk.
        first_entity = growth.first_entity_row
        mention: dict[int, int] = {}
        for pairs in growth.unit_entity:
            for unit_row, entity_row in pairs.tolist():
                if unit_row - first_unit in home:
                    mention.setdefault(entity_row - first_entity, unit_row - first_unit)
        for position, name in enumerate(growth.entity_names):
            unit = mention.get(position, -1)
            if unit not in home:  # only in units of an earlier batch or insert
                entity_slots.append(add(0, None, name))
                continue
            chunk, span = home[unit], where[unit]
            text = chunk_texts[chunk]
            found = _find(text, name, span[0]) if span else None
            if found is None or (span and found[0] >= span[1]):
                found = _find(text, name, 0)
            entity_slots.append(add(chunk, found, name))
    result = embed_spans(
        embed_model, chunk_texts, spans, fallback, show_progress=show_progress, desc="Chunks (late)"
    )

    def gather(slots: list[tuple[int, int]]) -> np.ndarray:
        return np.vstack([result.span_vectors[c][j][None, :] for c, j in slots])

    pooled = {}
    if late_units:
        pooled["units"] = gather(unit_slots)
    if late_entities:
        pooled["entities"] = gather(entity_slots)
    stats = {
        "late_spans_alone": result.stats["spans_alone"],
        "late_chunks_windowed": result.stats["texts_windowed"],
        "late_chunks_over_window": result.stats["texts_over_window"],
    }
    return result.text_vectors, result.window_vectors, pooled, stats


def _find(text: str, unit: str, start: int) -> tuple[int, int] | None:
    """Where ``unit`` occurs in ``text``: verbatim from ``start``, else anywhere, else with
    any whitespace between its words."""
    words = unit.split()
    if not words:
        return None
    # A plain search first: nearly every unit is a verbatim substring.
    at = text.find(unit, start)
    if at < 0:
        at = text.find(unit)
    if at >= 0:
        return at, at + len(unit)
    pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
    match = pattern.search(text, start) or pattern.search(text)
    return (match.start(), match.end()) if match else None
