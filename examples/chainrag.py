"""ChainRAG on a tiny corpus: the LLM-free sentence-graph retriever, then the full engine.

Runs offline with the embedded defaults (MiniLM embeddings; SmolLM2 through
llama.cpp when it is installed, else the engine part is skipped):

    python examples/chainrag.py
"""

from __future__ import annotations

import json
import logging

from llama_index.core.schema import Document

from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
from llama_index_graphrag_ext.core.defaults import MissingModelError, embedded_llm
from llama_index_graphrag_ext.core.nodes import PassageParser

DOCS = [
    Document(
        id_="bambi",
        text="Bambi, a Life in the Woods is a 1923 novel by Felix Salten. "
        "It follows the life of a male roe deer. The book was banned in Nazi Germany.",
        metadata={"title": "Bambi, a Life in the Woods"},
    ),
    Document(
        id_="salten",
        text="Felix Salten was an Austrian author and critic. He was born in Pest "
        "and moved to Vienna as a child. He died in Zurich in 1945.",
        metadata={"title": "Felix Salten"},
    ),
    Document(
        id_="vienna",
        text="Vienna is the capital and largest city of Austria. It lies on the Danube.",
        metadata={"title": "Vienna"},
    ),
]


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    index = SentenceGraphIndex.from_documents(DOCS, transformations=[PassageParser()])
    sg = index.sentence_graph
    edges = {kind: sg.num_edges(kind) for kind in ("EC", "SS", "SA")}
    print(f"{len(sg)} sentences, edges: {edges}")

    question = "In which city was the author of the novel about a roe deer born?"
    for result in index.as_retriever(similarity_top_k=3).retrieve(question):
        evidence = result.node.metadata["evidence"]
        print(f"\n{result.node.ref_doc_id}  score={result.score:.3f}")
        for sentence in evidence["sentences"]:
            via = ", ".join(e["kind"] for e in sentence.get("edges", []))
            print(f"  [{sentence['role']}{' via ' + via if via else ''}] {sentence['text']}")

    try:
        llm = embedded_llm(max_new_tokens=32)
    except MissingModelError as exc:
        print(f"\nembedded LLM not installed ({exc}); engine part skipped")
        return
    engine = index.as_query_engine(llm=llm, integration="context", max_hops=1)
    response = engine.query(question)
    print(f"\nanswer: {response}")
    print("LLM calls:", response.metadata["usage"]["calls"])
    for step in response.metadata["chain"]:
        short = {k: step[k] for k in ("original", "question", "action", "answer", "stopped")}
        print(json.dumps(short))


if __name__ == "__main__":
    main()
