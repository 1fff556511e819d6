"""Readers and writers on one index: four retrieving threads while another inserts and
deletes, on every method; no retrieval fails, each sees the index before or after a write."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.core.rwlock import ReadWriteLock
from llama_index_graphrag_ext.specs import SPECS


def passages(n: int, start: int = 0) -> list[Document]:
    return [
        Document(
            id_=f"d{i}",
            text=f"Passage {i} about topic {i % 5} named Alpha{i}. "
            f"It mentions Beta{i % 7} and Gamma{i % 3}.",
        )
        for i in range(start, start + n)
    ]


@pytest.mark.parametrize("name", ["qcg", "cue", "chainrag", "fgrag", "lprag"])
def test_four_readers_and_a_writer_see_no_error(name, bow_embed):
    index_class = SPECS[name].index_class()
    extra = {"epochs": 2} if name == "lprag" else {}
    logging.disable(logging.WARNING)
    try:
        index = index_class(
            PassageParser().get_nodes_from_documents(passages(20)), embed_model=bow_embed, **extra
        )
        errors: Counter[str] = Counter()
        reads = [0]
        stop = threading.Event()

        def reader() -> None:
            retriever = index.as_retriever(similarity_top_k=5)
            while not stop.is_set():
                try:
                    hits = retriever.retrieve("Alpha3 topic Beta2")
                    assert all(h.node.get_content() for h in hits)
                    reads[0] += 1
                except Exception as exc:  # counted: the test wants none
                    errors[f"{type(exc).__name__}: {exc}"[:120]] += 1

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for thread in threads:
            thread.start()
        for round_ in range(4):
            new = passages(3, 100 + 3 * round_)
            for doc in new:
                index.insert(doc)
            for doc in new[:2]:
                index.delete_ref_doc(doc.doc_id)
            time.sleep(0.01)
        stop.set()
        for thread in threads:
            thread.join()
    finally:
        logging.disable(logging.NOTSET)
    assert not errors, dict(errors)
    assert reads[0] > 0
    assert len(index.ref_doc_info) == 20 + 4  # every round kept one of its three


def test_a_writer_waits_for_readers_and_holds_new_ones_back():
    lock, order = ReadWriteLock(), []
    reading = threading.Event()

    def reader(tag: str, hold: float) -> None:
        with lock.reading():
            reading.set()
            order.append(f"{tag} in")
            time.sleep(hold)
            order.append(f"{tag} out")

    def writer() -> None:
        with lock.writing():
            order.append("write")
            with lock.writing(), lock.reading():  # the writer may re-enter and read
                order.append("write again")

    first = threading.Thread(target=reader, args=("r1", 0.2))
    first.start()
    reading.wait()
    w = threading.Thread(target=writer)
    w.start()
    time.sleep(0.05)
    late = threading.Thread(target=reader, args=("r2", 0.0))
    late.start()
    for thread in (first, w, late):
        thread.join()
    assert order == ["r1 in", "r1 out", "write", "write again", "r2 in", "r2 out"]
    with lock.reading(), pytest.raises(RuntimeError, match="cannot write"), lock.writing():
        pass
