"""A user's real folders: files without an extension, --include, titles from headings."""

from __future__ import annotations

import json
import os
from pathlib import Path

from llama_index_graphrag_ext.cli import main
from llama_index_graphrag_ext.documents.reading import ReadFile, heading_of

EMBED = ["--embed-model", "hash:384", "--quiet"]


def _index(docs: Path, out: Path, *more: str) -> dict:
    assert main(["index", str(docs), "--method", "bm25", "--out", str(out), *EMBED, *more]) == 0
    return json.loads((out / "index" / "collection.json").read_text())


def test_files_without_an_extension_are_read_when_they_are_text(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "README").write_text("Project Lyra\n\nLyra indexes the telescope logs of Arecibo.\n")
    (docs / "NEWS").write_text("Version 2 adds the Parkes archive.\n")
    (docs / "blob").write_bytes(os.urandom(2048))
    collection = _index(docs, tmp_path / "idx")
    assert sorted(Path(p).name for p in collection["files"]) == ["NEWS", "README"]
    assert [Path(s["path"]).name for s in collection["skipped"]] == ["blob"]
    capsys.readouterr()
    assert main(["query", str(tmp_path / "idx"), "Parkes archive", "--no-answer", "--json"]) == 0
    passages = json.loads(capsys.readouterr().out)["passages"]
    assert Path(passages[0]["file"]).name == "NEWS"


def test_include_keeps_only_matching_files_beside_exclude(tmp_path):
    docs = tmp_path / "docs"
    (docs / "drafts").mkdir(parents=True)
    (docs / "a.md").write_text("Alpha notes.\n")
    (docs / "b.txt").write_text("Beta notes.\n")
    (docs / "drafts" / "c.md").write_text("Gamma draft.\n")
    collection = _index(docs, tmp_path / "idx", "--include", "*.md", "--exclude", "drafts/*")
    assert [Path(p).name for p in collection["files"]] == ["a.md"]


def test_titles_come_from_headings_never_from_file_names():
    def title(text: str, name: str = "/notes/cue.md") -> str | None:
        return ReadFile(name, "0" * 64, text).document().metadata.get("title")

    assert title("# Field notes\n\nWe met Ada in Turin.") == "Field notes"
    assert title("Field notes\n===========\n\nWe met Ada.") == "Field notes"
    assert title("Field notes\n\nWe met Ada.") == "Field notes"
    assert title("We met Ada in Turin. She spoke about engines.") is None  # prose: no title
    assert heading_of("") is None
