"""Batch sampling (App. A.2), pseudo-queries and LLM synthetic queries."""

from __future__ import annotations

import numpy as np
from support import ScriptedLLM

from llama_index_graphrag_ext.core.llm import LLMSettings
from llama_index_graphrag_ext.lprag import SyntheticQueryGenerator, pseudo_queries, sample_batches
from llama_index_graphrag_ext.lprag.batches import neighbor_lists


def test_neighbor_lists_are_symmetric():
    nb = neighbor_lists(4, np.array([0, 0, 2]), np.array([1, 2, 3]))
    assert [x.tolist() for x in nb] == [[1, 2], [0], [0, 3], [2]]


def test_batches_are_target_plus_uniform_number_of_neighbours():
    nb = neighbor_lists(6, np.array([0, 0, 0, 0, 1]), np.array([1, 2, 3, 4, 2]))
    rng = np.random.default_rng(0)
    sizes = []
    for _ in range(400):
        (batch,) = sample_batches(nb, [0], rng)
        assert batch[0] == 0 and len(set(batch.tolist())) == len(batch)
        assert set(batch[1:].tolist()) <= {1, 2, 3, 4}
        sizes.append(len(batch) - 1)
    counts = np.bincount(sizes, minlength=5)
    assert counts.min() > 50  # k_v ~ U{0..4}: every size turns up about 80 times
    assert [b.tolist() for b in sample_batches(nb, [5], rng)] == [[5]]  # isolated chunk
    again = sample_batches(nb, range(6), np.random.default_rng(3))
    same = sample_batches(nb, range(6), np.random.default_rng(3))
    assert all((a == b).all() for a, b in zip(again, same, strict=True))


def test_pseudo_queries_come_from_the_batch_text():
    sentences = [["Alpha one is here.", "Alpha two is here."], ["Beta sentence."], []]
    out = pseudo_queries(
        [np.array([0, 1]), np.array([2])], sentences, np.random.default_rng(0), per_batch=2
    )
    assert len(out[0]) == 2 and out[1] == []
    assert out[0][0] in sentences[0]
    assert "Beta sentence." in out[0][1]
    long = [[" ".join(f"w{i}" for i in range(50))]]
    (q,) = pseudo_queries([np.array([0])], long, np.random.default_rng(0), per_batch=1, max_words=7)
    assert len(q[0].split()) == 7


def test_synthetic_queries_are_parsed_capped_and_failures_counted():
    llm = ScriptedLLM(
        [
            "[Who published Crux?]\n[When did CrossGen operate?]\n[What is Crux about?]",
            "no brackets but a line that is long enough",
            RuntimeError("down"),
        ]
    )
    gen = SyntheticQueryGenerator(llm, per_batch=2, settings=LLMSettings(max_concurrency=1))
    out = gen.generate([["Crux text."], ["Other text."], ["Third."]])
    assert out[0] == ["Who published Crux?", "When did CrossGen operate?"]
    assert out[1] == ["no brackets but a line that is long enough"]
    assert out[2] == []
    assert gen.stats["failed_calls"] == 1 and gen.failures == ["RuntimeError"]
    assert llm.call_count == 3  # a RuntimeError is not retried (retrying cannot help)
    assert "[Passage 2] B" in gen.format(["A", "B"])
    assert set(gen.get_prompts()) == {"synthetic_query_prompt"}
