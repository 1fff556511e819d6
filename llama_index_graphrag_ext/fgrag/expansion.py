"""Context-Aware Entity Expansion (CAEE) over an in-memory snapshot of the graph [P §3.2].

[`EntityGraph`][llama_index_graphrag_ext.fgrag.expansion.EntityGraph] is a
read-only snapshot of the entities and relations in a property graph store:
entity vectors in one normalised matrix, relations in CSR adjacency arrays,
descriptions with the chunks they came from. Matching is one matrix product;
BFS is adjacency lookups. Snapshots are immutable, so any number of threads can
expand at once.

[`expand`][llama_index_graphrag_ext.fgrag.expansion.expand] runs the paper's
Eqs. 6-7 and the two BFS passes for one query entity:

1. weak-context entities ``E_w``: the top-``n`` entities for the query entity (Eq. 6);
2. strong-context entities ``E_s``: the top-``n`` entities for ``E_w`` used as a
   query, its names joined in one string as in the authors' code (Eq. 7);
3. breadth-first search from ``E_w`` and then from ``E_s``, each pass adding at
   most ``description_budget`` new descriptions (the authors' 75 + 75);
4. the union, deduplicated, in visit order (the authors' ``set()`` loses order;
   this keeps it, and the BFS is deterministic where theirs samples at random).
"""

from __future__ import annotations

import pickle
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode

from ..core.embeddings import top_k, top_k_of_scores


@dataclass(frozen=True)
class Description:
    """One entity or relationship description gathered by the expansion.

    Attributes:
        text: The description.
        kind: ``"entity"`` or ``"relation"``.
        owner: The entity name, or ``"a -> b"`` for a relation.
        chunk_id: The chunk it was extracted from ("" when unknown).
        depth: BFS hops from the seed (0 for the seed's own descriptions).
        seed_score: Similarity of the seed the BFS started from.
        context: ``"weak"`` or ``"strong"``: which pass found it.
    """

    text: str
    kind: str
    owner: str
    chunk_id: str
    depth: int
    seed_score: float
    context: str


@dataclass
class Expansion:
    """The result of CAEE for one query entity.

    Attributes:
        query_entity: The query entity.
        weak: ``(entity, score)`` of ``E_w``, best first.
        strong: ``(entity, score)`` of ``E_s``, best first.
        descriptions: Deduplicated descriptions, weak pass first, in visit order.
        visited: Entities whose descriptions or edges were read.
    """

    query_entity: str
    weak: list[tuple[str, float]] = field(default_factory=list)
    strong: list[tuple[str, float]] = field(default_factory=list)
    descriptions: list[Description] = field(default_factory=list)
    visited: list[str] = field(default_factory=list)

    def as_evidence(self) -> dict[str, Any]:
        """A JSON-ready summary for node metadata and response sources."""
        return {
            "query_entity": self.query_entity,
            "weak_context": [name for name, _ in self.weak],
            "strong_context": [name for name, _ in self.strong],
            "descriptions": len(self.descriptions),
            "visited": len(self.visited),
        }


class _Ragged(Sequence):
    """Read-only per-row lists over one flat table: row ``i`` is ``values[ptr[i]:ptr[i+1]]``.

    Kept for the attribute API of earlier snapshots (``graph.descriptions[i]`` is
    still a list of strings) without holding one Python list per entity.
    """

    def __init__(self, ptr: np.ndarray, ids: np.ndarray, table: Sequence[str]) -> None:
        self._ptr, self._ids, self._table = ptr, ids, table

    def __len__(self) -> int:
        return len(self._ptr) - 1

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        ids = self._ids[self._ptr[i] : self._ptr[i + 1]].tolist()
        return [self._table[k] for k in ids if k >= 0]


