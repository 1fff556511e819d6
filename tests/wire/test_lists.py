"""Line lists as chat models write them: an item is content, a cut list is not a list.

The server answers LP-RAG's atomic statements and synthetic queries and FG-RAG's
query entities with ``ModelReplies``' items, wrapped as chat models wrap them: a
preamble and a sign-off, a JSON array where lines were asked, a fenced block.
"""

from __future__ import annotations

import json

import pytest
from llama_index.core.schema import Document
from support.replies import ModelReplies
from support.wire import Fault, WireReply, WireRequest, WireServer

from llama_index_graphrag_ext.core.llm import run_sync
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.eval.data import load_benchmark
from llama_index_graphrag_ext.fgrag import FGRAGIndex
from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex, LLMAtomicChunker
from llama_index_graphrag_ext.qcg import Doc2QueryGenerator, QueryCentricGraphIndex

ITEMS = {
    "atomic-chunks": ModelReplies._atomic,
    "synthetic-queries": ModelReplies._curious,
    "fg-entities": ModelReplies._fg_entities,
}
FORMS = ["chat", "json", "fenced"]


def wrap(items: list[str], form: str) -> str:
    if form == "chat":
        body = "\n".join(items)
        return (
            f"Here are the statements:\n{body}\n\nI hope this helps! Let me know if you need more."
        )
    if form == "json":
        return "[\n" + ",\n".join(json.dumps(i) for i in items) + "\n]"
    return "Sure!\n```\n" + "\n".join(items) + "\n```\nLet me know if you need anything else."


class Chatty:
    """``ModelReplies`` with its line lists wrapped the ``form`` way; ``written`` keeps the
    items each list held."""

    def __init__(self, form: str) -> None:
        self.inner, self.form, self.written = ModelReplies(), form, set()

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def __call__(self, request: WireRequest) -> WireReply:
        reply = self.inner(request)
        write = ITEMS.get(reply.task)
        if write is None:
            return reply
        items = list(write(request.prompt))
        self.written.update(items)
        return WireReply(text=wrap(items, self.form), task=reply.task)


@pytest.fixture
def chatty(request):
    server = WireServer(Chatty(request.param)).start()
    try:
        yield server
    finally:
        server.stop()
    if server.errors:
        raise server.errors[0]


def client(server):
    return server.openai_like()


@pytest.fixture
def docs(musique_slice):
    return load_benchmark(musique_slice).documents()[:3]


@pytest.mark.parametrize("chatty", FORMS, indirect=True)
def test_lprag_atomic_statements_and_queries_are_only_content(chatty, docs, bow_embed):
    llm = client(chatty)
    chunks = LLMAtomicChunker(llm=llm).get_nodes_from_documents(docs)
    assert {c.metadata["lp_origin"] for c in chunks} == {"llm"}
    assert {c.text for c in chunks} <= chatty.responder.written
    index = ChunkQueryLinkIndex.from_documents(
        docs,
        transformations=[PassageParser()],
        embed_model=bow_embed,
        config="paper",
        llm=llm,
        epochs=3,
        hidden=16,
        threads=1,
    )
    queries = [q for q in index.queries() if q["origin"] == "llm"]
    assert queries and {q["text"] for q in queries} <= chatty.responder.written


@pytest.mark.parametrize("chatty", FORMS, indirect=True)
def test_fgrag_query_entities_are_only_content(chatty, bow_embed):
    docs = [
        Document(text="Felix Salten wrote the novel Bambi in 1923."),
        Document(text="Pest is the birthplace of Felix Salten."),
    ]
    llm = client(chatty)
    index = FGRAGIndex.from_documents(
        docs, config="paper", embed_model=bow_embed, transformations=[PassageParser()], llm=llm
    )
    engine = index.as_query_engine(llm=llm)
    entities = run_sync(
        lambda: engine.aquery_entities("Where was the author of Bambi born?", engine._caller)
    )
    assert entities and set(entities) <= chatty.responder.written
    assert engine.llm_steps.record("query-entities").fallbacks == 0


def test_a_list_still_cut_after_the_re_asks_is_a_counted_fallback(musique_slice, bow_embed):
    docs = load_benchmark(musique_slice).documents()[:2]
    server = WireServer(ModelReplies()).start()
    try:
        # Every Doc2Query reply of the first passage is cut, however much room it gets.
        first = docs[0].text[:60]
        server.inject(Fault(cut_at=40, match=lambda r: first in r.prompt, times=None))
        llm = client(server)
        index = QueryCentricGraphIndex.from_documents(
            docs,
            transformations=[PassageParser()],
            embed_model=bow_embed,
            llm=llm,
            generator=Doc2QueryGenerator(llm=llm, num_pairs=5, output_format="lines"),
        )
    finally:
        server.stop()
    record = index.llm_steps.record("doc2query")
    assert (record.fallbacks, dict(record.reasons)) == (1, {"reply cut by the length limit": 1})
    # None of the cut list's pairs was kept: that passage has its sentence nodes only.
    cut_chunk = next(c for c in index.get_chunks(index.chunk_ids()) if first in c.text)
    kinds = {p.kind for p in index.layer.pairs if p.chunk_id == cut_chunk.node_id}
    assert kinds == {"sentence"}
