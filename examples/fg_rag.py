"""FG-RAG on a tiny corpus: build the graph, look at the expansion, answer with map-reduce.

    python examples/fg_rag.py

Offline defaults: the embedded MiniLM embeds entity descriptions, the graph is
built LLM-free (spaCy entities + sentence co-occurrence), and the embedded
SmolLM2 writes the per-entity summaries and the streamed final answer. With a
strong LLM (``Settings.llm = OpenAI(...)`` or ``GRAPHRAG_LLM=openai``) the same
script extracts the graph with the LLM instead.
"""

from __future__ import annotations

from llama_index.core import Document

from llama_index_graphrag_ext.core.defaults import embedded_llm
from llama_index_graphrag_ext.core.llm import is_embedded, resolve_llm
from llama_index_graphrag_ext.core.nodes import EVIDENCE_KEY
from llama_index_graphrag_ext.fgrag import FGRAGIndex

CORPUS = [
    "Beekeepers in Ohio sell raw honey at farmers markets and through local grocery stores. "
    "Many beekeepers in Ohio also sell beeswax candles at the same markets.",
    "Beeswax from the hive is bought by candle makers and cosmetics firms. "
    "The Ohio State Beekeepers Association runs courses on marketing hive products.",
    "Pollination contracts pay beekeepers to move hives to almond orchards in California. "
    "California almond growers rent more than a million hives each spring.",
    "Propolis and royal jelly are sold online as health supplements. "
    "The Food and Drug Administration regulates labels on honey and supplements.",
]
QUESTION = "How can beekeepers market and sell their honey and other hive products?"


def main() -> None:
    documents = [Document(text=t, id_=f"doc-{i}") for i, t in enumerate(CORPUS)]
    llm = resolve_llm()  # explicit > Settings > environment > embedded SmolLM2
    if is_embedded(llm):  # keep the tiny model's answers short (CI runs this on 2 cores)
        llm = embedded_llm(max_new_tokens=100, generate_kwargs={"repeat_penalty": 1.3})

    # 1. The graph (the paper's pipeline): the LLM extracts entities and relations; a model
    #    that cannot write the records (the embedded SmolLM2) makes the step LLM-free, and
    #    the step ledger says so: spaCy entities and noun chunks related by co-occurrence.
    index = FGRAGIndex.from_documents(documents, config="paper", llm=llm, include_noun_chunks=True)
    print("graph:", index.stats())

    # 2. Context-aware entity expansion alone (LLM-free): chunks with their evidence.
    for hit in index.as_retriever(similarity_top_k=2).retrieve(QUESTION):
        evidence = hit.node.metadata[EVIDENCE_KEY]
        print(f"{hit.score:.2f} {hit.node.ref_doc_id}: entities {evidence['query_entities']}")

    # 3. Query-level fine-grained summarization: map per query entity, streamed reduce.
    engine = index.as_query_engine(
        llm=llm, streaming=True, max_query_entities=1, max_questions=3, max_context_tokens=300
    )
    response = engine.query(QUESTION)
    print("\nanswer: ", end="")
    for delta in response.response_gen:
        print(delta, end="", flush=True)
    print()
    for unit in response.metadata["fgrag"]:
        print(
            f"- {unit['entity']}: {unit['descriptions']} descriptions, weak context "
            f"{unit['weak_context'][:3]}, {len(unit['questions'])} questions"
        )
    print("LLM usage of this query:", response.metadata["usage"])


if __name__ == "__main__":
    main()
