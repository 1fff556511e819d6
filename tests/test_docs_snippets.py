"""Every Python snippet of the documentation runs, page by page, in the order a reader meets it.

A page's snippets share one namespace (later ones build on earlier ones), which
starts with what a reader has: ``docs`` / ``documents`` (the bundled demo
corpus), the hashed embedder in ``Settings`` (fast, offline) and a mock LLM
wherever a snippet builds OpenAI's or an OpenAI-compatible client. A snippet that
needs something a test machine does not have (a downloaded reranker, a cluster,
an integration installed after the main tests) is marked in the page itself with
``<!-- not run: why -->`` on the line before it, and the marks are counted here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from llama_index.core import Settings
from llama_index.core.llms import MockLLM

from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding
from llama_index_graphrag_ext.eval.data import load_benchmark

DOCS = Path(__file__).resolve().parents[1] / "docs"
DEMO = Path(__file__).resolve().parents[1] / "llama_index_graphrag_ext" / "data" / "demo"
BLOCK = re.compile(r"(<!-- not run: [^>]*-->\n)?```python\n(.*?)```", re.S)
PAGES = sorted(p for p in DOCS.rglob("*.md") if "```python" in p.read_text(encoding="utf-8"))

#: What a page's snippets take as given, beyond the corpus (built here as a reader would).
SETUP = {
    "composition.md": """
from llama_index_graphrag_ext.cue import MultiPartiteIndex
from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
from llama_index_graphrag_ext.fgrag import FGRAGIndex
from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex
from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex
qcg_index = QueryCentricGraphIndex.from_documents(docs)
cue_index = MultiPartiteIndex.from_documents(docs)
chain_index = SentenceGraphIndex.from_documents(docs)
lp_index = ChunkQueryLinkIndex.from_documents(docs)
fg_index = FGRAGIndex.from_documents(docs)
nodes = list(docs)
llm = Settings.llm
""",
    "chainrag.md": "question = 'Who wrote Bambi?'",
    "tiers.md": "from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex",
    "vector-stores.md": """
from llama_index.core.vector_stores import SimpleVectorStore
my_store = SimpleVectorStore()
""",
    "viz.md": """
from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex
index = QueryCentricGraphIndex.from_documents(docs)
""",
    "fgrag.md": "llm = Settings.llm",
}


class _MockClient(MockLLM):
    """What a snippet's ``OpenAI(...)`` / ``OpenAILike(...)`` becomes: any arguments, no wire."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(max_tokens=8)


def _blocks(page: Path) -> list[tuple[str | None, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(page.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_the_pages_snippets_run(page, tmp_path, monkeypatch):
    import llama_index.llms.openai as openai_module
    import llama_index.llms.openai_like as openai_like_module

    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_corpus").mkdir()
    (tmp_path / "my_corpus" / "bees.txt").write_text("Beekeepers sell honey at markets.\n")
    monkeypatch.setattr(openai_module, "OpenAI", _MockClient)
    monkeypatch.setattr(openai_like_module, "OpenAILike", _MockClient)
    monkeypatch.setattr(Settings, "_embed_model", HashEmbedding(dim=384))
    monkeypatch.setattr(Settings, "_llm", MockLLM(max_tokens=8))
    documents = load_benchmark(DEMO).documents()[:24]
    namespace = {"docs": documents, "documents": documents, "Settings": Settings}
    setup = SETUP.get(page.name)
    if setup:
        exec(compile(setup, f"{page.name}:setup", "exec"), namespace)  # noqa: S102
    ran = 0
    for number, (skip, code) in enumerate(_blocks(page), 1):
        if skip:
            continue
        try:
            exec(compile(code, f"{page.relative_to(DOCS)}#{number}", "exec"), namespace)  # noqa: S102
        except Exception as exc:  # pragma: no cover - the message is the point
            raise AssertionError(f"{page.name}, snippet {number} fails: {exc!r}\n{code}") from exc
        ran += 1
    assert ran, f"{page.name}: every snippet is marked not run"


def test_not_run_marks_say_why_and_stay_few():
    marks = [s for p in PAGES for s, _ in _blocks(p) if s]
    assert all(len(m) > len("<!-- not run: -->\n") + 10 for m in marks)
    total = sum(len(_blocks(p)) for p in PAGES)
    assert len(marks) <= total // 3, f"{len(marks)} of {total} snippets are not run"
