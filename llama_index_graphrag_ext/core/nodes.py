"""Documents in, chunk nodes out; retrieved nodes with their evidence.

Shared by every method: input hygiene (empty and duplicate documents are
counted and logged, never silently dropped), deterministic chunk ids, and the
``evidence`` metadata through which each retriever says why it chose a chunk.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import (
    BaseNode,
    Document,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
)

logger = logging.getLogger(__name__)

#: Metadata key under which retrievers record why a node was chosen.
EVIDENCE_KEY = "evidence"

_SURROGATE = re.compile("[\ud800-\udfff]")


class DuplicateDocumentError(ValueError):
    """Two different documents share one id."""


class EmptyQueryError(ValueError):
    """A retriever was asked an empty (or whitespace-only) query."""


def require_query(query_str: str | None, embedding: Sequence[float] | None = None) -> str:
    """Return ``query_str``, or raise :class:`EmptyQueryError` if there is nothing to search for.

    A query that brings its own ``embedding`` is accepted with an empty text.
    """
    if (query_str is None or not query_str.strip()) and embedding is None:
        raise EmptyQueryError(
            "the query is empty (or only whitespace): there is nothing to retrieve for"
        )
    return query_str or ""


@dataclass
class InputReport:
    """What :func:`prepare_documents` kept, merged and skipped, for logs and reports."""

    received: int = 0
    kept: int = 0
    empty: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Counts, JSON-ready."""
        return {
            "received": self.received,
            "kept": self.kept,
            "empty_skipped": len(self.empty),
            "duplicates_skipped": len(self.duplicates),
            "unencodable_repaired": len(self.repaired),
        }


def _without_surrogates(doc: Document, text: str) -> Document | None:
    """A copy of ``doc`` whose lone surrogates became U+FFFD, or None if it has none.

    Text decoded with ``surrogateescape`` can hold lone surrogates, on which
    LlamaIndex's content hash would fail far from the cause.
    """
    clean = _SURROGATE.sub("\ufffd", text)
    if clean == text:
        return None
    fixed = doc.model_copy(deep=False)
    fixed.set_content(clean)  # a new text resource: the caller's document is untouched
    return fixed


def prepare_documents(
    documents: Iterable[Document], *, on_duplicate: str = "skip-identical"
) -> tuple[list[Document], InputReport]:
    """Check a batch of documents before indexing.

    Empty documents are skipped and counted. A repeated id with the same text
    is skipped and counted; with a different text it raises, unless
    ``on_duplicate`` is ``"keep-first"`` or ``"keep-last"``.

    Raises:
        DuplicateDocumentError: Two different texts under one id with the default policy.
    """
    if on_duplicate not in ("skip-identical", "keep-first", "keep-last"):
        raise ValueError(f"unknown on_duplicate policy {on_duplicate!r}")
    report = InputReport()
    by_id: dict[str, Document] = {}
    for doc in documents:
        report.received += 1
        if not isinstance(doc, BaseNode):
            raise TypeError(f"expected a LlamaIndex Document, got {type(doc).__name__}")
        text = doc.get_content()
        if not text or not text.strip():
            report.empty.append(doc.doc_id)
            continue
        fixed = _without_surrogates(doc, text)
        if fixed is not None:
            report.repaired.append(doc.doc_id)
            doc, text = fixed, fixed.get_content()
        previous = by_id.get(doc.doc_id)
        if previous is not None:
            report.duplicates.append(doc.doc_id)
            if previous.get_content() == text or on_duplicate == "keep-first":
                continue
            if on_duplicate == "skip-identical":
                raise DuplicateDocumentError(
                    f"two different documents share the id {doc.doc_id!r}; give them "
                    "distinct ids or pass on_duplicate='keep-first'/'keep-last'"
                )
        by_id[doc.doc_id] = doc
    kept = list(by_id.values())
    report.kept = len(kept)
    if report.empty:
        logger.warning("skipped %d empty document(s): %s", len(report.empty), report.empty[:5])
    if report.duplicates:
        logger.warning(
            "skipped %d duplicate document id(s): %s", len(report.duplicates), report.duplicates[:5]
        )
    if report.repaired:
        logger.warning(
            "replaced undecodable characters (lone surrogates) with U+FFFD in %d document(s): %s",
            len(report.repaired),
            report.repaired[:5],
        )
    return kept, report


def chunk_id(doc_id: str, position: int, text: str) -> str:
    """A content-addressed chunk id: same document, place and text give the same id."""
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{doc_id}#{position}-{digest}"


