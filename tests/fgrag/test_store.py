"""The columnar store answers exactly as LlamaIndex's ``SimplePropertyGraphStore`` does."""

from __future__ import annotations

import random

import numpy as np
import pytest
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import ChunkNode, EntityNode, Relation
from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.storage.docstore.utils import doc_to_json

from llama_index_graphrag_ext.core.compact_store import encode_value
from llama_index_graphrag_ext.fgrag.columns import (
    STRS,
    Growable,
    IntIndex,
    PropertyCodec,
    StringTable,
    ragged_gather,
)
from llama_index_graphrag_ext.fgrag.store import CompactPropertyGraphStore, unit_rows

NAMES = ["ada", "charles", "paris", "london", "a_b", "x_CO_OCCURS_WITH_y", "é ü", "q"]
TEXTS = ["Ada met Charles.", "", "Paris, 1850.", "ünïcode ✓", "same", "naïve 😀"]


def docstore_value(node: BaseNode) -> bytes:
    """What a compact docstore holds for ``node``."""
    return encode_value(doc_to_json(node))


def random_props(rng: random.Random) -> dict:
    props: dict = {}
    for key in rng.sample(["descriptions", "source_chunks", "display_name", "weight", "tags"], 3):
        kind = rng.randrange(4)
        if kind == 0:
            props[key] = rng.choice(TEXTS)
        elif kind == 1:
            props[key] = rng.sample(TEXTS, rng.randint(0, 3))
        elif kind == 2:
            props[key] = rng.choice([1, 2.5, None, True, {"a": [1]}, ["x", 3]])
        else:
            props[key] = []
    return props


def random_entity(rng: random.Random) -> EntityNode:
    node = EntityNode(
        name=rng.choice(NAMES), label=rng.choice(["PERSON", "GPE"]), properties=random_props(rng)
    )
    if rng.random() < 0.7:
        node.embedding = [float(v) for v in np.float32(rng.sample(range(-8, 9), 4)) / 4]
    return node


def random_relation(rng: random.Random) -> Relation:
    a, b = rng.sample(NAMES + ["c1"], 2)
    return Relation(
        label=rng.choice(["CO_OCCURS_WITH", "MET"]),
        source_id=a,
        target_id=b,
        properties=random_props(rng),
    )


def repair_dangling(compact, simple) -> None:
    """Give back the end nodes the stock ``delete_triplet`` dropped under other triplets.

    The stock store then fails on every later ``get_triplets`` (it decodes all
    triplets first), while this one decodes only the matching ones; the
    comparison is made on graphs where neither fails.
    """
    missing = {end for s, _, t in simple.graph.triplets for end in (s, t)}
    missing -= set(simple.graph.nodes)
    for store in (compact, simple):
        store.upsert_nodes([EntityNode(name=end) for end in sorted(missing)])


def same(compact: CompactPropertyGraphStore, simple: SimplePropertyGraphStore) -> None:
    assert compact.to_dict() == simple.to_dict()
    assert [n.id for n in compact.get()] == [n.id for n in simple.get()]
    assert compact.get() == simple.get()
    assert len(compact.graph.nodes) == len(simple.graph.nodes)
    assert sorted(compact.graph.relations) == sorted(simple.graph.relations)
    assert set(compact.graph.triplets) == set(simple.graph.triplets)
    for name in NAMES:
        assert compact.get(ids=[name, "c1"]) == simple.get(ids=[name, "c1"])
        want = simple.get_triplets(entity_names=[name])
        got = compact.get_triplets(entity_names=[name])
        assert sorted(map(str, got)) == sorted(map(str, want))