class StringColumn(Sequence):
    """Read-only list of strings held as ids into a string table, decoded on access.

    The snapshot's entity names and display names, read a few per query (the
    entities a search visits), so no Python string is kept per entity.
    """

    def __init__(self, ids: np.ndarray, table: Sequence[str]) -> None:
        self._ids, self._table = ids, table

    def __len__(self) -> int:
        return int(self._ids.shape[0])

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._table[int(k)] for k in self._ids[i]]
        return self._table[int(self._ids[i])]

    def __eq__(self, other: object) -> bool:  # compares like the list it stands for
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StringColumn({len(self)} strings)"


class RowLookup(Mapping):
    """Entity name -> row through the string table (the snapshot's ``index_of``).

    Args:
        names: The names in row order (for iteration).
        find: ``str -> string id`` (-1 when absent).
        row_of_sid: Row of each string id (-1: no entity has that name).
    """

    def __init__(
        self, names: Sequence[str], find: Callable[[str], int], row_of_sid: np.ndarray
    ) -> None:
        self._names, self._find, self._row_of_sid = names, find, row_of_sid

    def __getitem__(self, name: str) -> int:
        sid = self._find(name) if isinstance(name, str) else -1
        row = int(self._row_of_sid[sid]) if 0 <= sid < self._row_of_sid.shape[0] else -1
        if row < 0:
            raise KeyError(name)
        return row

    def __contains__(self, name: object) -> bool:
        try:
            self[name]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class BlobChunks(Mapping):
    """Chunk id -> chunk node, each kept as a compressed record until read.

    A retrieval reads only the chunks it returns (ten or so), so decoding on
    read costs little, while holding every chunk as a live ``TextNode`` (text,
    metadata, relationships as nested Python objects) cost several KB each.
    Subclasses fill ``_blobs`` and say how a record decodes (``_decode``).
    """

    _blobs: dict[str, bytes]

    def _decode(self, blob: bytes) -> BaseNode:
        raise NotImplementedError

    def __getitem__(self, chunk_id: str) -> BaseNode:
        return self._decode(self._blobs[chunk_id])

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self._blobs

    def __iter__(self) -> Iterator[str]:
        return iter(self._blobs)

    def __len__(self) -> int:
        return len(self._blobs)


class ChunkMap(BlobChunks):
    """Chunk nodes kept pickled and zlib-compressed until read (see :class:`BlobChunks`)."""

    def __init__(self, chunks: dict[str, BaseNode] | None = None) -> None:
        self._blobs = {
            chunk_id: zlib.compress(pickle.dumps(node, protocol=5), 6)
            for chunk_id, node in (chunks or {}).items()
        }

    def _decode(self, blob: bytes) -> BaseNode:
        return pickle.loads(zlib.decompress(blob))


class _Interner:
    """Maps strings to dense ids in first-seen order (build time only)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.table: list[str] = []

    def __call__(self, text: str) -> int:
        i = self.ids.get(text)
        if i is None:
            i = self.ids[text] = len(self.table)
            self.table.append(text)
        return i


def _flatten(
    lists: Sequence[Sequence[str]],
    sources: Sequence[Sequence[str]],
    texts: _Interner,
    chunks: _Interner,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR form of per-row description lists: ``(ptr, text ids, source ids)``.

    A row keeps all its descriptions; a description beyond the end of the row's
    source list gets source id -1. The BFS stops a row at its first -1, exactly
    as ``zip(descriptions, sources)`` stopped at the shorter list before.
    """
    ptr = np.zeros(len(lists) + 1, dtype=np.int32)
    text_ids: list[int] = []
    src_ids: list[int] = []
    for row, (descs, srcs) in enumerate(zip(lists, sources, strict=True)):
        text_ids.extend(texts(t) for t in descs)
        src_ids.extend(chunks(srcs[k]) if k < len(srcs) else -1 for k in range(len(descs)))
        ptr[row + 1] = len(text_ids)
    return ptr, np.asarray(text_ids, dtype=np.int32), np.asarray(src_ids, dtype=np.int32)


