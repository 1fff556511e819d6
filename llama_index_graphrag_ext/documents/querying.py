"""``graphrag-ext query`` and ``graphrag-ext info`` over a folder written by ``graphrag-ext index``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import methods
from .collection import (
    CACHE_DIR,
    COLLECTION_FILE,
    METHOD_DIR,
    Collection,
    index_dir,
    read_collection,
)
from .errors import UserError
from .reading import page_of
from .terminal import printable, safe_print

if TYPE_CHECKING:  # `info` imports this module: the model stack is imported only to query
    from llama_index.core.schema import NodeWithScore

#: Metadata a chunk carries from its file (everything else a retriever added is evidence).
FILE_KEYS = frozenset({"file_path", "file_name", "title"})


def _open(folder: str, llm: Any):
    from .indexing import make_embedder

    collection = read_collection(folder)
    method = methods.resolve(collection.method, collection.options)
    # Only the embedder its index uses: a BM25 query loads none (nor the model stack).
    embed_model = make_embedder(collection.embed_model) if method.spec.embeds else None
    path = index_dir(Path(folder)) / METHOD_DIR
    from ..core.persist import IndexFormatError

    try:
        index = methods.load(method, path, embed_model, llm, Path(folder) / CACHE_DIR)
    except IndexFormatError as exc:
        raise UserError(f"{folder}: {exc}") from exc
    return collection, method, embed_model, index


def _verify(folder: Path, say) -> None:
    """Check every file against the collection's seal and the method manifest's."""
    from ..core.persist import FILES, MANIFEST, read_json, verify

    top, method_dir = index_dir(folder), index_dir(folder) / METHOD_DIR
    try:
        manifest = read_json(method_dir / MANIFEST)
    except (OSError, ValueError) as exc:
        raise UserError(f"{folder}: {exc}; rebuild the index") from exc
    if not isinstance(manifest, dict):
        raise UserError(
            f"{method_dir / MANIFEST} is damaged (not a JSON object); rebuild the index"
        )
    collection = read_json(top / COLLECTION_FILE)
    problems = verify(top, collection, COLLECTION_FILE) + verify(method_dir, manifest)
    for line in problems:
        say(f"damaged:    {line}")
    if problems:
        raise UserError(f"{folder}: {len(problems)} damaged or missing file(s); rebuild the index")
    count = 1 + len(collection[FILES]) + len(manifest[FILES])  # collection.json: its own digest
    say(f"verified:   {count} file(s) match their checksums")


def passage_record(rank: int, result: NodeWithScore, collection: Collection) -> dict[str, Any]:
    """One retrieved passage: file, position (characters, page), score, text and evidence."""
    node = result.node
    path = node.metadata.get("file_path") or node.ref_doc_id
    start, end = getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)
    pages = (collection.files.get(path) or {}).get("pages") or []
    evidence = {k: v for k, v in node.metadata.items() if k not in FILE_KEYS}
    if set(evidence) == {"evidence"} and isinstance(evidence["evidence"], dict):
        evidence = evidence["evidence"]  # the suite's retrievers nest theirs under one key
    return {
        "rank": rank,
        "score": None if result.score is None else float(result.score),
        "file": path,
        "start_char": start,
        "end_char": end,
        "page": page_of(pages, start),
        "chunk_id": node.node_id,
        "text": node.get_content(),
        "evidence": json.loads(json.dumps(evidence, default=str)),
    }


class OpenIndex:
    """An index folder loaded once: what ``query`` asks, and what ``serve`` keeps loaded.

    ``stamp`` identifies the ``DIR/index`` folder it was loaded from; an update
    replaces that folder whole (a new inode), so :meth:`changed_on_disk` tells a
    server to load the new one, which then replaces this one.
    """

    def __init__(self, folder: str | Path, llm: Any = None, reranker: str | None = None) -> None:
        self.folder = Path(folder)
        self.llm = llm
        self.reranker_name = reranker
        try:  # taken first: an update landing while this loads is then seen as a change
            self.stamp: tuple[int, int] | None = _stamp(self.folder)
        except OSError:  # not an index folder: _open says so
            self.stamp = None
        self.collection, self.method, self.embed_model, self.index = _open(str(folder), llm)
        self.reranker_name = reranker or self.collection.reranker or None
        self.reranker = None
        if self.reranker_name:
            from ..core.defaults import make_reranker

            try:
                self.reranker = make_reranker(self.reranker_name)
            except ValueError as exc:
                raise UserError(f"--reranker {self.reranker_name}: {exc}") from exc

    def changed_on_disk(self) -> bool:
        """Whether an update has replaced the folder since this was loaded (``False``
        while a writer's swap is in flight: the loaded index is still whole)."""
        try:
            return _stamp(self.folder) != self.stamp
        except OSError:
            return False

    def describe(self) -> dict[str, Any]:
        c = self.collection
        return {
            "folder": str(self.folder.resolve()),
            "method": c.method,
            "config": c.config.get("config"),
            "embedder": c.embedder or c.embed_model,
            "files": len(c.files),
            "chunks": sum(int(f.get("chunks", 0)) for f in c.files.values()),
            "llm": _describe_llm(self.llm),
        }

    def ask(self, question: str, top_k: int = 5, answer: bool = True, stream: bool = False):
        """The reply ``query --json`` prints; with ``stream``, ``(passages, pieces of the
        answer, finish)`` where ``finish(text)`` gives that reply once the answer is read.

        Raises:
            UserError: An empty question or a ``top_k`` below 1.
        """
        if not question.strip():
            raise UserError("the question is empty")
        if top_k <= 0:
            raise UserError("--top-k must be positive")
        llm = self.llm if answer else None
        note = None
        if answer and llm is None:
            note = "no answer: no LLM is configured (--llm none); showing the retrieved passages"
        if self.reranker is not None:
            results, text, pieces, note = self._reranked(question, top_k, llm, note, stream)
        else:
            results, text, pieces = self._retrieved(question, top_k, llm, stream)
        passages = [
            passage_record(i + 1, r, self.collection) for i, r in enumerate(results[:top_k])
        ]
        graph = self.graph()
        for passage in passages:
            if graph is not None and graph.has_node(passage["chunk_id"]):
                passage["graph"] = neighbourhood(graph, passage["chunk_id"])
            if self.reranker is not None:
                passage["reranker"] = self.reranker_name

        def finish(answer_text: str | None) -> dict[str, Any]:
            return {
                "question": question,
                "method": self.method.name,
                "llm": _describe_llm(llm),
                "answer": answer_text if llm is not None else None,
                "note": note,
                "passages": passages,
            }

        return (passages, pieces, finish) if stream else finish(text)

    def _retrieved(self, question: str, top_k: int, llm: Any, stream: bool):
        """``(results, answer, answer pieces)`` from the method's retriever and engine."""
        retriever = self.index.as_retriever(similarity_top_k=top_k)
        if llm is None:
            return retriever.retrieve(question), None, iter(())
        engine = self.index.as_query_engine(llm=llm, streaming=stream, similarity_top_k=top_k)
        response = engine.query(question)
        # An engine that answers from summaries (FG-RAG's) may cite no chunk: the retriever's.
        results = list(response.source_nodes) or retriever.retrieve(question)
        if stream:
            return results, None, response.response_gen
        return results, str(response), iter(())

    def _reranked(self, question: str, top_k: int, llm: Any, note: str | None, stream: bool):
        """Retrieve ``max(20, 3 top_k)`` candidates, keep the reranker's ``top_k`` best, and
        answer from those (whole: this answer step does not stream). A method with an
        engine of its own (ChainRAG, FG-RAG's paper preset) answers from its own passages:
        the note says so. Returns ``(results, answer, answer pieces, note)``."""
        from ..core.rerank import with_top_n

        retriever = self.index.as_retriever(similarity_top_k=max(20, 3 * top_k))
        candidates = retriever.retrieve(question)
        results = with_top_n(self.reranker, top_k).postprocess_nodes(candidates, query_str=question)
        text = None
        if llm is not None and self.method.spec.own_engine(self.method.config):
            text = str(self.index.as_query_engine(llm=llm, similarity_top_k=top_k).query(question))
            note = (f"{self.method.name} answers with its own engine from its own "
                    "passages; the reranker ordered the passages shown")  # fmt: skip
        elif llm is not None:
            from ..core.llm.answering import answering

            text = str(answering(llm)(question, results[:top_k]))
        pieces = iter([text] if stream and text else [])
        return results, None if stream else text, pieces, note

    def graph(self) -> Any:
        """The index's graph (``None`` for dense and BM25; FG-RAG's entity graph with its
        source chunks), read once."""
        if not hasattr(self, "_graph"):
            graph = getattr(self.index, "graph", None)
            snapshot = getattr(self.index, "graph_snapshot", None)
            if graph is None and callable(snapshot):
                graph = snapshot().typed_graph()
            self._graph = graph
        return self._graph


def neighbourhood(graph: Any, node_id: str, limit: int = 12) -> dict[str, Any]:
    """What a chunk is linked to in the index's graph, within two steps (a CUE-RAG chunk
    reaches its entities through its units): the first ``limit`` nodes other than
    chunks (id, kind, name, step) and how many more there are."""
    from ..core.viz.selection import node_label

    first = graph.neighbors(node_id)
    second = [m for n in first for m in graph.neighbors(n)]
    linked = [(n, 1) for n in first] + [(n, 2) for n in second]
    seen, kept = {node_id}, []
    for node, step in linked:
        if node not in seen and graph.node_kind(node) != "chunk":
            seen.add(node)
            kept.append((node, step))
    nodes = [
        {"id": n, "kind": graph.node_kind(n), "label": node_label(graph, n, 60), "step": step}
        for n, step in kept[:limit]
    ]
    return {"nodes": nodes, "more": max(0, len(kept) - limit)}


def _describe_llm(llm: Any) -> str:
    from ..core.llm import describe_llm

    return describe_llm(llm)


def _stamp(folder: Path) -> tuple[int, int]:
    info = os.stat(index_dir(folder))
    return info.st_ino, info.st_mtime_ns


def run_query(
    folder: str,
    question: str,
    top_k: int = 5,
    answer: bool = True,
    as_json: bool = False,
    stream: bool = False,
    provider: str | None = None,
    say=safe_print,
    reranker: str | None = None,
) -> int:
    """Answer ``question`` from the index in ``folder`` (or only retrieve, ``answer=False``)."""
    if not question.strip():
        raise UserError("the question is empty")
    if top_k <= 0:
        raise UserError("--top-k must be positive")
    llm = None
    if answer:
        try:
            from ..core.llm import choose_llm

            llm = choose_llm(provider).llm
        except (ValueError, ImportError, RuntimeError) as exc:
            raise UserError(f"--llm {provider or '(environment)'}: {exc}") from exc
    opened = OpenIndex(folder, llm, reranker)
    if stream and llm is not None:
        passages, pieces, finish = opened.ask(question, top_k, answer, stream=True)
        if not as_json:
            say("Answer: ", end="")
        text = []
        for piece in pieces:
            text.append(piece)
            if not as_json:
                sys.stdout.write(printable(piece))
                sys.stdout.flush()
        reply = finish("".join(text))
        if not as_json:
            say(f"\n(written by {reply['llm']})\n")
    else:
        reply = opened.ask(question, top_k, answer)
    if as_json:
        say(json.dumps(reply, ensure_ascii=False))
        return 0
    if reply["answer"] is not None and not stream:
        say(f"Answer: {reply['answer'].strip()}\n(written by {reply['llm']})\n")
    elif reply["note"]:
        say(f"{reply['note']}\n")
    for p in reply["passages"]:
        where = f"chars {p['start_char']}-{p['end_char']}"
        if p["page"] is not None:
            where += f", page {p['page']}"
        score = "" if p["score"] is None else f"  score {p['score']:.4f}"
        say(f"[{p['rank']}] {p['file']} ({where}){score}")
        if p["evidence"]:
            say(f"    evidence: {_short(p['evidence'])}")
        say(f"    {_snippet(p['text'])}")
    if not reply["passages"]:
        say("(no passage retrieved)")
    return 0


def _short(evidence: dict[str, Any], limit: int = 300) -> str:
    text = json.dumps(evidence, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _snippet(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def run_info(folder: str, as_json: bool = False, verify: bool = False, say=safe_print) -> int:
    """Describe the index in ``folder``: method, settings, tiers, fallbacks, sizes, LLM usage.

    With ``verify``, first check every file against the checksums its manifest holds.

    Raises:
        UserError: A file is missing or damaged (each one is printed, then this).
    """
    collection = read_collection(folder)
    methods.resolve(collection.method, collection.options)  # still a known method
    if verify:
        _verify(Path(folder), say)
    if as_json:
        say(json.dumps(collection.to_dict(), ensure_ascii=False, default=str))
        return 0
    c = collection
    say(f"index:      {Path(folder).resolve()}")
    say(f"method:     {c.method}")
    say(f"config:     {c.config.get('config')}")
    settings = c.config.get("settings") or {}
    say(f"settings:   {json.dumps(settings)}")
    chunking = c.chunking
    say(
        f"chunking:   {chunking['chunk_size']}/{chunking['chunk_overlap']} tokens "
        f"({chunking['parser']}; method default {chunking['default']})"
    )
    say(
        f"embedder:   {c.embedder or c.embed_model}" + (f" ({c.embed_model})" if c.embedder else "")
    )
    if c.reranker:
        say(f"reranker:   {c.reranker}")
    say(f"LLM:        {c.llm.get('llm')} (tier {c.llm.get('tier')})")
    for record in c.llm_steps:
        who = f"{record.get('llm_class')}({record.get('model')})" if record.get("llm_class") else ""
        line = f"  step {record['step']}: {record['tier']} {who}".rstrip()
        if record.get("fallbacks"):
            line += f", {record['fallbacks']} of {record.get('items', 0)} fell back"
            line += f" to {record.get('stand_in')} {record.get('reasons') or ''}".rstrip()
        elif record.get("note"):
            line += f" ({record['note']})"
        say(line)
    chunks = sum(int(f.get("chunks", 0)) for f in c.files.values())
    say(f"documents:  {len(c.files)} file(s), {chunks} chunk(s)")
    graph = c.sizes.get("graph")
    if graph:
        say(f"graph:      nodes {graph.get('nodes')}, edges {graph.get('edges')}")
    counts = {k: v for k, v in (c.sizes.get("stats") or {}).items() if isinstance(v, int)}
    if counts:
        say(f"sizes:      {json.dumps(counts)}")
    u = c.usage
    say(
        f"LLM usage:  {u.get('calls', 0)} call(s), {u.get('total_tokens', 0)} token(s) "
        f"({u.get('prompt_tokens', 0)} prompt, {u.get('completion_tokens', 0)} completion), "
        f"{u.get('cache_hits', 0)} cache hit(s)"
    )
    if c.skipped:
        say(f"skipped:    {len(c.skipped)} file(s) at the last run")
        for s in c.skipped:
            say(f"  {s['path']}: {s['reason']}")
    for h in c.history:
        say(
            f"history:    {h['at']} {h['action']}: {h['files']} file(s), {h['seconds']} s, "
            f"{h['llm_calls']} LLM call(s)"
        )
    return 0
