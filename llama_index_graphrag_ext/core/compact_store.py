"""Compact in-memory LlamaIndex stores: each value kept as (compressed) JSON bytes.

``SimpleKVStore`` holds every value as a live dict tree, which made nodes, not
vectors, dominate every index's memory (``docs/scaling.md``).
:class:`CompactKVStore` keeps each value as its JSON encoding, zlib-compressed
one by one with a preset dictionary of a node's boilerplate (:data:`ZDICT`,
in memory only), and persists the plain ``SimpleKVStore`` JSON layout.
:func:`compact_storage_context` builds a ``StorageContext`` on it.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Sequence
from typing import Any

from llama_index.core import StorageContext
from llama_index.core.schema import BaseNode
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.storage.index_store import SimpleIndexStore
from llama_index.core.storage.kvstore.simple_kvstore import SimpleKVStore
from llama_index.core.storage.kvstore.types import DEFAULT_COLLECTION

#: Values whose JSON is shorter than this are kept uncompressed (zlib's framing
#: makes most of them bigger).
COMPRESS_FROM_BYTES = 48

_RAW, _ZLIB, _ZDICT = b"j", b"z", b"d"


def blank_chunk_node():
    """A chunk node with every field empty, as the suite's parsers make them."""
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    node = TextNode(
        id_="",
        text="",
        metadata={"title": ""},
        excluded_embed_metadata_keys=["title"],
        excluded_llm_metadata_keys=["title"],
    )
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(
        node_id="", node_type="4", metadata={"title": ""}, hash=""
    )
    return node


def _preset_dictionary() -> bytes:
    """The JSON boilerplate of LlamaIndex's stored values, for zlib's preset dictionary.

    Built from LlamaIndex's own serialisation (so it follows the installed
    release); zlib prefers recent matches, so the most frequent text goes last.
    """
    from llama_index.core.storage.docstore.utils import doc_to_json

    node = blank_chunk_node()
    records = [
        {"node_ids": [""], "metadata": {"title": ""}},
        {"doc_hash": "", "ref_doc_id": ""},
        doc_to_json(node),
    ]
    return "".join(json.dumps(r, separators=(",", ":")) for r in records).encode("utf-8")


#: zlib preset dictionary of every compressed value (in memory only; see the module docs).
ZDICT = _preset_dictionary()


