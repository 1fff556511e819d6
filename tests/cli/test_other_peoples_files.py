"""Other people's files: encodings, a file too long, one the chunker cannot take, symlink
loops, terminal escapes, and index folders written with the user's umask."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from llama_index_graphrag_ext.cli import main
from llama_index_graphrag_ext.documents import indexing
from llama_index_graphrag_ext.documents.reading import decode

EMBED = ["--embed-model", "hash:384", "--quiet"]


@pytest.mark.parametrize(
    ("text", "encoding", "read_as"),
    [
        ("Le café Müller à Zürich est ouvert.", "latin-1", "cp1252"),
        ("Der Bäcker verkauft frisches Brot in München.", "cp1252", "cp1252"),
        ("Grüße aus Zürich, das Café am See.", "utf-16", "utf-16"),
        ("naïve café", "utf-8-sig", "utf-8-sig"),
        ("Привет, как дела? Это тестовый файл на русском языке.", "cp1251", "cp1251"),
        ("plain ASCII", "utf-8", "utf-8"),
    ],
)
def test_text_is_decoded_in_its_own_encoding(text, encoding, read_as):
    assert decode(text.encode(encoding)) == (text, read_as, 0)


def test_undecodable_bytes_are_counted_not_dropped():
    text, encoding, undecodable = decode(b"\xef\xbb\xbf" + "café".encode() + b" \xff end")
    assert (text, encoding, undecodable) == ("café \ufffd end", "utf-8-sig", 1)
    data = b"\xff\xfe" + "ok ".encode("utf-16-le") + b"\x00\xd8"  # a lone surrogate
    text, encoding, undecodable = decode(data)
    assert encoding == "utf-16" and undecodable == 1 and text.startswith("ok")


def test_accented_words_of_latin1_and_utf16_files_are_found(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cafe.txt").write_bytes("Le café Müller à Zürich sert du chocolat.".encode("latin-1"))
    (docs / "gruss.txt").write_bytes("Grüße aus Köln: die Bäckerei öffnet früh.".encode("utf-16"))
    (docs / "plain.md").write_text("Nothing accented in this one at all.\n")
    out = tmp_path / "idx"
    assert main(["index", str(docs), "--method", "bm25", "--out", str(out), *EMBED]) == 0
    said = capsys.readouterr().out
    assert "cafe.txt: read as cp1252" in said and "gruss.txt: read as utf-16" in said
    files = json.loads((out / "index" / "collection.json").read_text())["files"]
    encodings = {Path(p).name: f.get("encoding") for p, f in files.items()}
    assert encodings == {"cafe.txt": "cp1252", "gruss.txt": "utf-16", "plain.md": "utf-8"}
    for word, name in (("Müller Zürich", "cafe.txt"), ("Bäckerei Köln", "gruss.txt")):
        assert main(["query", str(out), word, "--json", "--no-answer", "--top-k", "1"]) == 0
        hit = json.loads(capsys.readouterr().out)["passages"][0]
        assert hit["file"].endswith(name) and word.split()[0] in hit["text"]


def test_a_50_mb_file_is_skipped_and_counted_and_the_rest_indexed(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "huge.txt").write_text("word " * 10_000_000)  # 50 MB of one paragraph
    (docs / "small.txt").write_text("Marie Curie studied radioactivity in Paris.\n")
    out = tmp_path / "idx"
    assert main(["index", str(docs), "--method", "bm25", "--out", str(out), *EMBED]) == 0
    said = capsys.readouterr().out
    assert "huge.txt: too long: 50,000,000 characters" in said
    assert "indexed 1 file(s)" in said
    collection = json.loads((out / "index" / "collection.json").read_text())
    assert [Path(s["path"]).name for s in collection["skipped"]] == ["huge.txt"]


def test_a_file_the_chunker_cannot_take_is_skipped_and_the_rest_indexed(
    tmp_path, capsys, monkeypatch
):
    real = indexing.run_transformations

    def splitter(docs, transformations, **kwargs):  # as nltk's 5 s regex limit fails
        if any("TRAP" in d.text for d in docs):
            raise TimeoutError("regular-expression match exceeded its 5.0s time limit")
        return real(docs, transformations, **kwargs)

    monkeypatch.setattr(indexing, "run_transformations", splitter)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "trap.txt").write_text("TRAP " * 100)
    (docs / "a.txt").write_text("Marie Curie studied radioactivity in Paris.\n")
    (docs / "b.txt").write_text("Pierre Curie was a French physicist.\n")
    out = tmp_path / "idx"
    assert main(["index", str(docs), "--method", "bm25", "--out", str(out), *EMBED]) == 0
    said = capsys.readouterr().out
    assert "trap.txt: could not be chunked: regular-expression match exceeded" in said
    assert "indexed 2 file(s)" in said
    files = json.loads((out / "index" / "collection.json").read_text())["files"]
    assert sorted(Path(p).name for p in files) == ["a.txt", "b.txt"]


def test_a_symlink_loop_is_listed_never_the_end_of_the_run(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Marie Curie studied radioactivity in Paris.\n")
    os.symlink(docs / "loop2.txt", docs / "loop1.txt")
    os.symlink(docs / "loop1.txt", docs / "loop2.txt")
    out = tmp_path / "idx"
    assert main(["index", str(docs), "--method", "bm25", "--out", str(out), *EMBED]) == 0
    said = capsys.readouterr().out
    assert "loop1.txt: unreadable" in said and "loop2.txt: unreadable" in said
    assert "indexed 1 file(s)" in said


def test_control_characters_are_shown_never_obeyed(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    hostile = "Marie Curie \x1b[2J\x1b]0;pwned\x07 studied \x9b31m radioactivity."
    (docs / "curie.txt").write_text(hostile)
    out = tmp_path / "idx"
    assert main(["index", str(docs), "--method", "bm25", "--out", str(out), *EMBED]) == 0
    capsys.readouterr()
    assert main(["query", str(out), "radioactivity", "--no-answer", "--top-k", "1"]) == 0
    said = capsys.readouterr().out
    assert "\x1b" not in said and "\x07" not in said and "\x9b" not in said
    assert "\\u001b[2J" in said
    assert main(["query", str(out), "radioactivity", "--no-answer", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "\x1b[2J" in data["passages"][0]["text"]  # the JSON keeps the text, escaped


def test_index_folders_follow_the_users_umask(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Marie Curie studied radioactivity in Paris.\n")
    out = tmp_path / "idx"
    old = os.umask(0o022)
    try:
        assert main(["index", str(docs), "--method", "bm25", "--out", str(out), *EMBED]) == 0
    finally:
        os.umask(old)
    mode = stat.S_IMODE((out / "index").stat().st_mode)
    assert mode == 0o755


# --------------------------------------------------------------------------- one writer at a time


def _corpus(root: Path, names: list[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / f"{name}.txt").write_text(f"{name.capitalize()} is a document about {name}.\n")
    return root


def test_a_second_writer_is_refused_with_a_clear_message(tmp_path, capsys):
    from filelock import FileLock

    from llama_index_graphrag_ext.documents.lock import LOCK_FILE

    docs = _corpus(tmp_path / "docs", ["alpha", "beta"])
    out = tmp_path / "idx"
    assert main(["index", str(docs), "--method", "bm25", "--out", str(out), *EMBED]) == 0
    capsys.readouterr()
    with FileLock(str(out / LOCK_FILE)):  # another writer at work
        assert main(["index", str(docs), "--update", str(out), *EMBED]) == 2
        assert "being written by another graphrag-ext index run" in capsys.readouterr().err
        # Readers are never blocked.
        assert main(["query", str(out), "alpha", "--no-answer", "--json"]) == 0


def test_two_concurrent_updates_lose_nothing(tmp_path, capsys):
    import threading

    docs_a = _corpus(tmp_path / "a", ["alpha"])
    out = tmp_path / "idx"
    assert main(["index", str(docs_a), "--method", "bm25", "--out", str(out), *EMBED]) == 0
    # Each update indexes the folder plus one new file; both must land.
    _corpus(tmp_path / "a", ["beta"])
    results: list[int] = []

    def update() -> None:
        results.append(main(["index", str(docs_a), "--update", str(out), "--wait", "60", *EMBED]))

    threads = [threading.Thread(target=update) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [0, 0]
    collection = json.loads((out / "index" / "collection.json").read_text())
    assert sorted(Path(p).name for p in collection["files"]) == ["alpha.txt", "beta.txt"]
    actions = [h["action"] for h in collection["history"]]
    assert actions[0] == "built" and actions.count("updated") == 1  # the second had nothing to do


def test_leftovers_of_killed_writers_are_cleaned_by_the_next_one(tmp_path, capsys):
    docs = _corpus(tmp_path / "docs", ["alpha"])
    out = tmp_path / "idx"
    assert main(["index", str(docs), "--method", "bm25", "--out", str(out), *EMBED]) == 0
    (out / ".index.tmp-killed").mkdir()
    (out / ".index.tmp-killed" / "half.json").write_text("{")
    stale = out / ".index.old"
    stale.mkdir()
    _corpus(tmp_path / "docs", ["beta"])
    assert main(["index", str(docs), "--update", str(out), *EMBED]) == 0
    assert not (out / ".index.tmp-killed").exists() and not stale.exists()


def test_a_reader_never_restores_an_interrupted_swap(tmp_path, capsys):
    docs = _corpus(tmp_path / "docs", ["alpha"])
    out = tmp_path / "idx"
    assert main(["index", str(docs), "--method", "bm25", "--out", str(out), *EMBED]) == 0
    (out / "index").rename(out / ".index.old")  # a writer between its two renames
    capsys.readouterr()
    assert main(["query", str(out), "alpha", "--no-answer"]) == 2
    assert "is being updated" in capsys.readouterr().err
    assert not (out / "index").exists()  # the reader left the writer's swap alone
    _corpus(tmp_path / "docs", ["beta"])
    assert main(["index", str(docs), "--update", str(out), *EMBED]) == 0  # restored, updated
    files = json.loads((out / "index" / "collection.json").read_text())["files"]
    assert sorted(Path(p).name for p in files) == ["alpha.txt", "beta.txt"]


# --------------------------------------------------------------------------- damaged indexes


@pytest.mark.parametrize("method", ["bm25", "cue", "chainrag", "qcg"])
def test_every_damaged_file_gets_one_line_naming_it(tmp_path, capsys, method):
    docs = _corpus(tmp_path / "docs", ["alpha", "beta", "gamma"])
    out = tmp_path / "idx"
    assert main(["index", str(docs), "--method", method, "--out", str(out), *EMBED]) == 0
    pristine = {p: p.read_bytes() for p in (out / "index" / "method").rglob("*") if p.is_file()}
    for path, data in pristine.items():
        path.write_bytes(data[: len(data) // 2] + b"\x00garbage")  # cut and scribbled over
        capsys.readouterr()
        status = main(["query", str(out), "alpha", "--no-answer", "--json"])
        err = capsys.readouterr().err
        path.write_bytes(data)
        assert status == 2, (path.name, err)  # every file is sealed: none is read past
        assert "Traceback" not in err and err.count("\n") <= 2, err
        assert "cannot be loaded" in err or "damaged" in err, err


def test_damage_that_still_parses_is_named_and_info_verify_lists_it(tmp_path, capsys):
    docs = _corpus(tmp_path / "docs", ["alpha", "beta", "gamma"])
    out = tmp_path / "idx"
    assert main(["index", str(docs), "--method", "cue", "--out", str(out), *EMBED]) == 0
    capsys.readouterr()
    assert main(["info", str(out), "--verify"]) == 0
    assert "match their checksums" in capsys.readouterr().out
    units = out / "index" / "method" / "units.ids.json"
    units.write_text("{}")  # still JSON: before, CUE-RAG then returned nothing, silently
    assert main(["query", str(out), "alpha", "--no-answer"]) == 2
    assert "units.ids.json is damaged" in capsys.readouterr().err
    assert main(["info", str(out), "--verify"]) == 2
    captured = capsys.readouterr()
    assert "damaged:    " in captured.out and "units.ids.json" in captured.out
    assert "1 damaged or missing file(s)" in captured.err


def test_a_manifest_may_not_choose_files_on_the_loaders_machine(tmp_path):
    from llama_index.core import Document

    from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding
    from llama_index_graphrag_ext.core.persist import CHECKSUM, IndexFormatError
    from llama_index_graphrag_ext.core.persist import _json_digest as digest
    from llama_index_graphrag_ext.cue import MultiPartiteIndex

    embed = HashEmbedding(dim=64)
    index = MultiPartiteIndex.from_documents(
        [Document(text="Marie Curie studied in Paris.")],
        embed_model=embed,
        cache_path=str(tmp_path / "llm.sqlite"),
    )
    index.persist(tmp_path / "idx")
    manifest_path = tmp_path / "idx" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["config"]["llm"]["cache_path"] is None  # a cache is never persisted
    manifest["config"]["graph"]["spacy_model"] = "/elsewhere/pipeline"  # as if handed over
    manifest[CHECKSUM] = digest(manifest)
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="spacy_model='/elsewhere/pipeline'"):
        MultiPartiteIndex.load(tmp_path / "idx", embed_model=embed)


def test_binary_pipes_and_undecodable_names_are_listed_never_the_end_of_the_run(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Marie Curie studied radioactivity in Paris.\n")
    (docs / "junk.txt").write_bytes(os.urandom(4096))  # a binary file under a text name
    os.mkfifo(docs / "pipe.txt")  # reading it would block the run forever
    (docs / os.fsdecode(b"caf\xe9.txt")).write_text("Rennes.\n")  # a Latin-1 file name
    out = tmp_path / "idx"
    assert main(["index", str(docs), "--method", "bm25", "--out", str(out), *EMBED]) == 0
    said = capsys.readouterr().out
    assert "junk.txt: binary content, not text" in said
    assert "pipe.txt: not a regular file" in said
    assert "caf\\xe9.txt: its name is not valid UTF-8" in said
    assert "indexed 1 file(s)" in said
