"""Shared language tools, split by concern; every name is importable from here.

| module | what it gives |
|---|---|
| :mod:`.spacy` | spaCy loading with fallbacks, `parsing` (one parse at a time, memory zones), sentences, long texts |
| :mod:`.entities` | entity mentions, label sets, `normalize_entity` (the merge key) |
| :mod:`.analysis` | sentences and entities in one pass (`analyze_batch`), parses shared between indexes |
| :mod:`.parallel` | `ParsePool`: the same analyses in worker processes kept across batches |
| :mod:`.tokens` | lexical tokens (`tokenize`) and LLM tokens (`count_tokens`, `truncate_tokens`) |
| :mod:`.bleu` | BLEU and leave-one-out corpus BLEU (CUE-RAG's chunk value) |
"""

from .analysis import (
    Analysis,
    ParseCache,
    analyze_batch,
    extract_entities,
    extract_entities_batch,
    shared_parses,
)
from .bleu import CorpusNgramIndex, bleu
from .entities import DEFAULT_ENTITY_LABELS, NUMERIC_ENTITY_LABELS, Entity, normalize_entity
from .parallel import ParsePool
from .spacy import (
    DEFAULT_SPACY_MODELS,
    MAX_CHUNK_CHARS,
    SENTENCE_MODES,
    SpacyModelNotFoundError,
    clear_spacy_cache,
    has_ner,
    load_spacy,
    parsing,
    split_long_text,
    split_sentences,
    split_sentences_batch,
)
from .tokens import count_tokens, tokenize, truncate_tokens

__all__ = [
    "DEFAULT_ENTITY_LABELS",
    "DEFAULT_SPACY_MODELS",
    "MAX_CHUNK_CHARS",
    "NUMERIC_ENTITY_LABELS",
    "SENTENCE_MODES",
    "Analysis",
    "CorpusNgramIndex",
    "Entity",
    "ParseCache",
    "ParsePool",
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
