"""Every LLM-using component against today's model shapes: ``python tests/support/wire_models.py``.

For each component, one run with a reasoning model (DeepSeek-R1's shape: the
reasoning, then a stray ``</think>``; or ``--style qwen3|vllm``) and one with a
function-calling client (``OpenAILike(is_function_calling_model=True)``, the
server splitting each structured list over two tool calls), on eight MuSiQue
passages: the server's calls and tokens, what was built from the LLM, the
fallbacks, and the answer to one question. The "model" is ``ModelReplies``
behind the loopback wire (tests/support/replies.py, tests/support/reasoning.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `support` as a script


from llama_index_graphrag_ext.chainrag import SentenceGraphIndex  # noqa: E402
from llama_index_graphrag_ext.core.nodes import PassageParser  # noqa: E402
from llama_index_graphrag_ext.cue import MultiPartiteIndex  # noqa: E402
from llama_index_graphrag_ext.eval.data import load_benchmark  # noqa: E402
from llama_index_graphrag_ext.fgrag import FGRAGIndex  # noqa: E402
from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex, LLMAtomicChunker  # noqa: E402
from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex  # noqa: E402
from support import BagOfWordsEmbedding  # noqa: E402
from support.reasoning import ReasoningModel, SplitToolCalls  # noqa: E402
from support.replies import ModelReplies  # noqa: E402
from support.wire import WireServer  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "musique-100"


def _fallbacks(*ledgers: Any) -> int:
    return sum(r.fallbacks for ledger in ledgers for r in ledger.records())


def _qcg(docs, llm, embed):
    index = QueryCentricGraphIndex.from_documents(
        docs, transformations=[PassageParser()], embed_model=embed, config="paper", llm=llm
    )
    built = f"{sum(p.kind == 'qa' for p in index.layer.pairs)} pairs"
    return index, built, [index.llm_steps]


def _cue(docs, llm, embed):
    index = MultiPartiteIndex.from_documents(
        docs, transformations=[PassageParser()], embed_model=embed, config="paper", llm=llm
    )
    ex = index.stats()["extraction"]
    return index, f"{ex['units_llm']} units", [index.llm_steps]


def _chainrag(docs, llm, embed):
    index = SentenceGraphIndex.from_documents(
        docs, transformations=[PassageParser()], embed_model=embed
    )
    return index, "", []


def _fgrag(docs, llm, embed):
    index = FGRAGIndex.from_documents(
        docs, transformations=[PassageParser()], embed_model=embed, config="paper", llm=llm
    )
    stats = index.stats()
    return index, f"{stats['entities']} entities, {stats['relations']} relations", [index.llm_steps]


def _lprag(docs, llm, embed):
    chunker = LLMAtomicChunker(llm=llm)
    index = ChunkQueryLinkIndex.from_documents(
        docs,
        transformations=[chunker],
        embed_model=embed,
        config="paper",
        llm=llm,
        epochs=5,
        threads=1,
    )
    llm_queries = sum(q["origin"] == "llm" for q in index.queries())
    chunks = sum(c.metadata.get("lp_origin") == "llm" for c in index.get_chunks(index.chunk_ids()))
    return (
        index,
        f"{chunks} atomic chunks, {llm_queries} synthetic queries",
        [
            index.llm_steps,
            chunker.llm_steps,
        ],
    )


COMPONENTS = {"qcg": _qcg, "cue": _cue, "chainrag": _chainrag, "fgrag": _fgrag, "lprag": _lprag}


def run(name: str, client: str, style: str, docs, question: str) -> dict[str, Any]:
    responder = (
        ReasoningModel(ModelReplies(), style)
        if client == "reasoning"
        else SplitToolCalls(ModelReplies(), parts=2)
    )
    with WireServer(responder) as server:
        llm = server.openai_like(
            is_function_calling_model=client == "function-calling", timeout=30.0
        )
        index, built, ledgers = COMPONENTS[name](docs, llm, BagOfWordsEmbedding())
        engine = index.as_query_engine(llm=llm)
        try:
            response = engine.query(question)
            answer = " ".join(str(response).split())[:60]
            cut = response.metadata.get("answer_cut")
        except Exception as exc:  # shown in the row: nothing is hidden
            answer, cut = f"{type(exc).__name__}: {exc}"[:60], None
        if name == "chainrag":
            built = f"{len(response.metadata['chain'])} sub-questions"
        stats = server.stats()
        ledgers = [*ledgers, *(getattr(engine, "llm_steps", None) for _ in [0])]
        fallbacks = _fallbacks(*[ledger for ledger in ledgers if ledger is not None])
    return {
        "component": name,
        "client": client if client != "reasoning" else f"reasoning ({style})",
        "calls": stats["requests"],
        "prompt": stats["prompt_tokens"],
        "completion": stats["completion_tokens"],
        "cut": stats["cut"],
        "built": built,
        "fallbacks": fallbacks,
        "answer": answer,
        "answer_cut": cut,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--passages", type=int, default=8)
    parser.add_argument("--style", default="r1", choices=["qwen3", "r1", "vllm"])
    parser.add_argument("--components", default=",".join(COMPONENTS))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    bench = load_benchmark(args.data)
    first = bench.questions[0]
    everything = bench.documents()
    gold = [d for d in everything if d.doc_id in first.gold_ids]
    docs = gold + [d for d in everything if d not in gold][: args.passages - len(gold)]
    question = first.question
    print(f"{len(docs)} passages; question: {question}\n")
    print(
        "| component | client | calls | prompt tok | completion tok | cut replies | built from the LLM | fallbacks | answer | answer_cut |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.components.split(","):
        for client in ("reasoning", "function-calling"):
            row = run(name, client, args.style, docs, question)
            print("| " + " | ".join(str(v) for v in row.values()) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
