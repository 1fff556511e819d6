"""Any embedder from the command line: a local folder, a cached model id, module:Class."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from llama_index_graphrag_ext.cli import main
from llama_index_graphrag_ext.core.defaults import embedded_embedding_path, make_embedder
from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding


def _docs(root: Path) -> Path:
    root.mkdir()
    (root / "a.txt").write_text("Marie Curie studied radioactivity in Paris.\n")
    (root / "b.txt").write_text("The Parkes telescope stands in New South Wales.\n")
    return root


def test_a_local_model_folder_is_recorded_named_and_reused(tmp_path, capsys):
    docs, out = _docs(tmp_path / "docs"), tmp_path / "idx"
    model = embedded_embedding_path()
    argv = ["index", str(docs), "--method", "dense", "--out", str(out), "--quiet"]
    assert main([*argv, "--embed-model", model]) == 0
    assert (
        "embedder: all-MiniLM-L6-v2 (bundled, offline), 384 dimensions" in capsys.readouterr().out
    )
    collection = json.loads((out / "index" / "collection.json").read_text())
    assert collection["embed_model"] == str(Path(model).resolve())
    assert main(["query", str(out), "telescope in Australia", "--no-answer", "--json"]) == 0
    passages = json.loads(capsys.readouterr().out)["passages"]
    assert Path(passages[0]["file"]).name == "b.txt"
    assert main(["info", str(out)]) == 0
    assert "384 dimensions" in capsys.readouterr().out


def test_an_embedding_class_with_arguments(tmp_path, capsys):
    spec = "llama_index_graphrag_ext.core.hash_embedding:HashEmbedding,dim=64"
    embedder = make_embedder(spec)
    assert isinstance(embedder, HashEmbedding) and len(embedder.get_text_embedding("x")) == 64
    with pytest.raises(ValueError, match="not a LlamaIndex embedding"):
        make_embedder("pathlib:Path")
    with pytest.raises(ValueError, match="cannot import"):
        make_embedder("no_such_package.mod:Embedder")


def test_a_model_id_comes_from_the_local_cache_only(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    snapshot = cache / "models--acme--mini" / "snapshots" / "0123abc"
    shutil.copytree(embedded_embedding_path(), snapshot)
    (cache / "models--acme--mini" / "refs").mkdir()
    (cache / "models--acme--mini" / "refs" / "main").write_text("0123abc")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    embedder = make_embedder("acme/mini")
    assert len(embedder.get_text_embedding("hello")) == 384
    with pytest.raises(ValueError, match="not in the local Hugging Face cache"):
        make_embedder("acme/absent")
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_update_refuses_another_embedder(tmp_path, capsys):
    docs, out = _docs(tmp_path / "docs"), tmp_path / "idx"
    base = ["--method", "bm25", "--quiet"]
    assert main(["index", str(docs), *base, "--out", str(out), "--embed-model", "hash:64"]) == 0
    (docs / "c.txt").write_text("A third note.\n")
    code = main(["index", str(docs), "--update", str(out), "--embed-model", "hash:128", "--quiet"])
    assert code == 2
    assert "was built with the embedder hash:64, not hash:128" in capsys.readouterr().err
    assert main(["index", str(docs), "--update", str(out), "--quiet"]) == 0


# --------------------------------------------------------------------------- rerankers


def test_a_reranker_is_recorded_and_applied_by_query(tmp_path, capsys):
    docs, out = _docs(tmp_path / "docs"), tmp_path / "idx"
    strict = "llama_index.core.postprocessor:SimilarityPostprocessor,similarity_cutoff=0.99"
    argv = ["index", str(docs), "--method", "dense", "--out", str(out), "--quiet"]
    assert main([*argv, "--embed-model", "hash:64", "--reranker", strict]) == 0
    assert json.loads((out / "index" / "collection.json").read_text())["reranker"] == strict
    capsys.readouterr()
    assert main(["query", str(out), "telescope", "--no-answer", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passages"] == []  # all below the cutoff
    keep = "llama_index.core.postprocessor:LongContextReorder"  # another, for this run only
    assert main(["query", str(out), "telescope", "--no-answer", "--json", "--reranker", keep]) == 0
    passages = json.loads(capsys.readouterr().out)["passages"]
    assert len(passages) == 2 and {p["reranker"] for p in passages} == {keep}
    assert main(["info", str(out)]) == 0 and f"reranker:   {strict}" in capsys.readouterr().out


def test_a_local_cross_encoder_reranks_through_flag_embedding(tmp_path, capsys):
    from support.cross_encoder import build_minilm_cross_encoder

    folder = build_minilm_cross_encoder(tmp_path / "ce")
    docs, out = _docs(tmp_path / "docs"), tmp_path / "idx"
    argv = ["index", str(docs), "--method", "bm25", "--out", str(out), "--quiet"]
    assert main([*argv, "--reranker", str(folder)]) == 0
    capsys.readouterr()
    assert main(["query", str(out), "telescope", "--no-answer", "--json"]) == 0
    passages = json.loads(capsys.readouterr().out)["passages"]
    assert passages and passages[0]["reranker"] == str(folder.resolve())


def test_an_unknown_reranker_fails_the_build_in_one_line(tmp_path, capsys):
    docs = _docs(tmp_path / "docs")
    argv = ["index", str(docs), "--method", "bm25", "--out", str(tmp_path / "idx"), "--quiet"]
    assert main([*argv, "--reranker", "pathlib:Path"]) == 2
    assert "not a LlamaIndex node postprocessor" in capsys.readouterr().err


def test_a_reranked_answer_is_written_from_the_reranked_passages(tmp_path):
    from llama_index.core.llms import MockLLM

    from llama_index_graphrag_ext.documents.querying import OpenIndex

    docs, out = _docs(tmp_path / "docs"), tmp_path / "idx"
    assert main(["index", str(docs), "--method", "bm25", "--out", str(out), "--quiet"]) == 0
    keep = "llama_index.core.postprocessor:LongContextReorder"
    opened = OpenIndex(out, MockLLM(max_tokens=6), reranker=keep)
    reply = opened.ask("telescope", top_k=1)
    assert reply["answer"] and len(reply["passages"]) == 1
    assert reply["passages"][0]["reranker"] == keep
    passages, pieces, finish = opened.ask("telescope", top_k=1, stream=True)
    streamed = "".join(pieces)
    assert streamed and finish(streamed)["answer"] == streamed and passages
