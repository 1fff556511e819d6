"""Exact-word evidence for the LLM-free re-ranker R(q, .) (CUE-RAG §3.3, Alg. 3 lines 13 and 23).

The paper's R(q, .) is a cross-encoder: a path that *names* the query's entities
scores above one merely about the same topic. Embeddings of short sentences do not
see names well (``docs/methods/cue.md``, "Why Knowledge Anchoring hurt"), so
:class:`Lexicon` adds the IDF-weighted share of the query's content words a path's
units (or their entities' names) contain: a two-hop path naming both the first
entity and the bridge covers more than either hop.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from spacy.lang.en.stop_words import STOP_WORDS

from ..core.arrays import csr
from .view import CueGraphView

_WORD_RE = re.compile(r"[^\W_]+")


def content_words(text: str) -> list[str]:
    """Casefolded words of ``text`` that are not English stop words, each once, in order."""
    words = (m.group().casefold() for m in _WORD_RE.finditer(text))
    return list(dict.fromkeys(w for w in words if w not in STOP_WORDS))


class Lexicon:
    """Content words of every unit of a view, with their inverse document frequencies.

    Words are ids into :attr:`vocabulary`; each unit's ids are one CSR row.
    """

    def __init__(self, view: CueGraphView) -> None:
        vocabulary: dict[str, int] = {}
        rows: list[int] = []
        ids: list[int] = []
        names = view.entity_names
        entity_words = [content_words(n) for n in names]
        for u, text in enumerate(view.unit_texts):
            words = dict.fromkeys(content_words(text))
            for e in view.unit_entities[u].tolist():
                words.update(dict.fromkeys(entity_words[e]))
            for w in words:
                rows.append(u)
                ids.append(vocabulary.setdefault(w, len(vocabulary)))
        n_units = len(view.unit_texts)
        self.vocabulary = vocabulary
        self.offsets, self.words = csr(
            np.asarray(rows, dtype=np.int64), np.asarray(ids, dtype=np.int64), n_units
        )
        df = np.bincount(np.asarray(ids, dtype=np.int64), minlength=len(vocabulary))
        #: ``log(1 + n / df)`` per word id; a word no unit has gets the rarest weight.
        self.idf = np.log1p(n_units / np.maximum(df, 1)).astype(np.float64)
        self.unseen_idf = math.log1p(max(n_units, 1))

    def query(self, text: str) -> QueryWords:
        """The query's content words, their weights, and a cache of what each unit covers."""
        words = content_words(text)
        ids = np.array([self.vocabulary.get(w, -1) for w in words], dtype=np.int64)
        weights = np.array(
            [self.idf[i] if i >= 0 else self.unseen_idf for i in ids.tolist()], dtype=np.float64
        )
        return QueryWords(self, ids, weights)


class QueryWords:
    """One query's weighted content words, and which of them each unit contains (bit masks)."""

    def __init__(self, lexicon: Lexicon, ids: np.ndarray, weights: np.ndarray) -> None:
        self._lexicon = lexicon
        self.ids = ids
        self.weights = weights
        self.total = float(weights.sum())
        self._masks: dict[int, int] = {}

    def unit_mask(self, unit: int) -> int:
        """Bit ``i`` is set when the unit covers the query's ``i``-th word."""
        mask = self._masks.get(unit)
        if mask is None:
            lex = self._lexicon
            have = lex.words[lex.offsets[unit] : lex.offsets[unit + 1]]
            hits = np.isin(self.ids, have)
            mask = sum(1 << i for i in np.flatnonzero(hits).tolist())
            self._masks[unit] = mask
        return mask

    def _share(self, mask: int) -> float:
        if not mask or self.total <= 0:
            return 0.0
        return sum(w for i, w in enumerate(self.weights.tolist()) if mask >> i & 1) / self.total

    def path_coverage(self, paths: Sequence[Sequence[int]]) -> np.ndarray:
        """Per path, the weighted share of query words some unit of the path contains."""
        out = np.zeros(len(paths), dtype=np.float64)
        for i, path in enumerate(paths):
            mask = 0
            for u in path:
                mask |= self.unit_mask(u)
            out[i] = self._share(mask)
        return out
