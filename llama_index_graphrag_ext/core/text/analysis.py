"""Sentences and entities of texts in one spaCy pass, and sharing parses between indexes."""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import threading
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from spacy.language import Language
from spacy.tokens import Doc

from .entities import Entity
from .spacy import _check_texts, _iter_docs, _resolve, parsing


def extract_entities(
    text: str,
    nlp: Language | None = None,
    labels: Collection[str] | None = None,
) -> list[Entity]:
    """Extract the named entities of one text, in order, optionally only of ``labels``."""
    return extract_entities_batch([text], nlp, labels=labels)[0]


def extract_entities_batch(
    texts: Sequence[str],
    nlp: Language | None = None,
    labels: Collection[str] | None = None,
    batch_size: int = 64,
    n_process: int = 1,
) -> list[list[Entity]]:
    """Extract the named entities of many texts in one `nlp.pipe` stream (see `analyze_batch`)."""
    return [
        a.entities
        for a in analyze_batch(
            texts, nlp, labels=labels, batch_size=batch_size, n_process=n_process
        )
    ]


@dataclass(frozen=True)
class Analysis:
    """Sentences and entities of one text, from a single spaCy pass.

    Attributes:
        sentence_spans: ``(start_char, end_char)`` of each stripped sentence in the text.
        sentence_entities: For each sentence, the entities starting inside it (offsets
            stay relative to the text).
    """

    sentences: list[str] = field(default_factory=list)
    sentence_spans: list[tuple[int, int]] = field(default_factory=list)
    entities: list[Entity] = field(default_factory=list)
    sentence_entities: list[list[Entity]] = field(default_factory=list)


def analyze_batch(
    texts: Sequence[str],
    nlp: Language | None = None,
    labels: Collection[str] | None = None,
    batch_size: int = 64,
    n_process: int = 1,
    pool: Any = None,
    sentences: str = "model",
) -> list[Analysis]:
    """Split texts into sentences and extract their entities in one spaCy pass.

    The sentences are the same as `split_sentences_batch`'s for the same pipeline.

    Args:
        nlp: A spaCy pipeline; `load_spacy()` when omitted.
        labels: Keep only these entity labels; all when ``None``.
        batch_size: Texts buffered per spaCy batch.
        n_process: Worker processes for `nlp.pipe` (``-1``: one per CPU).
        pool: Analyse in these worker processes instead (a `ParsePool` of the same
            pipeline); ``nlp`` then only keys the parse cache.
        sentences: One of `SENTENCE_MODES`; ``"rule"`` skips the parser, same entities.

    Returns:
        One `Analysis` per text, in input order (empty for blank texts).
    """
    texts = _check_texts(texts)
    nlp = _resolve(nlp)
    cache = _PARSE_CACHE.get()
    if cache is not None:
        return cache.analyze(
            texts,
            nlp,
            labels,
            batch_size=batch_size,
            n_process=n_process,
            pool=pool,
            sentences=sentences,
        )
    if pool is not None:
        return pool.analyze(texts, labels, sentences=sentences)
    return _analyze_uncached(
        texts, nlp, labels, batch_size=batch_size, n_process=n_process, sentences=sentences
    )


def _analyze_uncached(
    texts: Sequence[str],
    nlp: Language,
    labels: Collection[str] | None,
    *,
    batch_size: int,
    n_process: int,
    sentences: str = "model",
) -> list[Analysis]:
    keep = None if labels is None else frozenset(labels)
    out = [Analysis() for _ in texts]
    with parsing(nlp):
        for i, offset, doc in _iter_docs(
            texts,
            nlp,
            entities=True,
            batch_size=batch_size,
            n_process=n_process,
            sentences=sentences,
        ):
            _collect(out[i], offset, doc, keep)
    return out


