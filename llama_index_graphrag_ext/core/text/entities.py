"""Named-entity mentions and the key under which mentions of one entity are merged."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

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
