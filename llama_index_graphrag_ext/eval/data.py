"""Benchmark sets in the suite's canonical format (``corpus.jsonl``, ``questions.jsonl``, ``meta.json``)."""

from __future__ import annotations

import json
import logging
import os
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llama_index.core.schema import Document

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Passage:
    """One corpus entry: becomes one ``Document`` whose ``doc_id`` is ``id``."""

    id: str
    title: str
    text: str

    def to_document(self) -> Document:
        """The passage as a Document: text ``"title\\ntext"``, title also in metadata."""
        body = f"{self.title}\n{self.text}" if self.title else self.text
        return Document(
            id_=self.id,
            text=body,
            metadata={"title": self.title},
            # The title is already the text's first line.
            excluded_embed_metadata_keys=["title"],
            excluded_llm_metadata_keys=["title"],
        )


@dataclass(frozen=True)
class Question:
    """One question with its gold answers (may be empty) and gold passage ids."""

    id: str
    question: str
    answers: tuple[str, ...] = ()
    gold_ids: tuple[str, ...] = ()
    type: str = ""


@dataclass
class Benchmark:
    """A loaded benchmark set."""

    name: str
    passages: list[Passage]
    questions: list[Question]
    meta: dict[str, Any] = field(default_factory=dict)

    def documents(self) -> list[Document]:
        """Every passage as a ``Document``."""
        return [p.to_document() for p in self.passages]

    def subset(self, limit: int | None = None, max_passages: int | None = None) -> Benchmark:
        """The first ``limit`` questions, and optionally a corpus sample.

        With ``max_passages`` the corpus keeps every gold passage of the kept
        questions, then fills up with the other passages in file order.
        """
        questions = self.questions[:limit] if limit else list(self.questions)
        passages = self.passages
        if max_passages is not None and max_passages < len(passages):
            gold = {g for q in questions for g in q.gold_ids}
            chosen = [p for p in passages if p.id in gold]
            for p in passages:
                if len(chosen) >= max(max_passages, len(gold)):
                    break
                if p.id not in gold:
                    chosen.append(p)
            keep = {p.id for p in chosen}
            passages = [p for p in passages if p.id in keep]
        return Benchmark(self.name, list(passages), questions, dict(self.meta))

    def without_titles(self) -> Benchmark:
        """The same set with every passage's title dropped (``<name>-no-titles``).

        How a corpus without meaningful titles (chat sessions, tickets) looks to
        the methods that read titles.
        """
        passages = [Passage(p.id, "", p.text) for p in self.passages]
        return Benchmark(f"{self.name}-no-titles", passages, list(self.questions), dict(self.meta))

    def joined(self, per_document: int, seed: int = 0) -> Benchmark:
        """The same questions over long documents, ``per_document`` passages each
        (``<name>-joined<N>``).

        How a corpus of long, many-topic documents looks: shuffled passages
        joined into untitled documents of ``"title: text"`` paragraphs; a
        question's gold becomes the documents holding its gold passages.

        Raises:
            ValueError: ``per_document`` is below 2.
        """
        if per_document < 2:
            raise ValueError("per_document must be at least 2 (1 is the set itself)")
        order = list(self.passages)
        random.Random(seed).shuffle(order)
        documents, home = [], {}
        for start in range(0, len(order), per_document):
            group = order[start : start + per_document]
            doc_id = f"{self.name}-doc{start // per_document}"
            for p in group:
                home[p.id] = doc_id
            body = "\n\n".join(f"{p.title}: {p.text}" if p.title else p.text for p in group)
            documents.append(Passage(doc_id, "", body))
        questions = [
            replace(q, gold_ids=tuple(dict.fromkeys(home[g] for g in q.gold_ids)))
            for q in self.questions
        ]
        meta = {**self.meta, "joined": {"per_document": per_document, "seed": seed}}
        return Benchmark(f"{self.name}-joined{per_document}", documents, questions, meta)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
    return rows


#: The sets a checkout carries (``benchmarks/`` beside the package), found by name.
BUNDLED = Path(__file__).resolve().parents[2] / "benchmarks"


def bundled_sets() -> list[str]:
    """Names of the sets in :data:`BUNDLED` (none in an install without the checkout)."""
    if not BUNDLED.is_dir():
        return []
    return sorted(p.name for p in BUNDLED.iterdir() if (p / "corpus.jsonl").is_file())


def find_benchmark(name_or_path: str | os.PathLike) -> Path:
    """A benchmark folder: the path given, else the bundled set of that name.

    Raises:
        FileNotFoundError: Neither exists (the message lists the bundled sets).
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if (BUNDLED / str(name_or_path)).is_dir() and str(name_or_path) in bundled_sets():
        return BUNDLED / str(name_or_path)
    sets = ", ".join(bundled_sets()) or "none in this install"
    raise FileNotFoundError(f"{name_or_path}: no such benchmark folder (bundled sets: {sets})")


def load_benchmark(folder: str | os.PathLike) -> Benchmark:
    """Load a benchmark folder in the canonical format (a bundled set by its name).

    Raises:
        FileNotFoundError: No such set, or the folder lacks ``corpus.jsonl`` or
            ``questions.jsonl``.
        ValueError: Malformed lines, duplicate passage ids, or gold ids not in the corpus.
    """
    folder = find_benchmark(folder)
    for name in ("corpus.jsonl", "questions.jsonl"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name} not found: is {folder} a benchmark folder?")
    passages = []
    seen: set[str] = set()
    for row in _read_jsonl(folder / "corpus.jsonl"):
        pid = str(row["id"])
        if pid in seen:
            raise ValueError(f"{folder}: duplicate passage id {pid!r}")
        seen.add(pid)
        passages.append(Passage(pid, str(row.get("title") or ""), str(row.get("text") or "")))
    questions = [
        Question(
            id=str(row["id"]),
            question=str(row["question"]),
            answers=tuple(str(a) for a in row.get("answers") or ()),
            gold_ids=tuple(str(g) for g in row.get("gold_ids") or ()),
            type=str(row.get("type") or ""),
        )
        for row in _read_jsonl(folder / "questions.jsonl")
    ]
    missing = {g for q in questions for g in q.gold_ids} - seen
    if missing:
        raise ValueError(
            f"{folder}: {len(missing)} gold ids are not in the corpus, e.g. {sorted(missing)[:3]}"
        )
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    return Benchmark(folder.name, passages, questions, meta)
