"""The compact docstore backend (core/compact_store.py)."""

from __future__ import annotations

import json
import zlib

from llama_index.core.schema import Document, NodeRelationship, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.storage.docstore.utils import doc_to_json
from llama_index.core.storage.kvstore.simple_kvstore import SimpleKVStore

from llama_index_graphrag_ext.core.compact_store import (
    CompactDocumentStore,
    CompactKVStore,
    compact_docstore,
    compact_storage_context,
    decode_value,
    encode_value,
)
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex

TEXT = "Warsaw is the capital of Poland. It lies on the river Vistula. " * 6


def test_values_round_trip_short_long_and_unicode():
    for value in ({"a": 1}, {"text": TEXT, "n": [1, 2, 3]}, {"t": "Zürich \ud800 東京"}):
        blob = encode_value(value)
        assert decode_value(blob) == value
    assert encode_value({"a": 1})[:1] == b"j"  # short: kept raw
    long = encode_value({"text": TEXT})
    assert long[:1] == b"d" and len(long) < len(json.dumps({"text": TEXT}))
    # Blobs of plain zlib (the earlier in-memory form) still decode.
    assert decode_value(b"z" + zlib.compress(json.dumps({"text": TEXT}).encode())) == {"text": TEXT}


def test_preset_dictionary_pays_on_a_real_node():
    node = TextNode(
        id_="musique-100/12#0-0123456789",
        text="Warsaw is the capital of Poland. It lies on the river Vistula.",
        metadata={"title": "Warsaw"},
        excluded_embed_metadata_keys=["title"],
        excluded_llm_metadata_keys=["title"],
    )
    node.relationships[NodeRelationship.SOURCE] = Document(
        id_="musique-100/12", text=node.text, metadata={"title": "Warsaw"}
    ).as_related_node_info()
    value = doc_to_json(node)
    raw = json.dumps(value, separators=(",", ":")).encode()
    blob = encode_value(value)
    assert decode_value(blob) == value
    # The boilerplate is in the dictionary: well under plain zlib, let alone the JSON.
    assert len(blob) < 0.8 * len(zlib.compress(raw, 6)) < len(raw)


def test_kvstore_contract_and_copies():
    store = CompactKVStore()
    store.put("k", {"x": [1]}, collection="c")
    got = store.get("k", collection="c")
    got["x"].append(2)  # a copy: the stored value is unchanged
    assert store.get("k", collection="c") == {"x": [1]}
    store.put_all([("a", {"v": 1}), ("b", {"v": 2})], collection="c")
    assert store.get_all("c") == {"k": {"x": [1]}, "a": {"v": 1}, "b": {"v": 2}}
    assert store.delete("a", "c") and not store.delete("a", "c")
    assert store.get("missing") is None


def test_docstore_nodes_persist_in_the_plain_layout(tmp_path):
    docstore = compact_docstore()
    nodes = [TextNode(id_=f"n{i}", text=f"{TEXT} {i}", metadata={"title": "T"}) for i in range(5)]
    docstore.add_documents(nodes)
    assert docstore.get_node("n3").text == nodes[3].text
    assert docstore.get_node("n3").metadata == {"title": "T"}
    path = tmp_path / "docstore.json"
    docstore.persist(str(path))
    plain = SimpleDocumentStore.from_persist_path(str(path))  # the stock class reads it
    assert plain.get_node("n4").text == nodes[4].text
    again = CompactKVStore.from_persist_path(str(path))
    assert SimpleDocumentStore(simple_kvstore=again).get_node("n0").text == nodes[0].text
    # Far fewer bytes than the dict-per-node store would hold as JSON.
    raw = sum(len(json.dumps(v)) for v in SimpleKVStore.from_persist_path(str(path)).to_dict()[
        "docstore/data"
    ].values())  # fmt: skip
    assert docstore._kvstore.stored_bytes() < raw


def test_suite_indexes_use_it_by_default_and_reload(bow_embed, tmp_path):
    docs = [Document(id_=f"d{i}", text=f"{TEXT} Document {i}.") for i in range(4)]
    index = QueryCentricGraphIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()], config="default"
    )
    assert isinstance(index.docstore._kvstore, CompactKVStore)
    index.persist(tmp_path / "qcg")
    loaded = QueryCentricGraphIndex.load(tmp_path / "qcg", embed_model=bow_embed)
    assert isinstance(loaded.docstore._kvstore, CompactKVStore)
    assert [n.text for n in loaded.get_chunks(loaded.chunk_ids())] == [
        n.text for n in index.get_chunks(index.chunk_ids())
    ]
    ctx = compact_storage_context()
    assert isinstance(ctx.docstore._kvstore, CompactKVStore)


def _chunked_documents():
    from llama_index_graphrag_ext.core.nodes import documents_to_chunks

    class EveryLine:  # a tiny splitter: one chunk per line
        def get_nodes_from_documents(self, docs):
            return [TextNode(text=line) for d in docs for line in d.text.splitlines()]

    docs = [
        Document(id_=f"d{i}", text="\n".join(f"Line {j} of document {i}." for j in range(i + 2)))
        for i in range(5)
    ]
    return documents_to_chunks(docs, splitter=EveryLine())


def test_sliced_adds_store_what_the_stock_docstore_stores():
    nodes = _chunked_documents()  # 20 chunks of 5 documents, slices of 3 cut through them
    stock = SimpleDocumentStore()
    stock.add_documents(nodes)
    sliced = CompactDocumentStore(slice_size=3)
    sliced.add_documents(nodes)
    assert isinstance(sliced._kvstore, CompactKVStore)
    for collection in ("docstore/data", "docstore/metadata", "docstore/ref_doc_info"):
        assert sliced._kvstore.get_all(collection) == stock._kvstore.get_all(collection)
    assert sliced.get_ref_doc_info("d4").node_ids == [n.node_id for n in nodes[-6:]]


def test_sliced_async_adds_match_too():
    import asyncio

    nodes = _chunked_documents()
    stock = SimpleDocumentStore()
    stock.add_documents(nodes)
    sliced = CompactDocumentStore(slice_size=4)
    asyncio.run(sliced.async_add_documents(nodes))
    assert sliced._kvstore.get_all("docstore/ref_doc_info") == stock._kvstore.get_all(
        "docstore/ref_doc_info"
    )
    assert sliced.docs.keys() == stock.docs.keys()


def test_slice_size_must_be_positive():
    import pytest

    with pytest.raises(ValueError, match="slice_size"):
        CompactDocumentStore(slice_size=0)


def test_encoded_values_are_the_stored_bytes_and_decode_back():
    from llama_index_graphrag_ext.core.compact_store import CompactKVStore, decode_value

    store = CompactKVStore()
    store.put("a", {"text": "alpha"}, collection="nodes")
    store.put("b", {"text": "beta"}, collection="nodes")
    a, b, missing = store.encoded(["a", "b", "zz"], collection="nodes")
    assert isinstance(a, bytes) and missing is None
    assert decode_value(a) == {"text": "alpha"} and decode_value(b) == {"text": "beta"}
    assert store.encoded(["a"], collection="nodes")[0] is a  # shared, not copied
    assert store.encoded(["a"]) == [None]  # other collection