def test_random_operations_match_the_stock_store(tmp_path) -> None:
    for seed in range(25):
        rng = random.Random(seed)
        compact, simple = CompactPropertyGraphStore(), SimplePropertyGraphStore()
        for _step in range(30):
            op = rng.randrange(7)
            if op == 0:
                nodes = [random_entity(rng) for _ in range(rng.randint(1, 4))]
                for store in (compact, simple):
                    store.upsert_nodes([n.model_copy(deep=True) for n in nodes])
            elif op == 1:
                chunk = TextNode(text=rng.choice(TEXTS) or "x", id_=rng.choice(["c1", "c2"]))
                simple.upsert_llama_nodes([chunk])
                if rng.random() < 0.5:  # as FG-RAG's build writes chunks: the docstore's value
                    compact.upsert_docstore_chunks([chunk.id_], [docstore_value(chunk)])
                else:
                    compact.upsert_llama_nodes([chunk])
            elif op == 2:
                rels = [random_relation(rng) for _ in range(rng.randint(1, 5))]
                for store in (compact, simple):
                    store.upsert_relations([r.model_copy(deep=True) for r in rels])
            elif op == 3:
                ids = rng.sample(NAMES + ["c1", "c2"], 2)
                for store in (compact, simple):
                    store.delete(ids=ids)
            elif op == 4:
                names = rng.sample(NAMES, 1)
                for store in (compact, simple):
                    store.delete(entity_names=names)
            elif op == 5 and simple.graph.triplets:
                triplet = rng.choice(sorted(simple.graph.triplets))
                key = "_".join(triplet)
                for store in (compact, simple):
                    store.graph.triplets.discard(triplet)
                    store.graph.relations.pop(key, None)
            elif op == 6:
                compact.compact()
            repair_dangling(compact, simple)
            same(compact, simple)
        path = str(tmp_path / f"pg{seed}.json")
        compact.persist(path)
        assert SimplePropertyGraphStore.from_persist_path(path).to_dict() == simple.to_dict()
        assert CompactPropertyGraphStore.from_persist_path(path).to_dict() == simple.to_dict()


def test_chunk_and_entity_under_one_key_replace_each_other() -> None:
    compact, simple = CompactPropertyGraphStore(), SimplePropertyGraphStore()
    for store in (compact, simple):
        store.upsert_nodes([EntityNode(name="k"), EntityNode(name="z")])
        store.upsert_nodes([ChunkNode(text="t", id_="k")])
        store.upsert_nodes([EntityNode(name="k", properties={"a": "b"})])
    same(compact, simple)
    assert [n.id for n in compact.get()] == ["k", "z"]  # the key kept its place


def test_records_paths_equal_the_pydantic_paths() -> None:
    by_nodes, by_records = CompactPropertyGraphStore(), CompactPropertyGraphStore()
    props = {"display_name": "Ada", "descriptions": ["x", "y"], "source_chunks": ["c1", "c1"]}
    by_nodes.upsert_nodes([EntityNode(name="ada", label="PERSON", properties=props)])
    by_records.upsert_entity_records([("ada", "ada", "PERSON", props)])
    rel = {"descriptions": ["x"], "keywords": []}
    by_nodes.upsert_relations(
        [Relation(label="MET", source_id="ada", target_id="bob", properties=rel)]
    )
    by_records.upsert_relation_records([("MET", "ada", "bob", rel)])
    assert by_nodes.to_dict() == by_records.to_dict()
    by_records.put_unit_vectors(["ada"], np.asarray([[0.6, 0.8]], dtype=np.float32))
    assert by_records.get(ids=["ada"])[0].embedding == pytest.approx([0.6, 0.8])
    with pytest.raises(KeyError):
        by_records.put_unit_vectors(["nobody"], np.ones((1, 2), dtype=np.float32))


def test_shared_matrix_is_never_written_again() -> None:
    store = CompactPropertyGraphStore()
    store.upsert_nodes([EntityNode(name="a"), EntityNode(name="b")])
    store.put_unit_vectors(["a", "b"], np.eye(2, dtype=np.float32))
    seen = store.entity_matrix()
    before = seen.copy()
    store.put_unit_vectors(["a"], np.asarray([[0.0, 1.0]], dtype=np.float32))
    store.upsert_nodes([EntityNode(name="c", embedding=[3.0, 4.0])])
    store.delete(ids=["b"])
    assert np.array_equal(seen, before)
    after = store.entity_matrix()
    assert after.tolist() == [[0.0, 1.0], [0.6000000238418579, 0.800000011920929]]


def test_scaling_some_rows_gives_the_bits_of_scaling_all() -> None:
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(300, 384)).astype(np.float32)
    once = unit_rows(raw)
    store = CompactPropertyGraphStore()
    keys = [f"e{i}" for i in range(300)]
    store.upsert_nodes([EntityNode(name=k) for k in keys])
    store.put_unit_vectors(keys[::2], unit_rows(once[::2]))
    store.upsert_nodes(
        [EntityNode(name=k, embedding=once[i].tolist()) for i, k in enumerate(keys) if i % 2]
    )
    assert np.array_equal(store.entity_matrix(), unit_rows(once))


