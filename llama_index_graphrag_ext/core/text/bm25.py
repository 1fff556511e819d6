"""Okapi BM25 over tokenised documents, on scipy sparse matrices."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..embeddings import top_k_of_scores

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
