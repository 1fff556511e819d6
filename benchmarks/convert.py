"""Turn the public MuSiQue-Ans or 2WikiMultiHopQA files into the suite's benchmark format.

Nothing is downloaded: fetch the source file first (see README.md), then

    python benchmarks/convert.py musique musique_ans_v1.0_dev.jsonl --limit 500 --out DIR
    python benchmarks/convert.py 2wiki dev.json --limit 500 --out DIR

The corpus is every paragraph the chosen questions come with (each question's
gold and distractors), one passage per distinct title and text; a question's
gold ids are its supporting paragraphs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

SOURCES = {
    "musique": (
        "MuSiQue-Ans (StonyBrookNLP/musique), file {file}",
        "CC BY 4.0 (MuSiQue)",
    ),
    "2wiki": (
        "2WikiMultiHopQA (Alab-NII/2wikimultihop), file {file}",
        "Apache-2.0 (2WikiMultiHopQA)",
    ),
}


class Corpus:
    """Passages by (title, text), each with a stable id in order of first sight."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], str] = {}

    def add(self, title: str, text: str) -> str:
        key = (title.strip(), " ".join(text.split()))
        if key not in self.ids:
            self.ids[key] = f"p{len(self.ids)}"
        return self.ids[key]

    def rows(self) -> list[dict[str, str]]:
        return [{"id": i, "title": t, "text": x} for (t, x), i in self.ids.items()]


def musique(path: Path, limit: int | None, corpus: Corpus) -> list[dict[str, Any]]:
    """Rows of ``musique_ans_v1.0_*.jsonl`` (answerable questions only)."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if limit is not None and len(out) >= limit:
                break
            row = json.loads(line)
            if row.get("answerable") is False:
                continue
            gold = []
            for para in row["paragraphs"]:
                pid = corpus.add(para["title"], para["paragraph_text"])
                if para.get("is_supporting"):
                    gold.append(pid)
            hops = row["id"].split("hop")[0] + "hop" if "hop" in row["id"] else ""
            answers = [row["answer"], *row.get("answer_aliases", [])]
            out.append(_question(row["id"], row["question"], answers, gold, hops))
    return out


def two_wiki(path: Path, limit: int | None, corpus: Corpus) -> list[dict[str, Any]]:
    """Rows of 2WikiMultiHopQA's ``dev.json`` (a JSON list)."""
    out = []
    for row in json.loads(path.read_text(encoding="utf-8"))[:limit]:
        by_title = {title: corpus.add(title, " ".join(sents)) for title, sents in row["context"]}
        supporting = dict.fromkeys(title for title, _ in row["supporting_facts"])
        gold = [by_title[t] for t in supporting if t in by_title]
        out.append(_question(row["_id"], row["question"], [row["answer"]], gold, row["type"]))
    return out


def _question(qid: str, text: str, answers: list[str], gold: list[str], kind: str) -> dict:
    return {"id": qid, "question": text, "answers": answers, "gold_ids": gold, "type": kind}


def convert(kind: str, source: Path, out: Path, limit: int | None = None) -> dict[str, Any]:
    """Write ``corpus.jsonl``, ``questions.jsonl`` and ``meta.json`` into ``out``."""
    corpus = Corpus()
    questions = (musique if kind == "musique" else two_wiki)(source, limit, corpus)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus.jsonl", corpus.rows()), ("questions.jsonl", questions)):
        with open(out / name, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    described, licence = SOURCES[kind]
    meta = {
        "source": described.format(file=source.name),
        "license": licence,
        "passages": len(corpus.ids),
        "questions": len(questions),
        "questions_with_gold": sum(1 for q in questions if q["gold_ids"]),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=sorted(SOURCES))
    parser.add_argument("source", type=Path, help="the downloaded source file")
    parser.add_argument("--out", type=Path, required=True, help="folder to write")
    parser.add_argument("--limit", type=int, help="first N questions (default: all)")
    args = parser.parse_args(argv)
    meta = convert(args.kind, args.source, args.out, args.limit)
    print(f"{args.out}: {meta['questions']} questions, {meta['passages']} passages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
