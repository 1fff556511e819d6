"""CUE-RAG on a tiny corpus: build the multi-partite index LLM-free, retrieve with Q-Iter, answer.

Run: ``python examples/cue_rag.py`` (offline: embedded MiniLM, spaCy, and the
embedded SmolLM2 for the final short answer when it is installed).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from llama_index.core import Document  # noqa: E402

from llama_index_graphrag_ext.core.defaults import MissingModelError, embedded_llm  # noqa: E402
from llama_index_graphrag_ext.core.nodes import PassageParser  # noqa: E402
from llama_index_graphrag_ext.cue import MultiPartiteIndex  # noqa: E402

PASSAGES = {
    "Green": "Green is the fourth studio album by Steve Hillage, released in 1978.",
    "Steve Hillage": "Steve Hillage is an English guitarist. He was born in Chingford.",
    "Chingford": "Chingford is a town in east London. It lies near Epping Forest.",
    "Epping Forest": "Epping Forest is an ancient woodland managed by the City of London.",
    "Paris": "Paris is the capital of France. The Seine flows through Paris.",
}
QUESTION = "Where was the performer of the album Green born?"


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    docs = [
        Document(id_=title, text=f"{title}\n{text}", metadata={"title": title})
        for title, text in PASSAGES.items()
    ]
    # The measured preset: alpha = 0 (sentences as knowledge units, spaCy entities, no LLM).
    index = MultiPartiteIndex.from_documents(
        docs, transformations=[PassageParser()], config="default"
    )
    print("index:", json.dumps({k: v for k, v in index.stats().items() if k != "extraction"}))

    retriever = index.as_retriever(similarity_top_k=3, K=3, D=3, M=5)
    for rank, hit in enumerate(retriever.retrieve(QUESTION), start=1):
        evidence = hit.node.metadata["evidence"]
        print(f"{rank}. {hit.node.ref_doc_id} ({hit.score:.3f}, {evidence['source']})")
        for path in evidence.get("paths", [])[:1]:
            hops = " -> ".join(f"[{h['entity']}] {h['unit']}" for h in path["hops"])
            print(f"   path (depth {path['depth']}): {hops}")

    with tempfile.TemporaryDirectory() as folder:
        index.persist(folder)
        loaded = MultiPartiteIndex.load(folder, embed_model=index.embed_model)
        assert [
            n.node.node_id for n in loaded.as_retriever(similarity_top_k=3).retrieve(QUESTION)
        ] == [n.node.node_id for n in retriever.retrieve(QUESTION)]
        print("persisted and reloaded: same ranking")

    try:
        llm = embedded_llm(max_new_tokens=24)
    except MissingModelError as exc:
        print("no embedded LLM for the answer step:", exc)
        return
    engine = index.as_query_engine(llm=llm, similarity_top_k=3)
    print("answer:", str(engine.query(QUESTION)).strip())


if __name__ == "__main__":
    main()
