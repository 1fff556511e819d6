"""Composition on the demo corpus: share indexing work, fuse retrievers, route questions.

    python examples/composition.py

1. Build QCG-RAG (sentence nodes), CUE-RAG (alpha = 0) and FG-RAG (co-occurrence
   graph) over the same passages with one ``SharedResources``: one cached
   embedder (a text embedded once serves every index) and one spaCy parse cache
   (CUE-RAG and FG-RAG both split sentences by rules and run NER alone, so
   FG-RAG reuses CUE-RAG's parses).
2. Fuse QCG-RAG, CUE-RAG and BM25 with LlamaIndex's ``QueryFusionRetriever``
   (reciprocal-rank fusion); each fused passage says which retriever put it there.
3. Route questions with LlamaIndex's ``RouterQueryEngine`` and the LLM-free
   heuristic selector: factoid questions to the fused retriever, summarization
   questions to FG-RAG. The embedded SmolLM2 writes the answers (set
   ``GRAPHRAG_LLM=openai`` or ``openai-like`` for a strong model).
"""

from __future__ import annotations

from llama_index.core.query_engine import RetrieverQueryEngine

from llama_index_graphrag_ext.baselines import BM25Retriever
from llama_index_graphrag_ext.compose import SharedResources, build_router, fuse_retrievers
from llama_index_graphrag_ext.compose.routing import classify_question
from llama_index_graphrag_ext.core.defaults import embedded_llm
from llama_index_graphrag_ext.core.llm import is_embedded, resolve_llm
from llama_index_graphrag_ext.core.nodes import EVIDENCE_KEY, PassageParser
from llama_index_graphrag_ext.core.prompts import SHORT_ANSWER_PROMPT
from llama_index_graphrag_ext.cue import MultiPartiteIndex
from llama_index_graphrag_ext.demo import DEMO_DATA
from llama_index_graphrag_ext.eval.data import load_benchmark
from llama_index_graphrag_ext.fgrag import FGRAGIndex, FGRAGQueryEngine
from llama_index_graphrag_ext.fgrag.extract import CooccurrenceExtractor
from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex

SUMMARY_QUESTION = "What are the main themes across these passages about music and politics?"


def main() -> None:
    bench = load_benchmark(DEMO_DATA)
    documents = bench.documents()
    question = bench.questions[0]

    # 1. One corpus, three indexes, shared embeddings and spaCy parses.
    shared = SharedResources()  # the embedded MiniLM; embeddings cached in memory
    with shared.sharing():
        qcg = QueryCentricGraphIndex.from_documents(
            documents,
            embed_model=shared.embed_model,
            transformations=[PassageParser()],
            config="default",
        )
        cue = MultiPartiteIndex.from_documents(
            documents,
            embed_model=shared.embed_model,
            transformations=[PassageParser()],
            config="default",
        )
        fg = FGRAGIndex.from_documents(
            documents,
            # Rule sentences, as CUE-RAG's: FG-RAG reuses CUE-RAG's spaCy parses.
            kg_extractors=[CooccurrenceExtractor(sentence_splitter="rule")],
            embed_model=shared.embed_model,
            transformations=[PassageParser()],
        )
    print(f"{len(documents)} passages, three indexes; reused work: {shared.stats()}")

    # 2. Reciprocal-rank fusion of two graph retrievers and BM25.
    fused = fuse_retrievers(
        {
            "qcg": qcg.as_retriever(similarity_top_k=5),
            "cue": cue.as_retriever(similarity_top_k=5),
            "bm25": BM25Retriever.from_documents(documents, similarity_top_k=5),
        },
        mode="rrf",
        similarity_top_k=5,
    )
    print(f"\nQ: {question.question}  (gold: {', '.join(question.gold_ids)})")
    for hit in fused.retrieve(question.question):
        evidence = hit.node.metadata[EVIDENCE_KEY]
        mark = "*" if hit.node.ref_doc_id in question.gold_ids else " "
        print(
            f" {mark} {hit.node.ref_doc_id:<12} rrf={hit.score:.4f}  "
            f"kept from {evidence['retriever']} (its rank {evidence['rank']})"
        )

    # 3. Routing: the heuristic selector needs no LLM; the engines answer with one.
    llm = resolve_llm()  # explicit > Settings > environment > embedded SmolLM2
    if is_embedded(llm):  # keep the tiny model's answers short (CI runs this on 2 cores)
        llm = embedded_llm(max_new_tokens=48, generate_kwargs={"repeat_penalty": 1.3})
    factoid_engine = RetrieverQueryEngine.from_args(
        fused, llm=llm, text_qa_template=SHORT_ANSWER_PROMPT
    )
    # FG-RAG's map-reduce summaries, here over the co-occurrence graph built above.
    summary_engine = FGRAGQueryEngine(
        fg,
        llm=llm,
        max_query_entities=1,
        max_questions=1,
        max_context_tokens=300,
        max_concurrency=1,
    )
    router = build_router(summary_engine, factoid_engine, selector="heuristic")
    for text in (question.question, SUMMARY_QUESTION):
        decision = classify_question(text)
        print(f"\nQ: {text}\n   route: {decision.kind} (score {decision.score:g})")
        response = router.query(text)
        chosen = response.metadata["selector_result"].ind
        print(f"   engine: {['FG-RAG', 'fused retriever'][chosen]}")
        print(f"   answer: {str(response).strip()[:300]}")


if __name__ == "__main__":
    main()