class EntityGraph:
    """A read-only snapshot of entities, relations and chunks for fast expansion.

    Descriptions are held once each, in one table of unique strings; entities
    and relations refer to them through flat ``int32`` arrays (CSR rows), as
    they do to their source chunk ids. Two entities quoting the same sentence,
    the common case for the co-occurrence graph, therefore share it. The BFS
    dedup keys are integers (owner id, text id), not string pairs.

    Args:
        names: Entity keys (node ids in the store).
        display_names: Names as written.
        descriptions: Each entity's description list.
        sources: Each entity's source chunk per description (parallel lists).
        vectors: ``(n, d)`` unit rows, one per entity.
        rel_ends: ``(m, 2)`` entity indices of each relation (undirected).
        rel_descriptions: Each relation's description list.
        rel_sources: Each relation's source chunk per description.
        chunks: Chunk id -> the original chunk node (or a prepared ``ChunkMap``).
    """

    def __init__(
        self,
        names: Sequence[str],
        display_names: Sequence[str],
        descriptions: Sequence[Sequence[str]],
        sources: Sequence[Sequence[str]],
        vectors: np.ndarray,
        rel_ends: np.ndarray,
        rel_descriptions: Sequence[Sequence[str]],
        rel_sources: Sequence[Sequence[str]],
        chunks: Mapping[str, BaseNode] | None = None,
    ) -> None:
        self.names: Sequence[str] = list(names)
        self.display_names: Sequence[str] = list(display_names)
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.rel_ends = np.asarray(rel_ends, dtype=np.int32).reshape(-1, 2)
        self.chunks: Mapping[str, BaseNode] = (
            chunks if isinstance(chunks, ChunkMap) else ChunkMap(dict(chunks or {}))
        )
        self.index_of: Mapping[str, int] = {name: i for i, name in enumerate(self.names)}
        #: Top-k entity rows from an external vector store (set by the index that
        #: has one; ``None``: exact search over ``vectors``).
        self.searcher: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]] | None = None
        n = len(self.names)
        if self.vectors.shape[0] != n:
            raise ValueError(f"{n} entities but {self.vectors.shape[0]} vectors")
        if len(descriptions) != n or len(sources) != n:
            raise ValueError(f"{n} entities but {len(descriptions)} description lists")
        m = self.rel_ends.shape[0]
        if len(rel_descriptions) != m or len(rel_sources) != m:
            raise ValueError(f"{m} relations but {len(rel_descriptions)} description lists")

        texts, chunk_ids = _Interner(), _Interner()
        self.ent_ptr, self.ent_text, self.ent_src = _flatten(
            descriptions, sources, texts, chunk_ids
        )
        self.rel_ptr, self.rel_text, self.rel_src = _flatten(
            rel_descriptions, rel_sources, texts, chunk_ids
        )
        #: Unique description strings and source chunk ids, indexed by the arrays above.
        self.texts: Sequence[str] = texts.table
        self.chunk_ids: Sequence[str] = chunk_ids.table
        # Owner ids for the dedup keys. The old keys were (owner string, text);
        # a relation's owner string is "a -> b", shared by every label between
        # the same two entities, so owners are interned by that very string.
        owners = _Interner()
        self.ent_owner = np.asarray([owners(nm) for nm in self.names], dtype=np.int32)
        self.rel_owner = np.asarray(
            [owners(self._rel_owner_name(r)) for r in range(m)], dtype=np.int32
        )
        self._key_base = max(len(self.texts), 1)
        self._build_adjacency()

    @classmethod
    def from_arrays(
        cls,
        *,
        names: Sequence[str],
        display_names: Sequence[str],
        index_of: Mapping[str, int],
        vectors: np.ndarray,
        rel_ends: np.ndarray,
        ent_ptr: np.ndarray,
        ent_text: np.ndarray,
        ent_src: np.ndarray,
        rel_ptr: np.ndarray,
        rel_text: np.ndarray,
        rel_src: np.ndarray,
        texts: Sequence[str],
        ent_owner: np.ndarray,
        rel_owner: np.ndarray,
        chunks: Mapping[str, BaseNode],
    ) -> EntityGraph:
        """A snapshot from prepared flat arrays (the compact store's path).

        Args are the attributes of the same names. ``texts`` serves as both
        string tables (descriptions and chunk ids); ``ent_owner``/``rel_owner``
        may be any ids under which two rows share an owner exactly when their
        owner strings (entity name; ``"a -> b"``) are equal.
        """
        graph = cls.__new__(cls)
        graph.names, graph.display_names, graph.index_of = names, display_names, index_of
        graph.vectors = vectors
        graph.rel_ends = np.asarray(rel_ends, dtype=np.int32).reshape(-1, 2)
        graph.chunks = chunks
        graph.searcher = None
        graph.ent_ptr, graph.ent_text, graph.ent_src = ent_ptr, ent_text, ent_src
        graph.rel_ptr, graph.rel_text, graph.rel_src = rel_ptr, rel_text, rel_src
        graph.texts = graph.chunk_ids = texts
        graph.ent_owner, graph.rel_owner = ent_owner, rel_owner
        graph._key_base = max(len(texts), 1)
        n, m = len(names), graph.rel_ends.shape[0]
        if vectors.shape[0] != n or ent_ptr.shape[0] != n + 1 or rel_ptr.shape[0] != m + 1:
            raise ValueError("from_arrays: arrays disagree on the numbers of entities/relations")
        graph._build_adjacency()
        return graph

    def _build_adjacency(self) -> None:
        """CSR adjacency: for entity i, relation ids ``adj_rel[indptr[i]:indptr[i+1]]``
        and the entity at their other end ``adj_nbr[...]`` (relations are undirected).

        ``int32`` ids and offsets (as for all of the snapshot's arrays): half
        the memory of ``int64``; the largest arrays hold two entries per relation.
        """
        n, m = len(self.names), self.rel_ends.shape[0]
        ends = self.rel_ends
        rel_ids = np.arange(m, dtype=np.int32)
        heads = np.concatenate([ends[:, 0], ends[:, 1]]).astype(np.int32)
        tails = np.concatenate([ends[:, 1], ends[:, 0]]).astype(np.int32)
        rels = np.concatenate([rel_ids, rel_ids])
        keep = heads != tails
        heads, tails, rels = heads[keep], tails[keep], rels[keep]
        order = np.lexsort((rels, heads))
        self.adj_nbr = tails[order]
        self.adj_rel = rels[order]
        self.indptr = np.zeros(n + 1, dtype=np.int32)
        np.add.at(self.indptr, heads + 1, 1)
        np.cumsum(self.indptr, out=self.indptr)

    def _rel_owner_name(self, r: int) -> str:
        a, b = self.rel_ends[r]
        return f"{self.names[a]} -> {self.names[b]}"

    # The per-row lists of earlier snapshots, as views over the flat tables.
    @property
    def descriptions(self) -> Sequence[list[str]]:
        """Each entity's description list."""
        return _Ragged(self.ent_ptr, self.ent_text, self.texts)

    @property
    def sources(self) -> Sequence[list[str]]:
        """Each entity's source chunk per description."""
        return _Ragged(self.ent_ptr, self.ent_src, self.chunk_ids)

    @property
    def rel_descriptions(self) -> Sequence[list[str]]:
        """Each relation's description list."""
        return _Ragged(self.rel_ptr, self.rel_text, self.texts)

    @property
    def rel_sources(self) -> Sequence[list[str]]:
        """Each relation's source chunk per description."""
        return _Ragged(self.rel_ptr, self.rel_src, self.chunk_ids)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def num_relations(self) -> int:
        """Number of relations."""
        return int(self.rel_ends.shape[0])

    def nbytes(self) -> int:
        """Approximate bytes held by the arrays (vectors included; strings not)."""
        arrays = (
            self.vectors, self.rel_ends, self.ent_ptr, self.ent_text, self.ent_src,
            self.rel_ptr, self.rel_text, self.rel_src, self.ent_owner, self.rel_owner,
            self.adj_nbr, self.adj_rel, self.indptr,
        )  # fmt: skip
        return int(sum(a.nbytes for a in arrays))

    def degree(self, i: int) -> int:
        """Number of relations touching entity ``i``."""
        return int(self.indptr[i + 1] - self.indptr[i])

    def match(self, vector: np.ndarray, n: int) -> list[tuple[int, float]]:
        """Top-``n`` entities by cosine to ``vector`` (Eqs. 6-7's ``Match``)."""
        if len(self) == 0:
            return []
        if self.searcher is not None:
            idx, scores = self.searcher(vector, n)
        else:
            idx, scores = top_k(self.vectors, vector, n)
        return [(int(i), float(s)) for i, s in zip(idx, scores, strict=True)]

    def match_many(self, vectors: np.ndarray, n: int) -> list[list[tuple[int, float]]]:
        """``match`` for each row of ``vectors``, with one matrix product for all of them.

        Reading the entity matrix once for every query vector, instead of once
        per vector, is what keeps matching cheap as the graph grows.
        """
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, self.vectors.shape[1])
        if len(self) == 0:
            return [[] for _ in range(vectors.shape[0])]
        if self.searcher is not None:
            return [self.match(v, n) for v in vectors]
        scores = self.score_many(vectors)
        out = []
        for col in range(vectors.shape[0]):
            idx, top = top_k_of_scores(np.ascontiguousarray(scores[:, col]), n)
            out.append([(int(i), float(s)) for i, s in zip(idx, top, strict=True)])
        return out

    def score_many(self, vectors: np.ndarray) -> np.ndarray:
        """``(n, q)`` similarity of every entity to each of ``q`` query vectors."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, self.vectors.shape[1])
        return self.vectors @ vectors.T

    def bfs(
        self,
        seeds: Sequence[tuple[int, float]],
        budget: int,
        taken: set[int],
        context: str,
        *,
        query_scores: np.ndarray | None = None,
        per_entity: int | None = None,
        max_depth: int | None = None,
    ) -> tuple[list[Description], list[int]]:
        """Breadth-first search from ``seeds`` that adds at most ``budget`` new descriptions.

        Seeds are visited in the given order; each visited entity contributes
        its own descriptions, then its relations' descriptions, enqueuing the
        entities at their other ends. Neighbours are taken in order of
        ``query_scores`` (their similarity to the query entity) when given, so
        the budget goes to the context nearest the query first.

        The walk touches only the entities it visits and their relations: the
        rows of the flat arrays are sliced per visit and nothing is built for
        the rest of the graph, so its cost follows the budget, not the graph.

        Args:
            seeds: ``(entity index, similarity)`` pairs.
            budget: New descriptions this pass may add (the authors' 75).
            taken: Keys of descriptions already gathered (see ``description_key``);
                updated in place. Equal keys mean equal ``(owner, text)``.
            context: ``"weak"`` or ``"strong"``, recorded on each description.
            query_scores: ``(n,)`` similarity of every entity to the query entity.
            per_entity: Cap on descriptions taken from one entity per visit
                (``None``: as many as the budget allows, as the authors do).
            max_depth: Hops beyond the seeds (``None``: until the budget is spent).

        Returns:
            The new descriptions and the visited entity indices.
        """
        out: list[Description] = []
        visited_order: list[int] = []
        if budget <= 0 or not seeds:
            return out, visited_order
        seen = {i for i, _ in seeds}
        queue: deque[tuple[int, int, float]] = deque((i, 0, s) for i, s in seeds)
        base = self._key_base
        texts, chunk_ids, names = self.texts, self.chunk_ids, self.names
        ent_ptr, ent_text, ent_src = self.ent_ptr, self.ent_text, self.ent_src
        rel_ptr, rel_text, rel_src = self.rel_ptr, self.rel_text, self.rel_src
        ent_owner, rel_owner = self.ent_owner, self.rel_owner
        indptr, adj_nbr, adj_rel = self.indptr, self.adj_nbr, self.adj_rel

        while queue and len(out) < budget:
            i, depth, score = queue.popleft()
            visited_order.append(i)
            name = names[i]
            owner_key = int(ent_owner[i]) * base
            lo, hi = int(ent_ptr[i]), int(ent_ptr[i + 1])
            taken_here = 0
            for t, c in zip(ent_text[lo:hi].tolist(), ent_src[lo:hi].tolist(), strict=True):
                if c < 0 or len(out) >= budget:
                    break
                if per_entity is not None and taken_here >= per_entity:
                    break
                key = owner_key + t
                if key in taken:
                    continue
                taken.add(key)
                out.append(
                    Description(texts[t], "entity", name, chunk_ids[c], depth, score, context)
                )
                taken_here += 1
            lo, hi = int(indptr[i]), int(indptr[i + 1])
            if lo == hi or len(out) >= budget:
                continue
            nbrs, rels = adj_nbr[lo:hi], adj_rel[lo:hi]
            if query_scores is not None and hi - lo > 1:
                order = np.argsort(-query_scores[nbrs], kind="stable")
                nbrs, rels = nbrs[order], rels[order]
            taken_rel = 0
            for j, r in zip(nbrs.tolist(), rels.tolist(), strict=True):
                if len(out) >= budget or (per_entity is not None and taken_rel >= per_entity):
                    break
                owner_key = int(rel_owner[r]) * base
                rlo, rhi = int(rel_ptr[r]), int(rel_ptr[r + 1])
                added = False
                for t, c in zip(rel_text[rlo:rhi].tolist(), rel_src[rlo:rhi].tolist(), strict=True):
                    if c < 0 or len(out) >= budget:
                        break
                    key = owner_key + t
                    if key in taken:
                        continue
                    taken.add(key)
                    out.append(
                        Description(
                            texts[t],
                            "relation",
                            self._rel_owner_name(r),
                            chunk_ids[c],
                            depth,
                            score,
                            context,
                        )  # fmt: skip
                    )
                    added = True
                if added:
                    taken_rel += 1
                if j not in seen and (max_depth is None or depth < max_depth):
                    seen.add(j)
                    queue.append((j, depth + 1, score))
        return out, visited_order


def expand(
    graph: EntityGraph,
    query_entity: str,
    query_vector: np.ndarray,
    embed_strong: Any,
    *,
    top_n: int = 20,
    strong_top_n: int = 20,
    description_budget: int = 75,
    per_entity: int | None = None,
    max_depth: int | None = None,
    use_strong: bool = True,
) -> Expansion:
    """Context-aware entity expansion for one query entity [P §3.2, Eqs. 6-7].

    Args:
        graph: The snapshot.
        query_entity: The entity text (for the record).
        query_vector: Its unit embedding.
        embed_strong: ``str -> unit vector``; embeds the joined names of ``E_w``.
        top_n: ``|E_w|`` (authors: 20).
        strong_top_n: ``|E_s|`` (authors: 20).
        description_budget: New descriptions per BFS pass (authors: 75).
        per_entity: Per-visit cap on one entity's descriptions and relations.
        max_depth: BFS hop limit (``None``: the budget alone stops it).
        use_strong: ``False`` skips ``E_s`` (an ablation: weak context only).

    Returns:
        The expansion: both entity sets and the gathered descriptions.
    """
    return expand_many(
        graph,
        [query_entity],
        np.asarray(query_vector, dtype=np.float32)[None, :],
        embed_strong,
        top_n=top_n,
        strong_top_n=strong_top_n,
        description_budget=description_budget,
        per_entity=per_entity,
        max_depth=max_depth,
        use_strong=use_strong,
    )[0]


def expand_many(
    graph: EntityGraph,
    query_entities: Sequence[str],
    query_vectors: np.ndarray,
    embed_strong: Any,
    *,
    top_n: int = 20,
    strong_top_n: int = 20,
    description_budget: int = 75,
    per_entity: int | None = None,
    max_depth: int | None = None,
    use_strong: bool = True,
) -> list[Expansion]:
    """[`expand`][llama_index_graphrag_ext.fgrag.expansion.expand] for several query entities at once.

    Each entity's expansion is exactly what ``expand`` gives for it alone; the
    entities are independent. What is shared is the matching: the entity matrix
    is multiplied once by all query vectors (Eq. 6 and the BFS scores), and once
    by all the strong-context vectors (Eq. 7), instead of two matrix-vector
    products per entity. Those products read the whole matrix, so they are the
    part of a query that grows with the graph.

    Args:
        graph: The snapshot.
        query_entities: The entity texts.
        query_vectors: ``(q, d)`` their unit embeddings.
        embed_strong: ``str -> unit vector``; embeds the joined names of each ``E_w``.
        top_n, strong_top_n, description_budget, per_entity, max_depth, use_strong:
            As for ``expand``.

    Returns:
        One expansion per query entity, in order.
    """
    results = [Expansion(query_entity=q) for q in query_entities]
    if len(graph) == 0 or not results:
        return results
    query_vectors = np.asarray(query_vectors, dtype=np.float32).reshape(len(results), -1)
    # (n, q): every entity against every query entity, one product.
    all_scores = graph.score_many(query_vectors)
    query_scores = [np.ascontiguousarray(all_scores[:, k]) for k in range(len(results))]
    del all_scores
    if graph.searcher is None:  # Eq. 6 from the scores just computed
        weak_sets = []
        for scores in query_scores:
            idx, top = top_k_of_scores(scores, top_n)
            weak_sets.append([(int(i), float(s)) for i, s in zip(idx, top, strict=True)])
    else:
        weak_sets = [graph.match(v, top_n) for v in query_vectors]  # Eq. 6 in the store
    strong_sets: list[list[tuple[int, float]]] = [[] for _ in results]
    if use_strong:
        # Eq. 7: each E_w itself is a query; the authors embed its names joined by newlines.
        asking = [k for k, weak in enumerate(weak_sets) if weak]
        if asking:
            strong_vectors = np.stack(
                [
                    np.asarray(
                        embed_strong("\n".join(graph.display_names[i] for i, _ in weak_sets[k])),
                        dtype=np.float32,
                    )
                    for k in asking
                ]
            )
            for k, strong in zip(
                asking, graph.match_many(strong_vectors, strong_top_n), strict=True
            ):
                strong_sets[k] = strong
    for result, weak, strong, scores in zip(
        results, weak_sets, strong_sets, query_scores, strict=True
    ):
        result.weak = [(graph.names[i], s) for i, s in weak]
        taken: set[int] = set()
        found, visited = graph.bfs(
            weak,
            description_budget,
            taken,
            "weak",
            query_scores=scores,
            per_entity=per_entity,
            max_depth=max_depth,
        )
        result.descriptions.extend(found)
        result.visited.extend(graph.names[i] for i in visited)
        if use_strong and weak:
            result.strong = [(graph.names[i], s) for i, s in strong]
            found, visited = graph.bfs(
                strong,
                description_budget,
                taken,
                "strong",
                query_scores=scores,
                per_entity=per_entity,
                max_depth=max_depth,
            )
            result.descriptions.extend(found)
            result.visited.extend(graph.names[i] for i in visited)
    return results
