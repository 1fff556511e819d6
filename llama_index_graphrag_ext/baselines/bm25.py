"""BM25 retrieval over chunk nodes, on the suite's sparse BM25 (:class:`~..core.nlp.BM25`)."""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import BaseNode, Document, MetadataMode, NodeWithScore, QueryBundle

from ..core.nlp import BM25, tokenize
from ..core.nodes import documents_to_chunks, prepare_documents, require_query, with_evidence


class BM25Retriever(BaseRetriever):
    """Okapi BM25 over the nodes' text; each result records the query terms it matched.

    Args:
        nodes: The chunks to search.
        similarity_top_k: Chunks to return.
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation.
        callback_manager: LlamaIndex callbacks; falls back to ``Settings``.
    """

    def __init__(
        self,
        nodes: Sequence[BaseNode],
        similarity_top_k: int = 5,
        k1: float = 1.5,
        b: float = 0.75,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if similarity_top_k <= 0:
            raise ValueError("similarity_top_k must be positive")
        self._nodes = list(nodes)
        self._tokens = [
            tokenize(n.get_content(metadata_mode=MetadataMode.EMBED)) for n in self._nodes
        ]
        self._bm25 = BM25(k1=k1, b=b).fit(self._tokens)
        self.similarity_top_k = similarity_top_k
        super().__init__(callback_manager=callback_manager)

    @classmethod
    def from_documents(cls, documents: Sequence[Document], **kwargs) -> BM25Retriever:
        """One chunk per document, then BM25 over them."""
        docs, _ = prepare_documents(documents)
        return cls(documents_to_chunks(docs), **kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_tokens = tokenize(require_query(query_bundle.query_str))
        rows, scores = self._bm25.top_k(query_tokens, self.similarity_top_k)
        query_set = set(query_tokens)
        results = []
        for rank, (row, score) in enumerate(zip(rows.tolist(), scores.tolist(), strict=True)):
            matched = sorted(query_set.intersection(self._tokens[row]))
            evidence = {"method": "bm25", "rank": rank + 1, "bm25": score, "matched_terms": matched}
            results.append(with_evidence(self._nodes[row], score, evidence))
        return results

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._retrieve(query_bundle)
