"""``graphrag-ext index`` / ``query`` / ``info`` end to end on a folder of real files (LLM-free).

The folder holds Markdown, plain text, HTML, a two-page PDF and a DOCX made
here, an image (unsupported) and a broken DOCX (unreadable); the embedder is
the near-free ``hash:384`` so no model loads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_graphrag_ext.cli import main

EMBED = ["--embed-model", "hash:384", "--quiet"]
#: Every LLM-free method the suite registers, the baselines included (LP-RAG trains briefly).
LLM_FREE = [
    ("dense", []),
    ("bm25", []),
    ("li-hybrid", []),
    ("qcg", []),
    ("cue", []),
    ("chainrag", []),
    ("fgrag", []),
    ("lprag:pseudo", ["--set", "epochs=3", "--set", "hidden=32"]),
]


def make_pdf(path: Path, pages: list[str]) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(path))


def make_docx(path: Path, paragraphs: list[str]) -> None:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))


def make_corpus(root: Path) -> Path:
    (root / "notes").mkdir(parents=True)
    (root / "curie.md").write_text(
        "# Marie Curie\n\nMarie Curie was a physicist and chemist who studied radioactivity. "
        "She was born in Warsaw in 1867.\n"
    )
    (root / "notes" / "pierre.txt").write_text(
        "Pierre Curie was a French physicist. He married Marie Curie in 1895.\n"
    )
    (root / "warsaw.html").write_text(
        "<html><head><script>var tracker = 1;</script></head><body><h1>Warsaw</h1>"
        "<p>Warsaw is the capital of Poland, on the Vistula river.</p></body></html>"
    )
    make_pdf(
        root / "nobel.pdf",
        [
            "The Nobel Prize in Physics 1903 went to Becquerel and the Curies.",
            "The Nobel Prize in Chemistry 1911 went to Marie Curie for polonium and radium.",
        ],
    )
    make_docx(root / "notes" / "lab.docx", ["The lab notebook mentions a glowing radium salt."])
    (root / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / "broken.docx").write_bytes(b"this is not a zip archive")
    return root


@pytest.fixture
def corpus(tmp_path) -> Path:
    return make_corpus(tmp_path / "docs")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def query_json(capsys, folder: Path, question: str, *extra: str) -> dict:
    code, out, err = run(capsys, "query", str(folder), question, "--json", *extra)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(("method", "extra"), LLM_FREE, ids=[m for m, _ in LLM_FREE])
def test_index_query_update_info(corpus, tmp_path, capsys, method, extra):
    out_dir = tmp_path / "index"
    code, out, err = run(
        capsys, "index", str(corpus), "--method", method, "--out", str(out_dir), *EMBED, *extra
    )
    assert code == 0, err
    # Every type is read; the image and the broken DOCX are skipped, listed and counted.
    assert "indexed 5 file(s)" in out
    assert "skipped 2 file(s)" in out
    assert "photo.png: unsupported type .png" in out
    assert "broken.docx: unreadable" in out

    # The chunk about the 1911 prize is on the PDF's second page, and the result says so.
    answer = query_json(capsys, out_dir, "Nobel Prize in Chemistry 1911 polonium", "--top-k", "5")
    assert answer["answer"] is None and "no LLM" in answer["note"]
    hits = {Path(p["file"]).name: p for p in answer["passages"]}
    assert "nobel.pdf" in hits
    if method in ("dense", "bm25", "cue"):  # the methods that rank it first on this corpus
        assert Path(answer["passages"][0]["file"]).name == "nobel.pdf"
    pdf_hits = [p for p in answer["passages"] if p["file"].endswith("nobel.pdf")]
    assert {p["page"] for p in pdf_hits} <= {"1", "2"} and pdf_hits[0]["page"] is not None
    assert all(p["evidence"] for p in answer["passages"])  # the retriever's why
    assert all(p["start_char"] is not None for p in answer["passages"])

    # The HTML is read as text: the script is not.
    assert "tracker" not in json.dumps(answer)

    # Change one file, add one, remove one: --update does exactly that.
    (corpus / "notes" / "pierre.txt").write_text(
        "Pierre Curie discovered piezoelectricity with his brother Jacques.\n"
    )
    (corpus / "notes" / "eve.txt").write_text("Eve Curie wrote a biography of her mother.\n")
    (corpus / "warsaw.html").unlink()
    code, out, err = run(capsys, "index", str(corpus), "--update", str(out_dir), "--quiet")
    assert code == 0, err
    assert "1 new, 1 changed, 1 removed, 3 unchanged" in out
    assert f"+ {corpus / 'notes' / 'eve.txt'}" in out
    assert f"~ {corpus / 'notes' / 'pierre.txt'}" in out
    assert f"- {corpus / 'warsaw.html'}" in out

    answer = query_json(capsys, out_dir, "Who wrote a biography of her mother?", "--top-k", "10")
    files = [Path(p["file"]).name for p in answer["passages"]]
    assert "eve.txt" in files and "warsaw.html" not in files
    texts = " ".join(p["text"] for p in answer["passages"])
    assert "married Marie Curie" not in texts  # the old version of the changed file is gone

    # A second update with nothing changed does nothing.
    code, out, _ = run(capsys, "index", str(corpus), "--update", str(out_dir), "--quiet")
    assert code == 0 and "nothing to do" in out

    code, out, err = run(capsys, "info", str(out_dir))
    assert code == 0, err
    assert f"method:     {method}" in out
    assert "documents:  5 file(s)" in out
    assert "LLM usage:  0 call(s)" in out
    info = json.loads(run(capsys, "info", str(out_dir), "--json")[1])
    assert sorted(Path(p).name for p in info["files"]) == sorted(
        ["curie.md", "pierre.txt", "eve.txt", "nobel.pdf", "lab.docx"]
    )
    assert [h["action"] for h in info["history"]] == ["built", "updated"]
    assert info["llm"]["tier"] == "llm-free"


def test_text_output_names_file_position_and_evidence(corpus, tmp_path, capsys):
    out_dir = tmp_path / "index"
    assert (
        run(capsys, "index", str(corpus), "--method", "bm25", "--out", str(out_dir), *EMBED)[0] == 0
    )
    code, out, _ = run(capsys, "query", str(out_dir), "glowing radium salt", "--no-answer")
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith("[1] ") and "lab.docx (chars 0-" in first
    assert '"matched_terms"' in out  # BM25's evidence: the query terms it matched


def test_index_folder_inside_the_documents_is_not_read(corpus, capsys):
    out_dir = corpus / "index"
    for argv in (["--method", "bm25", "--out", str(out_dir)], ["--update", str(out_dir)]):
        code, out, err = run(capsys, "index", str(corpus), *argv, *EMBED)
        assert code == 0, err
        assert "collection.json" not in out and "skipped 2 file(s)" in out


def test_chunking_options_and_exclude(corpus, tmp_path, capsys):
    out_dir = tmp_path / "index"
    code, out, err = run(
        capsys,
        "index",
        str(corpus),
        "--method",
        "dense",
        "--out",
        str(out_dir),
        "--chunk-size",
        "20",
        "--chunk-overlap",
        "0",
        "--exclude",
        "*.pdf",
        *EMBED,
    )
    assert code == 0, err
    info = json.loads(run(capsys, "info", str(out_dir), "--json")[1])
    assert info["chunking"]["chunk_size"] == 20
    assert not any(p.endswith(".pdf") for p in info["files"])
    assert sum(f["chunks"] for f in info["files"].values()) > len(info["files"])


def test_bad_inputs_get_a_message_and_a_nonzero_exit(corpus, tmp_path, capsys):
    out_dir = tmp_path / "index"
    assert (
        run(capsys, "index", str(corpus), "--method", "bm25", "--out", str(out_dir), *EMBED)[0] == 0
    )

    def fails(*argv: str, match: str) -> None:
        if argv[0] == "index":
            argv = (*argv, "--quiet")
        code, _, err = run(capsys, *argv)
        assert code == 2, err
        assert err.startswith("error: ") and match in err, err
        assert "Traceback" not in err

    fails("index", str(tmp_path / "nope"), "--method", "bm25", "--out", "x", match="no such file")
    (tmp_path / "empty").mkdir()
    fails("index", str(tmp_path / "empty"), "--method", "bm25", "--out", "x", match="no file")
    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    (only_bad / "a.png").write_bytes(b"x")
    fails(
        "index", str(only_bad), "--method", "bm25", "--out", "x", match="no file could be indexed"
    )
    fails("index", str(corpus), "--method", "nope", "--out", "x", match="unknown method")
    fails("index", str(corpus), "--method", "fusion-qcg-cue-bm25", "--out", "x", match="fuses")
    # A DIR that holds another method's index, for a new build or an update.
    fails("index", str(corpus), "--method", "dense", "--out", str(out_dir), match="holds a bm25")
    fails("index", str(corpus), "--update", str(out_dir), "--method", "dense", match="bm25")
    # A query on a folder that is not an index, or that does not exist.
    fails("query", str(tmp_path / "empty"), "q", match="not an index folder")
    fails("query", str(tmp_path / "missing"), "q", match="no such folder")
    fails("info", str(tmp_path / "empty"), match="not an index folder")
    # An index written in an older format version.
    manifest = out_dir / "index" / "collection.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "format_version": 0}))
    fails("query", str(out_dir), "q", match="format 0")
    fails("index", str(corpus), "--update", str(out_dir), match="Rebuild it")
    # The method's own index of an older format (its manifest checked on load).
    manifest.write_text(json.dumps(data))
    method_manifest = out_dir / "index" / "method" / "docstore.json"
    assert method_manifest.is_file()


def test_graph_index_of_older_format_is_refused(corpus, tmp_path, capsys):
    out_dir = tmp_path / "index"
    code, _, err = run(
        capsys, "index", str(corpus), "--method", "cue", "--out", str(out_dir), *EMBED
    )
    assert code == 0, err
    manifest = out_dir / "index" / "method" / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "format_version": 0}))
    code, _, err = run(capsys, "query", str(out_dir), "Warsaw")
    assert code == 2 and "format version 0" in err and "Traceback" not in err


def test_persisted_index_of_python_api_is_explained(tmp_path, capsys):
    from llama_index_graphrag_ext.core.persist import atomic_dir, write_manifest

    with atomic_dir(tmp_path / "raw") as tmp:
        write_manifest(tmp, "qcg", 1)
    code, _, err = run(capsys, "query", str(tmp_path / "raw"), "q")
    assert code == 2 and "written by persist()" in err


def _llm_free_presets() -> list[str]:
    from llama_index_graphrag_ext.specs import SPECS

    return [
        f"{spec.name}:{preset}"
        for spec in SPECS.values()
        for preset in spec.config.presets
        if not spec.config.preset(preset).uses_llm
    ]


@pytest.mark.parametrize("name", _llm_free_presets())
def test_every_llm_free_preset_builds_its_own_config(name):
    from llama_index.core.schema import TextNode

    from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding
    from llama_index_graphrag_ext.documents.methods import build, resolve

    method = resolve(name, {"epochs": "2"} if name.startswith("lprag") else {})
    chunks = [
        TextNode(text=f"Passage {i} names the river Vistula and the year 18{i}0.") for i in range(3)
    ]
    index = build(method, chunks, HashEmbedding(dim=32), None, None, False)
    preset = name.partition(":")[2]
    assert index.config == method.config
    assert index.config.origin.startswith(preset)


@pytest.mark.parametrize(
    ("name", "beam", "path_weight", "vectors"),
    [
        ("cue", 10, 0.25, "late"),
        ("cue:path-weighted", 8, 0.5, "late"),
        ("cue:paper/alpha=0/query_entities=spacy", 5, 0.0, "separate"),
    ],
)
def test_each_cue_name_builds_and_queries_with_its_preset(name, beam, path_weight, vectors):
    from llama_index.core.schema import TextNode

    from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding
    from llama_index_graphrag_ext.documents.methods import build, resolve

    chunks = [
        TextNode(text=f"Warsaw lies on the Vistula. Marie Curie was born in 18{i}7.")
        for i in range(3)
    ]
    method, embed = resolve(name, {}), HashEmbedding(dim=32)
    assert not method.uses_llm
    index = build(method, chunks, embed, None, None, False)
    assert index.config.vectors.unit_vectors == index.config.vectors.entity_vectors == vectors
    ranker = index.as_retriever(similarity_top_k=5)
    assert (ranker.params.M, ranker.params.path_weight) == (beam, path_weight)
    assert ranker.retrieve("Where was Marie Curie born?")
