"""Eight threads retrieving from each index at once get exactly the sequential results.

Every index is built LLM-free on a small corpus; a fixed list of questions is
answered once sequentially, then by 8 threads started together (a barrier),
each asking every question in its own shuffled order, several rounds. Results
are compared by node id, score and evidence, so a reader that saw a half-built
structure, or results that leaked between threads, would show.
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from llama_index.core.schema import Document

METHODS = ("dense", "bm25", "qcg", "cue", "chainrag", "lprag", "fgrag")
THREADS = 8
ROUNDS = 3

EXTRA = {
    "seine": "The Seine is a river in northern France. The Seine reaches the English Channel.",
    "japan": "Japan is an island country in East Asia. Tokyo is the capital of Japan.",
    "crux": "Crux is an American comic book. Crux was published by CrossGen Entertainment.",
    "crossgen": "CrossGen Entertainment was a comic book publisher based in Florida.",
    "nile": "The Nile is a river in Africa. The Nile flows through Egypt and Sudan.",
    "cairo": "Cairo is the capital of Egypt. Cairo lies on the river Nile.",
}
QUESTIONS = [
    "Where was Marie Curie born?",
    "Which river flows through Paris?",
    "What is the capital of Poland?",
    "Who published the comic book Crux?",
    "Which river flows through Cairo?",
    "Where is tea popular?",
    "What is the capital of Japan?",
    "Where does the Seine end?",
]


def fingerprint(results) -> list[tuple]:
    """What a result list says: ids, scores and evidence, in order."""
    return [
        (r.node.node_id, round(float(r.score or 0.0), 6), repr(r.node.metadata.get("evidence")))
        for r in results
    ]


@pytest.mark.parametrize("method", METHODS)
def test_eight_threads_get_the_sequential_results(method, make_retriever, docs_with):
    extra = [Document(id_=k, text=v, metadata={"title": k}) for k, v in EXTRA.items()]
    retriever = make_retriever(method, docs_with(*extra), top_k=4)
    expected = {q: fingerprint(retriever.retrieve(q)) for q in QUESTIONS}
    assert all(expected[q] for q in QUESTIONS if method != "fgrag")

    start = threading.Barrier(THREADS)

    def worker(seed: int) -> dict[str, list[list[tuple]]]:
        order = QUESTIONS * ROUNDS
        random.Random(seed).shuffle(order)
        start.wait()  # all threads retrieve at the same time
        seen: dict[str, list[list[tuple]]] = {}
        for question in order:
            seen.setdefault(question, []).append(fingerprint(retriever.retrieve(question)))
        return seen

    with ThreadPoolExecutor(THREADS) as pool:
        outcomes = list(pool.map(worker, range(THREADS)))
    for seen in outcomes:
        for question, answers in seen.items():
            assert len(answers) == ROUNDS
            for answer in answers:
                assert answer == expected[question], (method, question)
