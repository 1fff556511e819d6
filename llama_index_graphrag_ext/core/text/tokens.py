"""Tokens: lexical tokens for BM25 and BLEU, and LLM tokens for prompts and budgets."""

from __future__ import annotations

import functools
import importlib.util
import re
import runpy
from pathlib import Path
from typing import Any


@functools.cache
def stop_words() -> frozenset[str]:
    """spaCy's English stop words, read from its ``stop_words.py`` without importing spaCy
    (whose import takes seconds: a BM25 query needs only this list). The file is plain
    Python with no imports of its own."""
    spec = importlib.util.find_spec("spacy")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("spaCy is not installed (`pip install llama-index-graphrag-ext`)")
    path = Path(next(iter(spec.submodule_search_locations))) / "lang" / "en" / "stop_words.py"
    return frozenset(runpy.run_path(str(path))["STOP_WORDS"])


_WORD_RE = re.compile(r"[^\W_]+(?:['\u2019\-][^\W_]+)*")
_CONTRACTIONS = ("n't", "'ll", "'re", "'ve", "'d", "'m")
_CONTRACTION_STEMS = frozenset({"wo", "sha", "ai"})  # won't, shan't, ain't


def tokenize(text: str, *, stopwords: bool = True) -> list[str]:
    """Tokenise text for lexical scoring (BM25, BLEU), without a spaCy pipeline.

    Words are runs of letters and digits joined across single inner apostrophes or
    hyphens (``o'brien``, ``covid-19``), casefolded, without a possessive ``'s``.
    ``stopwords=True`` drops spaCy's English stop words and their contractions.
    """
    out: list[str] = []
    STOP_WORDS = stop_words()  # noqa: N806 - the constant it was
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


def _tokenizer() -> Any:
    from llama_index.core.utils import get_tokenizer

    return get_tokenizer()


def count_tokens(text: str) -> int:
    """Number of LLM tokens in ``text``, with LlamaIndex's global tokenizer (no network)."""
    return len(_tokenizer()(text)) if text else 0


def truncate_tokens(text: str, max_tokens: int) -> str:
    """Cut ``text`` to at most ``max_tokens`` LLM tokens (see `count_tokens`).

    A tiktoken prefix is decoded directly; with any other tokenizer the longest
    fitting character prefix is found by bisection.
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