def _collect(result: Analysis, offset: int, doc: Doc, keep: frozenset[str] | None) -> None:
    """Copy one parsed piece's sentences and entities into ``result`` (plain strings only)."""
    starts: list[int] = []
    first_sentence = len(result.sentences)
    for sent in doc.sents:
        raw = sent.text
        stripped = raw.strip()
        if not stripped:
            continue
        begin = offset + sent.start_char + (len(raw) - len(raw.lstrip()))
        result.sentences.append(stripped)
        result.sentence_spans.append((begin, begin + len(stripped)))
        result.sentence_entities.append([])
        starts.append(begin)
    for ent in doc.ents:
        if keep is not None and ent.label_ not in keep:
            continue
        entity = Entity(ent.text, ent.label_, offset + ent.start_char, offset + ent.end_char)
        result.entities.append(entity)
        if starts:
            # the last sentence starting at or before the entity (the first if none)
            s = max(bisect.bisect_right(starts, entity.start_char) - 1, 0)
            result.sentence_entities[first_sentence + s].append(entity)


def _pipeline_key(nlp: Language) -> tuple:
    meta = nlp.meta or {}
    return (meta.get("lang"), meta.get("name"), meta.get("version"), tuple(nlp.pipe_names))


def _with_labels(analysis: Analysis, keep: frozenset[str] | None) -> Analysis:
    """A copy of a full analysis restricted to ``keep`` labels (fresh lists: callers may edit)."""

    def wanted(entity: Entity) -> bool:
        return keep is None or entity.label in keep

    return Analysis(
        sentences=list(analysis.sentences),
        sentence_spans=list(analysis.sentence_spans),
        entities=[e for e in analysis.entities if wanted(e)],
        sentence_entities=[[e for e in ents if wanted(e)] for ents in analysis.sentence_entities],
    )


class ParseCache:
    """Analyses of texts kept in memory, so several indexes over one corpus parse it once.

    `analyze_batch` consults the cache made current by `shared_parses`. Entries
    are keyed by pipeline and text and hold every entity (label filters apply on
    the way out). ``hits`` and ``misses`` count texts.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple, Analysis] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def analyze(
        self,
        texts: Sequence[str],
        nlp: Language,
        labels: Collection[str] | None = None,
        *,
        batch_size: int = 64,
        n_process: int = 1,
        pool: Any = None,
        sentences: str = "model",
    ) -> list[Analysis]:
        """Like `analyze_batch`, analysing only the texts not seen before with this pipeline."""
        pipeline = (*_pipeline_key(nlp), sentences)
        with self._lock:
            found = [self._entries.get((pipeline, t)) for t in texts]
        todo = list(dict.fromkeys(t for t, a in zip(texts, found, strict=True) if a is None))
        if pool is not None:
            analysed = pool.analyze(todo, None, sentences=sentences)
        else:
            analysed = _analyze_uncached(
                todo, nlp, None, batch_size=batch_size, n_process=n_process, sentences=sentences
            )
        fresh = dict(zip(todo, analysed, strict=True))
        with self._lock:
            for text, analysis in fresh.items():
                self._entries[(pipeline, text)] = analysis
            self.misses += len(todo)
            self.hits += len(texts) - len(todo)
        keep = None if labels is None else frozenset(labels)
        return [
            _with_labels(fresh[t] if a is None else a, keep)
            for t, a in zip(texts, found, strict=True)
        ]


_PARSE_CACHE: contextvars.ContextVar[ParseCache | None] = contextvars.ContextVar(
    "graphrag_parse_cache", default=None
)


@contextlib.contextmanager
def shared_parses(cache: ParseCache | None = None) -> Iterator[ParseCache]:
    """Within the block, `analyze_batch` reuses the analyses held in ``cache`` (new if omitted).

    A context variable: it applies to this thread and its asyncio tasks, not to
    worker threads a method might spawn.
    """
    cache = ParseCache() if cache is None else cache
    token = _PARSE_CACHE.set(cache)
    try:
        yield cache
    finally:
        _PARSE_CACHE.reset(token)


def parses_shared() -> bool:
    """Whether a `shared_parses` block is current (`analyze_batch` then consults its cache)."""
    return _PARSE_CACHE.get() is not None
