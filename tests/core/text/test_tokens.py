"""Lexical tokens and LLM token counts (core.text.tokens)."""

from __future__ import annotations

from llama_index_graphrag_ext.core.text import (
    count_tokens,
    tokenize,
    truncate_tokens,
)

CURIE = "Marie Curie was born in Warsaw. She moved to Paris in 1891."


# --- tokenize --------------------------------------------------------------------------


def test_tokenize():
    text = (
        "Marie Curie's lab doesn't close; O\u2019Brien's state-of-the-art 1980\u20132008 Caf\u00e9!"
    )
    assert tokenize(text) == [
        "marie",
        "curie",
        "lab",
        "close",
        "o'brien",
        "state-of-the-art",
        "1980",
        "2008",
        "caf\u00e9",
    ]
    assert tokenize("The cat and THE hat", stopwords=False) == ["the", "cat", "and", "the", "hat"]
    assert tokenize("the and of", stopwords=True) == []
    assert tokenize("snake_case x--y") == ["snake", "case", "x", "y"]
    assert tokenize("") == []


# --- LLM tokens --------------------------------------------------------------------------


def test_count_and_truncate_tokens():
    text = "GraphRAG links chunks through entities and queries. " * 20
    n = count_tokens(text)
    assert n > 100
    assert count_tokens("") == 0
    cut = truncate_tokens(text, 10)
    assert text.startswith(cut) and 0 < count_tokens(cut) <= 10
    assert truncate_tokens(text, n) == text
    assert truncate_tokens(text, 0) == ""
    cjk = "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059" * 5
    cut = truncate_tokens(cjk, 3)
    assert cjk.startswith(cut) and "\ufffd" not in cut and count_tokens(cut) <= 3
