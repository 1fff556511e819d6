"""FG-RAG's entity graph in LadybugDB, the embedded graph database (Kùzu's maintained fork).

``open_store`` opens a database file through LlamaIndex's
``LadybugPropertyGraphStore`` with the settings that work offline, and
``hop_reader`` gives FG-RAG's expansion one Cypher round trip per BFS level::

    from graphrag_ext_ladybug import close_store, hop_reader, open_store
    from llama_index_graphrag_ext.fgrag import FGRAGIndex

    store = open_store("graph.lbug")
    index = FGRAGIndex.from_documents(
        docs, property_graph_store=store, hop_reader=hop_reader(store)
    )
    index.persist("fgrag-index")
    close_store(store)

    store = open_store("graph.lbug")            # later, in another process
    index = FGRAGIndex.load(
        "fgrag-index", property_graph_store=store, hop_reader=hop_reader(store)
    )

Why the store needs its own reader, and the settings (see the README, "Defects
of the integration"): version 0.3.4 of the store keeps only its fixed columns
(no descriptions, no relation properties; FG-RAG keeps those itself), its
``get_rel_map`` follows outgoing relations only and only from entities a chunk
``MENTIONS``, its ``structured_query`` returns ``None`` for 128 rows or more,
and its vector index must be downloaded (so it is off).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import ladybug
from llama_index.graph_stores.ladybug import LadybugPropertyGraphStore

__all__ = ["ONE_HOP", "close_store", "hop_reader", "open_store"]

#: Both directions of every ``LINKS`` relation of a batch of entities, with its
#: stored direction (``struct_extract(r, '_SRC')``: ``start_node(r)`` gives the
#: bound node in an undirected pattern, not the stored source).
ONE_HOP = (
    "MATCH (a:Entity)-[r:LINKS]-(b:Entity) WHERE a.id IN $ids "
    "RETURN a.id, r.label, b.id, struct_extract(r, '_SRC') = id(a)"
)


def open_store(
    path: str | os.PathLike,
    *,
    buffer_pool_mb: int = 256,
    max_num_threads: int = 1,
    read_only: bool = False,
) -> LadybugPropertyGraphStore:
    """A ``LadybugPropertyGraphStore`` on the database file ``path`` (made if missing).

    Args:
        path: The database file (LadybugDB keeps one file and a ``.wal`` beside it).
        buffer_pool_mb: Page cache size (LadybugDB's default is most of the RAM).
        max_num_threads: Query threads.
        read_only: Open for reading while another process writes.
    """
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    db = ladybug.Database(
        str(path),
        buffer_pool_size=buffer_pool_mb * 1024 * 1024,
        max_num_threads=max_num_threads,
        read_only=read_only,
    )
    return LadybugPropertyGraphStore(
        db,
        has_structured_schema=False,
        # The vector extension is a download (impossible offline); FG-RAG
        # matches entities on its own vectors anyway.
        use_vector_index=False,
        # value_sanitize turns any result of 128 rows or more into None.
        sanitize_query_output=False,
    )


def close_store(store: LadybugPropertyGraphStore) -> None:
    """Close the store's connections, then its database (the file can then be reopened)."""
    for name in ("connection", "async_connection"):
        connection = getattr(store, name, None)
        if connection is not None:
            connection.close()
    store.db.close()


def hop_reader(store: LadybugPropertyGraphStore, batch: int = 512) -> Any:
    """FG-RAG's one-hop reader: the relations touching a batch of entities, one query per batch.

    Returns ``(source, label, target)`` keys in the stored direction; a relation
    between two entities of the batch comes back from both sides (FG-RAG keeps one).
    """

    def read(keys: list[str]) -> Iterable[tuple[str, str, str]]:
        for start in range(0, len(keys), batch):
            result = store.connection.execute(ONE_HOP, {"ids": keys[start : start + batch]})
            while result.has_next():
                node, label, other, outgoing = result.get_next()
                yield (node, label, other) if outgoing else (other, label, node)

    return read
