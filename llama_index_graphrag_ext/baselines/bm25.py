"""BM25 retrieval over chunk nodes, scored by the ``bm25s`` library (Lucene's BM25)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

import bm25s
import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import BaseNode, Document, MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.storage.docstore import SimpleDocumentStore

from ..core.compact_store import compact_docstore
from ..core.config import top_k_of
from ..core.embeddings import top_k_of_scores
from ..core.nodes import documents_to_chunks, prepare_documents, require_query, with_evidence
from ..core.text import tokenize

# bm25s sets its own logger to DEBUG when imported, so every index it builds printed
# "DEBUG bm25s: Building index from tokens" to users; its level comes from the
# application's logging again (the CLI's -v shows it).
logging.getLogger("bm25s").setLevel(logging.NOTSET)

#: Nodes stored and tokenised at a time (and documents chunked at a time by ``from_documents``).
_BATCH = 1024


class BM25Retriever(BaseRetriever):
    """Okapi BM25 over the nodes' text; each result records the query terms it matched.

    Scores are ``bm25s``'s Lucene variant (non-negative IDF); ties go to the
    earlier node. The nodes are kept as compressed JSON in a docstore and
    decoded for the results only; neither they nor their tokens stay alive as
    Python objects.

    Args:
        nodes: The chunks to search (any iterable, read once, a batch at a time).
        similarity_top_k: Chunks to return.
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation.
        callback_manager: LlamaIndex callbacks; falls back to ``Settings``.
    """

    def __init__(
        self,
        nodes: Iterable[BaseNode],
        similarity_top_k: int = 5,
        k1: float = 1.5,
        b: float = 0.75,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        similarity_top_k = top_k_of(similarity_top_k, 5)
        self._docstore = compact_docstore()
        self._ids: list[str] = []  # row -> node id
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        tokens = list(self._store_and_tokenize(nodes))
        if tokens:  # bm25s cannot index an empty corpus; an empty one finds nothing
            self._bm25.index(tokens, show_progress=False)
        self.similarity_top_k = similarity_top_k
        super().__init__(callback_manager=callback_manager)

    def _store_and_tokenize(self, nodes: Iterable[BaseNode]) -> Iterator[list[str]]:
        """Store the nodes a batch at a time, yielding each one's tokens (one row each)."""
        remaining = iter(nodes)
        while batch := list(islice(remaining, _BATCH)):
            self._docstore.add_documents(batch)
            for node in batch:
                self._ids.append(node.node_id)
                yield tokenize(node.get_content(metadata_mode=MetadataMode.EMBED))

    @classmethod
    def from_documents(cls, documents: Sequence[Document], **kwargs) -> BM25Retriever:
        """One chunk per document, then BM25 over them (chunked a batch at a time)."""
        docs, _ = prepare_documents(documents)
        chunks = (
            node
            for start in range(0, len(docs), _BATCH)
            for node in documents_to_chunks(docs[start : start + _BATCH])
        )
        return cls(chunks, **kwargs)

    @property
    def docstore(self) -> SimpleDocumentStore:
        """The searched chunks."""
        return self._docstore

    def __len__(self) -> int:
        return len(self._ids)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_tokens = tokenize(require_query(query_bundle.query_str))
        if not self._ids:
            return []
        known = [t for t in query_tokens if t in self._bm25.vocab_dict]
        scores = self._bm25.get_scores(known) if known else np.zeros(len(self), np.float32)
        rows, top = top_k_of_scores(scores, self.similarity_top_k)
        nodes = self._docstore.get_nodes([self._ids[row] for row in rows.tolist()])
        wanted = set(query_tokens)
        results = []
        for rank, (node, score) in enumerate(zip(nodes, top.tolist(), strict=True)):
            words = set(tokenize(node.get_content(metadata_mode=MetadataMode.EMBED)))
            evidence = {
                "method": "bm25",
                "rank": rank + 1,
                "bm25": score,
                "matched_terms": sorted(wanted & words),
            }
            results.append(with_evidence(node, score, evidence))
        return results

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._retrieve(query_bundle)
