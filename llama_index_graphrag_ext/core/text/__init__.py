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

from ..._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "Analysis": ".analysis",
    "ParseCache": ".analysis",
    "analyze_batch": ".analysis",
    "extract_entities": ".analysis",
    "extract_entities_batch": ".analysis",
    "shared_parses": ".analysis",
    "CorpusNgramIndex": ".bleu",
    "DEFAULT_ENTITY_LABELS": ".entities",
    "NUMERIC_ENTITY_LABELS": ".entities",
    "Entity": ".entities",
    "normalize_entity": ".entities",
    "ParsePool": ".parallel",
    "DEFAULT_SPACY_MODELS": ".spacy",
    "MAX_CHUNK_CHARS": ".spacy",
    "SENTENCE_MODES": ".spacy",
    "SpacyModelNotFoundError": ".spacy",
    "clear_spacy_cache": ".spacy",
    "has_ner": ".spacy",
    "load_spacy": ".spacy",
    "parsing": ".spacy",
    "split_long_text": ".spacy",
    "split_sentences": ".spacy",
    "split_sentences_batch": ".spacy",
    "count_tokens": ".tokens",
    "tokenize": ".tokens",
    "truncate_tokens": ".tokens",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

# Imported now: the name is also a submodule's, whose import would replace a lazy one.
from .bleu import bleu  # noqa: E402

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