def test_string_table_and_codec_round_trip() -> None:
    table = StringTable()
    ids = table.intern_many(TEXTS + TEXTS[:2])
    assert [table[i] for i in ids] == TEXTS + TEXTS[:2]
    assert table.intern("Paris, 1850.") == ids[2] and table.find("nope") == -1
    assert table.find_many(["same", "nope"]).tolist() == [ids[4], -1]
    assert table.intern("new") == len(TEXTS) and table[-1] == "new"
    assert table[table.intern("\ud800 lone")] == "\ud800 lone"  # bad input survives
    assert table.containing(b"a").tolist() == [0, 2, 4, 5]
    assert table.containing(b"en").tolist() == []  # only across "same" + "naïve"
    codec = PropertyCodec(table)
    rng = random.Random(1)
    for _ in range(50):
        props = random_props(rng)
        tokens: list[int] = []
        codec.encode(props, tokens)
        back, end = codec.decode(tokens)
        assert back == props and list(back) == list(props) and end == len(tokens)
    tokens = []
    starts = []
    for props in ({"a": "x", "d": ["p", "q"]}, {"d": ["r"]}, {"a": "y"}):
        starts.append(len(tokens))
        codec.encode(props, tokens)
    kind, pos = codec.locate(np.asarray(tokens), np.asarray(starts), "d")
    arr = np.asarray(tokens)
    assert kind.tolist() == [STRS, STRS, -1]
    assert [table[i] for i in arr[pos[0] + 1 : pos[0] + 1 + arr[pos[0]]]] == ["p", "q"]


def test_growable_index_and_gather() -> None:
    column = Growable(np.int32)
    for i in range(100):
        column.append(i)
    view = column.view
    column.extend(np.arange(5))
    assert view.tolist() == list(range(100)) and len(column) == 105
    index = IntIndex()
    for k in range(3000):
        index.add(k % 7, k)
    assert index.get(3) == [k for k in range(3000) if k % 7 == 3]
    values = np.arange(10)
    assert ragged_gather(values, np.asarray([2, 7, 0]), np.asarray([3, 0, 2])).tolist() == [
        2,
        3,
        4,
        0,
        1,
    ]


def test_docstore_chunks_answer_as_chunk_nodes(tmp_path) -> None:
    nodes = [
        TextNode(text=t or "x", id_=f"c{i}", metadata={"title": "T"}) for i, t in enumerate(TEXTS)
    ]
    shared, simple = CompactPropertyGraphStore(), SimplePropertyGraphStore()
    shared.upsert_docstore_chunks([n.id_ for n in nodes], [docstore_value(n) for n in nodes])
    simple.upsert_llama_nodes(nodes)
    shared.upsert_nodes([EntityNode(name="c2")])  # an entity replaces a chunk in place
    simple.upsert_nodes([EntityNode(name="c2")])
    shared.upsert_docstore_chunks(["c0"], [docstore_value(TextNode(text="new", id_="c0"))])
    simple.upsert_llama_nodes([TextNode(text="new", id_="c0")])
    shared.delete(ids=["c3"])
    simple.delete(ids=["c3"])
    assert shared.to_dict() == simple.to_dict()
    assert [n.id for n in shared.get()] == [n.id for n in simple.get()]
    assert shared.get(ids=["c4", "c1", "c2"]) == simple.get(ids=["c4", "c1", "c2"])
    assert shared.nbytes()["chunks"] == 0 and shared.nbytes()["shared_chunks"] > 0
    path = str(tmp_path / "pg.json")
    shared.persist(path)
    assert SimplePropertyGraphStore.from_persist_path(path).to_dict() == simple.to_dict()


def test_fit_drops_spare_capacity_only() -> None:
    column = Growable(np.int32)
    for v in range(40):
        column.append(v)
    assert column._data.shape[0] > 40
    column.fit()
    assert column._data.shape[0] == 40 and column.view.tolist() == list(range(40))
    store = CompactPropertyGraphStore()
    rng = random.Random(3)
    store.upsert_nodes([random_entity(rng) for _ in range(20)])
    store.upsert_relations([random_relation(rng) for _ in range(30)])
    before = store.to_dict()
    store.fit()
    assert store.to_dict() == before
    assert store._tokens._data.shape[0] == len(store._tokens)
