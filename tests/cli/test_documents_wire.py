"""The document commands through an OpenAI-compatible server (the wire suite's loopback one).

``--llm openai-like`` with ``OPENAI_BASE_URL`` pointing at a real HTTP server
that answers the suite's prompts like a capable model: the full tier builds,
answers, streams, counts its calls and tokens, resumes from its cache and
updates.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_graphrag_ext.cli import main

from .test_documents import EMBED, make_corpus, run


@pytest.fixture
def server(monkeypatch):
    from support.replies import ModelReplies
    from support.wire import WireServer

    wire = WireServer(ModelReplies()).start()
    monkeypatch.setenv("OPENAI_BASE_URL", wire.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", wire.api_key)
    try:
        yield wire
    finally:
        wire.stop()


def requests(server) -> int:
    return server.usage()[0]


def test_full_tier_build_answer_resume_update(server, tmp_path, capsys):
    corpus = make_corpus(tmp_path / "docs")
    out_dir = tmp_path / "index"
    argv = [
        "index",
        str(corpus),
        "--method",
        "qcg:paper",
        "--out",
        str(out_dir),
        "--llm",
        "openai-like",
    ]
    code, out, err = run(capsys, *argv, *EMBED)
    assert code == 0, err
    assert "LLM: OpenAILike(wire-model) from argument (tier full-llm)" in out  # as served
    built = requests(server)
    assert built > 0 and f"LLM: {built} call(s)" in out

    info = json.loads(run(capsys, "info", str(out_dir), "--json")[1])
    assert info["usage"]["calls"] == built and info["usage"]["total_tokens"] > 0
    assert info["llm"]["tier"] == "full-llm"
    assert [s["step"] for s in info["llm_steps"]] == ["doc2query"]
    assert info["llm_steps"][0]["tier"] == "full-llm" and info["llm_steps"][0]["fallbacks"] == 0
    assert any(Path(out_dir, "llm-cache").glob("*.sqlite"))

    # Built again from scratch (as after an interrupted run): every answer comes from the cache.
    code, out, err = run(capsys, *argv, *EMBED)
    assert code == 0, err
    assert requests(server) == built
    info = json.loads(run(capsys, "info", str(out_dir), "--json")[1])
    assert info["usage"]["calls"] == 0  # the calls this build paid for: none

    # An answer, then the passages; --json carries both.
    code, out, err = run(
        capsys, "query", str(out_dir), "When was Marie Curie born?", "--llm", "openai-like"
    )
    assert code == 0, err
    assert out.startswith("Answer: ") and "\n[1] " in out
    assert "\n(written by OpenAILike(" in out  # the answer names the model that wrote it
    answer = json.loads(
        run(
            capsys,
            "query",
            str(out_dir),
            "Where was Marie Curie born?",
            "--json",
            "--llm",
            "openai-like",
        )[1]
    )
    assert answer["answer"] and answer["llm"] == "OpenAILike(wire-model)"
    assert answer["passages"] and answer["passages"][0]["evidence"]["method"] == "qcg"

    # --stream writes the same answer as it arrives.
    code, out, err = run(
        capsys,
        "query",
        str(out_dir),
        "Where was Marie Curie born?",
        "--stream",
        "--llm",
        "openai-like",
    )
    assert code == 0, err
    assert out.startswith("Answer: ") and len(out.splitlines()[0]) > len("Answer: ")

    # --no-answer asks the server nothing.
    before = requests(server)
    code, out, _ = run(
        capsys, "query", str(out_dir), "Warsaw", "--no-answer", "--llm", "openai-like"
    )
    assert code == 0 and requests(server) == before and "Answer:" not in out

    # An update pays only for the new and changed files.
    (corpus / "notes" / "eve.txt").write_text("Eve Curie wrote a biography of her mother.\n")
    (corpus / "curie.md").unlink()
    before = requests(server)
    code, out, err = run(
        capsys, "index", str(corpus), "--update", str(out_dir), "--llm", "openai-like", "--quiet"
    )
    assert code == 0, err
    assert "1 new, 0 changed, 1 removed" in out
    assert requests(server) - before == 1  # one Doc2Query call for the one new chunk
    info = json.loads(run(capsys, "info", str(out_dir), "--json")[1])
    assert not any(p.endswith("curie.md") for p in info["files"])
    assert info["usage"]["calls"] == 1
    assert [h["llm_calls"] for h in info["history"]] == [0, 1]


def test_llm_method_without_an_llm_is_refused(tmp_path, capsys):
    corpus = make_corpus(tmp_path / "docs")
    code, _, err = run(
        capsys,
        "index",
        str(corpus),
        "--method",
        "cue:paper",
        "--out",
        str(tmp_path / "i"),
        "--llm",
        "none",
        *EMBED,
    )
    assert code == 2 and "builds its index with an LLM" in err


@pytest.mark.parametrize(
    ("method", "extra"),
    [
        ("cue:paper", []),
        ("fgrag:paper", []),
        ("lprag:paper", ["--set", "epochs=3", "--set", "hidden=32"]),
        ("chainrag", []),  # an LLM-free index; the LLM works at query time (its engine)
    ],
)
def test_other_full_tier_methods(server, tmp_path, capsys, method, extra):
    corpus = make_corpus(tmp_path / "docs")
    out_dir = tmp_path / "index"
    code, _, err = run(
        capsys,
        "index",
        str(corpus),
        "--method",
        method,
        "--out",
        str(out_dir),
        "--llm",
        "openai-like",
        *EMBED,
        *extra,
    )
    assert code == 0, err
    info = json.loads(run(capsys, "info", str(out_dir), "--json")[1])
    if method == "chainrag":
        assert info["usage"]["calls"] == 0 and info["llm"]["tier"] == "llm-free"
    else:
        assert info["usage"]["calls"] > 0
        assert info["llm_steps"] and all(s["tier"] == "full-llm" for s in info["llm_steps"])
    before = requests(server)
    answer = json.loads(
        run(
            capsys,
            "query",
            str(out_dir),
            "Who married Marie Curie?",
            "--json",
            "--llm",
            "openai-like",
        )[1]
    )
    assert answer["answer"] and answer["passages"]
    assert requests(server) > before  # the answer came over the wire
    assert main(["info", str(out_dir)]) == 0


def test_interrupted_build_resumes_without_paying_twice(server, tmp_path, capsys):
    from collections import Counter

    from support.wire.protocol import Fault

    corpus = make_corpus(tmp_path / "docs")
    out_dir = tmp_path / "index"
    replies, answered = server.responder, Counter()

    def counting(request):
        answered[request.prompt] += 1
        return replies(request)

    server.responder = counting
    # The server fails for good from the third request on: the build stops there.
    server.inject(Fault(status=400, times=None, match=lambda request: request.number > 2))
    argv = [
        "index",
        str(corpus),
        "--method",
        "qcg:paper",
        "--out",
        str(out_dir),
        "--llm",
        "openai-like",
    ]
    code, _, err = run(capsys, *argv, "--set", "on_llm_failure=raise", *EMBED)
    assert code == 1 and "error: " in err and "Traceback" not in err, err
    assert "HTTP 400" in err and "on_llm_failure=" in err
    assert not (out_dir / "index").exists()  # nothing half-written
    assert sum(answered.values()) == 2

    server.reset()  # the server is back
    code, out, err = run(capsys, *argv, "--set", "on_llm_failure=raise", *EMBED)
    assert code == 0, err
    assert "indexed 5 file(s)" in out
    assert len(answered) > 2 and max(answered.values()) == 1  # no prompt was paid for twice
