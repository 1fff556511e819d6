"""The synthetic corpora: benchmark passages pooled, cut, ordered and perturbed.

Real text throughout: the shared benchmark corpora, then perturbed copies
(:func:`perturb`) where a size needs more. Sizes are nested (1k is the head of 4k).
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Sequence
from pathlib import Path

from ...core.text import split_long_text
from ..data import Passage, Question, load_benchmark

#: Benchmark texts longer than this are cut into passage-sized pieces.
MAX_PASSAGE_CHARS = 800

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")


def default_benchmark_dirs() -> list[Path]:
    """The benchmark folders (``$GRAPHRAG_BENCHMARKS``, else the checkout's ``benchmarks/``)."""
    from ..data import BUNDLED

    root = os.environ.get("GRAPHRAG_BENCHMARKS")
    base = Path(root) if root else BUNDLED
    return sorted(p for p in base.glob("*") if (p / "corpus.jsonl").is_file())


def load_pool(
    benchmark_dirs: Sequence[str | os.PathLike], max_chars: int = MAX_PASSAGE_CHARS
) -> tuple[list[Passage], list[tuple[str, list[Question]]]]:
    """The union of the benchmark corpora, and each set's questions.

    Ids are prefixed with the set's folder name, gold ids too. Texts longer than
    ``max_chars`` are cut into pieces ``<id>#<n>`` keeping the title; gold
    passages stay whole.

    Returns:
        ``(passages, [(set name, questions), ...])`` in folder order.
    """
    passages: list[Passage] = []
    questions: list[tuple[str, list[Question]]] = []
    for folder in benchmark_dirs:
        bench = load_benchmark(folder)
        prefix = f"{bench.name}/"
        gold = {g for q in bench.questions for g in q.gold_ids}
        for p in bench.passages:
            if len(p.text) <= max_chars or p.id in gold:
                passages.append(Passage(prefix + p.id, p.title, p.text))
                continue
            for n, (_, piece) in enumerate(split_long_text(p.text, max_chars)):
                if piece.strip():
                    passages.append(Passage(f"{prefix}{p.id}#{n}", p.title, piece.strip()))
        questions.append(
            (
                bench.name,
                [
                    Question(
                        q.id,
                        q.question,
                        q.answers,
                        tuple(prefix + g for g in q.gold_ids),
                        q.type,
                    )
                    for q in bench.questions
                ],
            )
        )
    return passages, questions


def split_sentences_rule(text: str) -> list[str]:
    """Sentences by a punctuation rule (fast, deterministic; used only to perturb)."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def perturb(passage: Passage, copy: int, seed: int = 0) -> Passage:
    """A perturbed copy of a passage, with the new id ``<id>~c<copy>``.

    A near-duplicate, as mirrored pages are: sentences shuffled and, from three
    on, one dropped (else one word dropped). Whole sentences stay intact, so
    their embeddings are shared through the cache. Seeded by ``(seed, copy, id)``.
    """
    rng = random.Random(f"{seed}:{copy}:{passage.id}")
    sentences = split_sentences_rule(passage.text)
    rng.shuffle(sentences)
    if len(sentences) >= 3:
        del sentences[rng.randrange(len(sentences))]
    else:  # too few orders to tell copies apart: drop a word too
        words = " ".join(sentences).split()
        if len(words) >= 2:
            del words[rng.randrange(1, len(words))]
        sentences = [" ".join(words)]
    return Passage(f"{passage.id}~c{copy}", passage.title, " ".join(sentences))


def synthesize(
    pool: Sequence[Passage], size: int, *, first: Sequence[str] = (), seed: int = 0
) -> list[Passage]:
    """A corpus of exactly ``size`` passages from ``pool`` (nested across sizes).

    ``first`` (the query set's gold passages) comes first, then the pool in a
    seeded order, then perturbed copies in the same order, copy 1 before copy 2.

    Raises:
        ValueError: ``size`` is not positive or the pool is empty.
    """
    if size <= 0:
        raise ValueError(f"size must be positive, got {size}")
    if not pool:
        raise ValueError("the passage pool is empty")
    by_id = {p.id: p for p in pool}
    head = [by_id[i] for i in dict.fromkeys(first) if i in by_id]
    chosen = {p.id for p in head}
    rest = [p for p in pool if p.id not in chosen]
    random.Random(seed).shuffle(rest)
    order = head + rest
    out = list(order[:size])
    copy = 1
    while len(out) < size:
        out.extend(perturb(p, copy, seed) for p in order[: size - len(out)])
        copy += 1
    return out


def query_set(questions: Sequence[tuple[str, list[Question]]], per_set: int) -> list[Question]:
    """The first ``per_set`` questions of each set, in set order."""
    return [q for _, qs in questions for q in qs[:per_set]]
