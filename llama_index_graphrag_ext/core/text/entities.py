"""Named-entity mentions and the key under which mentions of one entity are merged."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

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
"""The OntoNotes labels without `NUMERIC_ENTITY_LABELS` (DATE and TIME kept: multi-hop
questions often hinge on them)."""


@dataclass(frozen=True)
class Entity:
    """A named-entity mention.

    Attributes:
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

    NFKC and casefold, typographic apostrophes to ``'``, whitespace collapsed,
    surrounding punctuation, a possessive and one leading ``the`` stripped
    (``The Beatles'`` -> ``beatles``); inner punctuation is kept. A mention with
    control characters or U+FFFD (binary data) gets ``""``, as does punctuation only.
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
