"""Commands load only what they need: --help, info and bench --list import no model stack,
and a BM25 query no embedder (timed whole-process in the notes, asserted here by module)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llama_index_graphrag_ext.cli import main

HEAVY = ("torch", "spacy", "transformers", "sentence_transformers", "llama_index")


def _imported(*argv: str) -> set[str]:
    code = (
        "import json, sys\n"
        "from llama_index_graphrag_ext.cli import main\n"
        "try:\n"
        f"    main({list(argv)!r})\n"
        "finally:\n"
        "    print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def bm25_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("imports")
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_text("Marie Curie studied radioactivity in Paris.\n")
    out = root / "idx"
    assert (
        main(["index", str(root / "docs"), "--method", "bm25", "--out", str(out), "--quiet"]) == 0
    )
    return out


@pytest.mark.parametrize("argv", [["--help"], ["bench", "--list"]])
def test_help_and_the_method_list_import_no_model_stack(argv):
    loaded = _imported(*argv)
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_info_imports_no_model_stack(bm25_folder):
    loaded = _imported("info", str(bm25_folder), "--verify")
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_a_bm25_query_loads_no_embedder(bm25_folder):
    loaded = _imported("query", str(bm25_folder), "radioactivity", "--no-answer")
    assert not loaded & {"torch", "spacy", "transformers", "sentence_transformers"}


def test_a_bm25_query_prints_no_library_debug_lines(bm25_folder):
    code = "from llama_index_graphrag_ext.cli import main\n"
    code += f"main(['query', {str(bm25_folder)!r}, 'radioactivity', '--no-answer'])\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "radioactivity" in done.stdout and "DEBUG" not in done.stderr, done.stderr
