"""Make a ``MilvusVectorStore`` for the suite's indexes (Milvus Lite or a cluster)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from llama_index.vector_stores.milvus import MilvusVectorStore

#: Exact search by inner product (= cosine on the suite's unit vectors).
_EXACT_INDEX = {"index_type": "FLAT", "metric_type": "IP"}


def is_lite_uri(uri: str | os.PathLike) -> bool:
    """Whether ``uri`` names a Milvus Lite database file (a local path ending in ``.db``)."""
    text = os.fspath(uri)
    return "://" not in text and text.endswith(".db")


def milvus_store(
    uri: str | os.PathLike,
    *,
    dim: int,
    collection_name: str = "graphrag_ext",
    token: str = "",
    overwrite: bool = False,
    index_config: dict[str, Any] | None = None,
    **kwargs: Any,
) -> MilvusVectorStore:
    """A LlamaIndex ``MilvusVectorStore`` set up the way the suite's tables need it.

    The suite stores unit vectors and searches by inner product (= cosine), and
    filters rows by their ``graphrag_table`` / ``graphrag_id`` metadata, which
    Milvus keeps as dynamic fields. Exact (``FLAT``) search is the default; on
    a cluster pass an ``index_config`` such as
    ``{"index_type": "HNSW", "metric_type": "IP", "M": 16, "efConstruction": 200}``
    (keys other than ``index_type`` / ``metric_type`` become the index's
    params) for approximate search at scale.

    Args:
        uri: A local ``.db`` path (Milvus Lite, embedded, one process at a time)
            or a server address such as ``http://localhost:19530`` or a Zilliz
            Cloud endpoint.
        dim: The embedder's dimension (384 for the bundled MiniLM).
        collection_name: The collection; one collection can hold several
            indexes when each has its own ``vector_namespace``.
        token: ``"user:password"`` or an API key, for a secured server (never
            written to an index's manifest).
        overwrite: Drop the collection first (a fresh build).
        index_config: Milvus index parameters (default: exact ``FLAT`` with ``IP``).
        **kwargs: Passed on to ``MilvusVectorStore`` (``consistency_level``, ...).

    Raises:
        ValueError: A non-positive ``dim``.
    """
    if dim <= 0:
        raise ValueError(f"dim must be positive, got {dim}")
    uri = os.fspath(uri)
    if is_lite_uri(uri):
        parent = Path(uri).expanduser().resolve().parent
        parent.mkdir(parents=True, exist_ok=True)
        uri = str(Path(uri).expanduser().resolve())
        # pymilvus pings every 10 s even while idle; Milvus Lite's embedded gRPC
        # server answers that with GOAWAY "too_many_pings" during a long index
        # build, and the next client on the file then fails to connect. A local
        # engine needs no keepalive while idle.
        options = dict(kwargs.pop("grpc_options", None) or {})
        options.setdefault("grpc.keepalive_permit_without_calls", False)
        kwargs["grpc_options"] = options
    store = MilvusVectorStore(
        uri=uri,
        token=token,
        dim=dim,
        collection_name=collection_name,
        overwrite=overwrite,
        similarity_metric="IP",
        index_config=index_config or dict(_EXACT_INDEX),
        # Reads right after writes (persist, then query) must see them.
        consistency_level=kwargs.pop("consistency_level", "Strong"),
        **kwargs,
    )
    # MilvusVectorStore connects to ``uri`` but leaves its ``uri`` field at the
    # default; set it so an index's manifest records where its vectors are.
    store.uri = uri
    return store