def documents_to_chunks(
    documents: Sequence[Document], splitter: NodeParser | None = None
) -> list[TextNode]:
    """Turn documents into chunk nodes that point back to their document.

    Without a splitter each document is one chunk (the benchmark convention:
    one passage, one node). With one, its nodes are re-identified with
    :func:`chunk_id` so re-inserting the same document is idempotent.
    """
    planned: list[tuple[Document, int, str]] = []
    for doc in documents:
        if splitter is None:
            pieces = [doc.get_content()]
        else:
            pieces = [n.get_content() for n in splitter.get_nodes_from_documents([doc])]
        planned.extend((doc, position, text) for position, text in enumerate(_non_blank(pieces)))
    ids = burst_ids(chunk_id(doc.node_id, position, text) for doc, position, text in planned)
    chunks: list[TextNode] = []
    source, link = None, None
    for (doc, position, text), node_id in zip(planned, ids, strict=True):
        if doc is not source:  # hashes the document: once, not per chunk
            # Only the current document's link is kept, so no short-lived links
            # leave holes between the nodes for long-lived objects to fill.
            source, link = doc, doc.as_related_node_info()
        chunks.append(make_chunk(doc, position, text, link, node_id=node_id))
    return chunks


def _non_blank(pieces: Iterable[str]) -> list[str]:
    return [p for p in pieces if p.strip()]


def burst_ids(ids: Iterable[str]) -> list[str]:
    """Make the strings of ``ids`` in one go, before the objects that will carry them.

    Chunk ids outlive the nodes built around them; made node by node, one
    surviving id per allocator arena would keep the nodes' memory resident
    (``docs/scaling.md``, "Memory"). Made in one burst, they share arenas only
    with each other.
    """
    return list(ids)


def make_chunk(
    source: BaseNode,
    position: int,
    text: str,
    link: RelatedNodeInfo | None = None,
    *,
    node_id: str | None = None,
) -> TextNode:
    """A chunk of ``source`` at ``position``: its metadata, a source link, a content id.

    ``link`` and ``node_id`` are passed when the caller has them already
    (``link`` hashes the whole source text; see :func:`burst_ids` for ids).
    """
    node = TextNode(
        id_=node_id if node_id is not None else chunk_id(source.node_id, position, text),
        text=text,
        metadata=dict(source.metadata),
        excluded_embed_metadata_keys=list(source.excluded_embed_metadata_keys),
        excluded_llm_metadata_keys=list(source.excluded_llm_metadata_keys),
    )
    node.relationships[NodeRelationship.SOURCE] = (
        link.model_copy() if link is not None else source.as_related_node_info()
    )
    return node


def with_evidence(node: BaseNode, score: float | None, evidence: dict[str, Any]) -> NodeWithScore:
    """Return a copy of ``node`` carrying ``evidence`` in its metadata.

    The stored node is never modified; the evidence is hidden from the LLM and embedder.
    """
    copy = node.model_copy(deep=False)
    copy.metadata = {**node.metadata, EVIDENCE_KEY: evidence}
    for keys_attr in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
        keys = list(getattr(node, keys_attr))
        if EVIDENCE_KEY not in keys:
            keys.append(EVIDENCE_KEY)
        setattr(copy, keys_attr, keys)
    return NodeWithScore(node=copy, score=None if score is None else float(score))


def source_id(node: BaseNode | NodeWithScore) -> str:
    """The id of the document a node came from (its own id if it has no source)."""
    if isinstance(node, NodeWithScore):
        node = node.node
    return node.ref_doc_id or node.node_id


def dedupe_by_source(results: Iterable[NodeWithScore]) -> list[str]:
    """Source document ids of ranked results, first occurrence kept."""
    seen: dict[str, None] = {}
    for result in results:
        seen.setdefault(source_id(result), None)
    return list(seen)


class PassageParser(NodeParser):
    """One chunk per document, with content-addressed ids (see :func:`chunk_id`).

    The benchmark convention (a passage is a chunk) as a LlamaIndex node parser.
    """

    @classmethod
    def class_name(cls) -> str:
        return "PassageParser"

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        kept: list[tuple[BaseNode, str]] = []
        for node in nodes:
            text = node.get_content()
            if not text.strip():
                logger.warning("PassageParser: skipped empty document %s", node.node_id)
                continue
            kept.append((node, text))
        ids = burst_ids(chunk_id(node.node_id, 0, text) for node, text in kept)
        return [
            make_chunk(node, 0, text, node_id=node_id)
            for (node, text), node_id in zip(kept, ids, strict=True)
        ]
