"""Shared fixtures: a deterministic bag-of-words embedder, the real MiniLM, benchmark slices."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import BagOfWordsEmbedding

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# No test may pick up a developer's provider (an OPENAI_API_KEY would make tests pay):
# the suite's rule resolves to LLM-free unless a test sets the environment itself.
for _name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "GRAPHRAG_LLM_MODEL"):
    os.environ.pop(_name, None)
os.environ["GRAPHRAG_LLM"] = "none"

#: The bundled dev set (benchmarks/ of the checkout: CI's fresh clone has it too).
MUSIQUE = Path(__file__).resolve().parents[1] / "benchmarks" / "musique-100"


@pytest.fixture(autouse=True)
def _fresh_reasoning_styles():
    """Each test meets its models afresh: what one learned of a model's reasoning (a
    process-wide memory) must not change another's budgets or streams."""
    from llama_index_graphrag_ext.core.llm.reasoning import forget

    forget()
    yield


@pytest.fixture
def bow_embed() -> BagOfWordsEmbedding:
    return BagOfWordsEmbedding(embed_batch_size=4)


@pytest.fixture(scope="session")
def minilm():
    """The real embedded all-MiniLM-L6-v2 (loaded once per session)."""
    from llama_index_graphrag_ext.core.defaults import default_embed_model

    return default_embed_model()


@pytest.fixture(scope="session")
def musique_slice(tmp_path_factory):
    """A real 8-question slice of musique-100 written in the canonical format."""
    from llama_index_graphrag_ext.eval.data import load_benchmark

    if not MUSIQUE.is_dir():
        pytest.skip(f"{MUSIQUE} is not present")
    bench = load_benchmark(MUSIQUE).subset(limit=8, max_passages=60)
    folder = tmp_path_factory.mktemp("musique-slice")
    import json

    with open(folder / "corpus.jsonl", "w") as fh:
        for p in bench.passages:
            fh.write(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n")
    with open(folder / "questions.jsonl", "w") as fh:
        for q in bench.questions:
            row = {
                "id": q.id,
                "question": q.question,
                "answers": list(q.answers),
                "gold_ids": list(q.gold_ids),
                "type": q.type,
            }
            fh.write(json.dumps(row) + "\n")
    return folder


@pytest.fixture
def pools_started(monkeypatch) -> list:
    """The arguments of every ParsePool started in the test (one entry per pool)."""
    from llama_index_graphrag_ext.core.text.parallel import ParsePool

    started: list = []
    original = ParsePool.__init__

    def counting(self, *args, **kwargs):
        started.append(args)
        original(self, *args, **kwargs)

    monkeypatch.setattr(ParsePool, "__init__", counting)
    return started