def encode_value(value: dict) -> bytes:
    """A value's compact form: a one-byte tag, then its JSON, compressed when that is smaller."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", errors="surrogatepass"
    )
    if len(raw) < COMPRESS_FROM_BYTES:
        return _RAW + raw
    packer = zlib.compressobj(6, zdict=ZDICT)
    packed = packer.compress(raw) + packer.flush()
    return _ZDICT + packed if len(packed) < len(raw) else _RAW + raw


def decode_value(blob: bytes) -> dict:
    """Inverse of :func:`encode_value` (a fresh dict on every call)."""
    tag, body = blob[:1], blob[1:]
    if tag == _ZDICT:
        body = zlib.decompressobj(zdict=ZDICT).decompress(body)
    elif tag == _ZLIB:
        body = zlib.decompress(body)
    return json.loads(body.decode("utf-8", errors="surrogatepass"))


class CompactKVStore(SimpleKVStore):
    """An in-memory KV store that keeps values as encoded bytes (see the module docs).

    Same contract as ``SimpleKVStore``; writers are serialised by a lock.
    """

    def __init__(self, data: dict[str, dict[str, Any]] | None = None) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._data = {}
        for collection, values in (data or {}).items():
            self._data[collection] = {k: encode_value(v) for k, v in values.items()}

    def put(self, key: str, val: dict, collection: str = DEFAULT_COLLECTION) -> None:
        blob = encode_value(val)
        with self._lock:
            self._data.setdefault(collection, {})[key] = blob

    async def aput(self, key: str, val: dict, collection: str = DEFAULT_COLLECTION) -> None:
        self.put(key, val, collection)

    def put_all(
        self,
        kv_pairs: list[tuple[str, dict]],
        collection: str = DEFAULT_COLLECTION,
        batch_size: int = 1,
    ) -> None:
        encoded = [(key, encode_value(val)) for key, val in kv_pairs]
        with self._lock:
            self._data.setdefault(collection, {}).update(encoded)

    async def aput_all(
        self,
        kv_pairs: list[tuple[str, dict]],
        collection: str = DEFAULT_COLLECTION,
        batch_size: int = 1,
    ) -> None:
        self.put_all(kv_pairs, collection, batch_size)

    def get(self, key: str, collection: str = DEFAULT_COLLECTION) -> dict | None:
        blob = self._data.get(collection, {}).get(key)
        return None if blob is None else decode_value(blob)

    async def aget(self, key: str, collection: str = DEFAULT_COLLECTION) -> dict | None:
        return self.get(key, collection)

    def get_all(self, collection: str = DEFAULT_COLLECTION) -> dict[str, dict]:
        values = dict(self._data.get(collection, {}))  # a snapshot: writers may run
        return {key: decode_value(blob) for key, blob in values.items()}

    async def aget_all(self, collection: str = DEFAULT_COLLECTION) -> dict[str, dict]:
        return self.get_all(collection)

    def delete(self, key: str, collection: str = DEFAULT_COLLECTION) -> bool:
        with self._lock:
            try:
                del self._data[collection][key]
            except KeyError:
                return False
            return True

    async def adelete(self, key: str, collection: str = DEFAULT_COLLECTION) -> bool:
        return self.delete(key, collection)

    def encoded(
        self, keys: Sequence[str], collection: str = DEFAULT_COLLECTION
    ) -> list[bytes | None]:
        """The stored encoded values of ``keys`` (``None`` where absent), not decoded.

        The store's own immutable ``bytes``, so a structure keeping chunks can
        share them and decode them with :func:`decode_value`.
        """
        stored = self._data.get(collection, {})
        return [stored.get(key) for key in keys]

    def stored_bytes(self) -> int:
        """Bytes of encoded values held (keys and dict overhead not counted)."""
        return sum(len(b) for values in self._data.values() for b in values.values())

    def to_dict(self) -> dict:
        """The plain layout ``{collection: {key: value}}`` (decoded copies)."""
        return {c: self.get_all(c) for c in list(self._data)}

    @classmethod
    def from_dict(cls, save_dict: dict) -> CompactKVStore:
        return cls(save_dict)

    def persist(self, persist_path: str, fs: Any = None) -> None:
        """Write the plain JSON layout (readable by ``SimpleKVStore`` as well)."""
        import os

        import fsspec

        fs = fs or fsspec.filesystem("file")
        dirpath = os.path.dirname(persist_path)
        if dirpath and not fs.exists(dirpath):
            fs.makedirs(dirpath)
        with fs.open(persist_path, "w") as f:
            f.write(json.dumps(self.to_dict()))

    @classmethod
    def from_persist_path(cls, persist_path: str, fs: Any = None) -> CompactKVStore:
        return cls.from_dict(SimpleKVStore.from_persist_path(persist_path, fs=fs).to_dict())


class CompactDocumentStore(SimpleDocumentStore):
    """A ``SimpleDocumentStore`` on a :class:`CompactKVStore` that adds nodes in slices.

    LlamaIndex's ``add_documents`` turns every node into a dict tree before
    storing the first; small long-lived values made meanwhile keep those trees'
    memory resident (``docs/scaling.md``, "Memory"). A slice at a time stores
    the same values while only a slice's trees are alive.
    """

    def __init__(
        self,
        simple_kvstore: SimpleKVStore | None = None,
        namespace: str | None = None,
        batch_size: int = 1,
        slice_size: int = 256,
    ) -> None:
        super().__init__(
            simple_kvstore=CompactKVStore() if simple_kvstore is None else simple_kvstore,
            namespace=namespace,
            batch_size=batch_size,
        )
        if slice_size <= 0:
            raise ValueError(f"slice_size must be positive, got {slice_size}")
        self._slice_size = slice_size

    def add_documents(
        self,
        docs: Sequence[BaseNode],
        allow_update: bool = True,
        batch_size: int | None = None,
        store_text: bool = True,
    ) -> None:
        for start in range(0, len(docs), self._slice_size):
            super().add_documents(
                docs[start : start + self._slice_size], allow_update, batch_size, store_text
            )

    async def async_add_documents(
        self,
        docs: Sequence[BaseNode],
        allow_update: bool = True,
        batch_size: int | None = None,
        store_text: bool = True,
    ) -> None:
        for start in range(0, len(docs), self._slice_size):
            await super().async_add_documents(
                docs[start : start + self._slice_size], allow_update, batch_size, store_text
            )


def compact_docstore() -> CompactDocumentStore:
    """A :class:`CompactDocumentStore` on a fresh :class:`CompactKVStore`."""
    return CompactDocumentStore()


def compact_storage_context(**kwargs: Any) -> StorageContext:
    """``StorageContext.from_defaults`` with a compact docstore and index store.

    An explicit ``docstore`` or ``index_store`` wins over the compact default.
    """
    kwargs.setdefault("docstore", compact_docstore())
    kwargs.setdefault("index_store", SimpleIndexStore(simple_kvstore=CompactKVStore()))
    return StorageContext.from_defaults(**kwargs)
