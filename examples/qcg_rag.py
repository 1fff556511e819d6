"""QCG-RAG on the demo corpus: sentence query nodes (LLM-free), then Doc2Query pairs.

    python examples/qcg_rag.py            # both tiers (embedded SmolLM2 for Doc2Query)
    python examples/qcg_rag.py --llm-free # sentence nodes only

1. Build a ``QueryCentricGraphIndex`` with LLM-free sentence query nodes over the
   demo passages, retrieve for a multi-hop question and print the reasoning path
   (matched query nodes, their hop distance and the node they were reached from).
2. Persist and reload it; retrieval is identical.
3. With the embedded LLM, generate question-answer nodes (Doc2Query) for a few
   passages and answer the question with the index's query engine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from llama_index_graphrag_ext.core.defaults import default_embed_model, embedded_llm
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.demo import DEMO_DATA
from llama_index_graphrag_ext.eval.data import load_benchmark
from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex


def show(results) -> None:
    """Print ranked passages with the query nodes that led to them."""
    for r in results:
        ev = r.node.metadata["evidence"]
        print(
            f"  #{ev['rank']} {r.node.ref_doc_id}  score={r.score:.3f}  "
            f"({ev['retrieved']} retrieved, {ev['expanded']} expanded query nodes)"
        )
        for q in ev["query_nodes"][:2]:
            path = f"hop {q['hop']}" + (f" via {q['via']}" if q["via"] else "")
            text = q["query"] + (f" -> {q['answer']}" if q["answer"] else "")
            print(f"      [{q['cosine']:.2f}, {path}] {text[:90]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm-free", action="store_true", help="skip the Doc2Query part")
    args = parser.parse_args()

    bench = load_benchmark(DEMO_DATA)
    documents = bench.documents()
    question = bench.questions[0]
    embed_model = default_embed_model()

    # 1. LLM-free tier, the measured preset: the paper's "Sentence Nodes" variant.
    index = QueryCentricGraphIndex.from_documents(
        documents, embed_model=embed_model, transformations=[PassageParser()], config="default"
    )
    print(f"{len(index)} passages -> {len(index.layer)} sentence query nodes")
    print(f"Q: {question.question}  (gold: {', '.join(question.gold_ids)})")
    results = index.as_retriever(similarity_top_k=5).retrieve(question.question)
    show(results)

    # 2. Persist and reload.
    with tempfile.TemporaryDirectory() as tmp:
        index.persist(Path(tmp) / "qcg")
        loaded = QueryCentricGraphIndex.load(Path(tmp) / "qcg", embed_model=embed_model)
        again = loaded.as_retriever(similarity_top_k=5).retrieve(question.question)
        assert [r.node.node_id for r in again] == [r.node.node_id for r in results]
        print("persisted and reloaded: same ranking")

    if args.llm_free:
        return

    # 3. Embedded-LLM tier: Doc2Query pairs for the gold passages and one other
    #    (SmolLM2-135M is slow on CPU and its pairs are rough: see the docs page).
    llm = embedded_llm(max_new_tokens=96)
    gold = set(question.gold_ids)
    small = [d for d in documents if d.doc_id in gold] + [
        d for d in documents if d.doc_id not in gold
    ][:1]
    cache = str(Path(tempfile.gettempdir()) / "qcg-example-cache.sqlite")
    qa_index = QueryCentricGraphIndex.from_documents(
        small,
        config="paper",  # the paper's pipeline, with two pairs per chunk and k = 2
        embed_model=embed_model,
        llm=llm,
        transformations=[PassageParser()],
        M=2,
        k=2,
        max_concurrency=1,
        cache_path=cache,
    )
    print(
        f"\nDoc2Query on {len(small)} passages: "
        f"{json.dumps({k: v for k, v in qa_index.build_stats.items() if v})}"
    )
    for pair in qa_index.layer.pairs[:4]:
        print(f"  [{pair.kind}] {pair.query} -> {pair.answer}")
    engine = qa_index.as_query_engine(llm=llm, similarity_top_k=3)
    response = engine.query(question.question)
    print(f"Answer: {str(response).strip()[:200]}  (gold: {question.answers[0]})")
    show(response.source_nodes)


if __name__ == "__main__":
    main()
