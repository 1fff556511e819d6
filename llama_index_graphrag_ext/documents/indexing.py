"""``graphrag-ext index``: build or update a method's index of a user's files."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.ingestion import run_transformations

from ..core.defaults import describe_embed_model
from ..core.llm import choose_llm, count_llm_calls, describe_llm
from . import methods
from .collection import (
    METHOD_DIR,
    Collection,
    cache_dir,
    index_dir,
    read_collection,
    write_collection,
)
from .errors import UserError
from .lock import writer_lock
from .reading import ReadFile, Reading, Skipped, discover, read_files
from .terminal import safe_print


@dataclass
class IndexRequest:
    """What ``graphrag-ext index`` was asked (see ``graphrag-ext index --help``)."""

    paths: list[str]
    method: str | None = None
    out: str | None = None
    update: str | None = None
    exclude: list[str] = field(default_factory=list)
    include: list[str] = field(default_factory=list)
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    llm: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    #: The embedder (see ``core.defaults.make_embedder``); ``None``: ``default`` for a new
    #: index, the recorded one on ``--update``.
    embed_model: str | None = None
    #: A reranker for ``query`` and ``serve`` (see ``core.defaults.make_reranker``).
    reranker: str | None = None
    show_progress: bool = True
    wait: float = 0.0


def make_embedder(spec: str):
    """The embedder named ``spec``: ``default`` (MiniLM), ``hash:<dim>`` (a near-free stand-in)."""
    from ..core.defaults import make_embedder as make

    try:
        return make(spec)
    except ValueError as exc:
        raise UserError(f"--embed-model {spec}: {exc}") from exc


def _reranker_name(spec: str | None) -> str:
    """A reranker as recorded, checked now (a bad name fails the build, not a later query)."""
    if not spec:
        return ""
    from ..core.defaults import make_reranker

    try:
        make_reranker(spec)
    except ValueError as exc:
        raise UserError(f"--reranker {spec}: {exc}") from exc
    return _embed_name(spec)


def _embed_name(spec: str) -> str:
    """How an embedder is recorded: a local folder by its absolute path (``query`` and
    ``--update`` then find it from any working folder), anything else as given."""
    path = Path(spec).expanduser()
    return str(path.resolve()) if ":" not in spec and path.is_dir() else spec


def resolve_llm_for(method: methods.Method, provider: str | None, say) -> tuple[Any, dict]:
    """The LLM a method's build uses (none for LLM-free methods), announced on stdout."""
    if not method.uses_llm:
        say(f"LLM: none (the {method.name} index is built LLM-free)")
        return None, {"provider": "none", "llm": describe_llm(None), "tier": "llm-free"}
    try:
        choice = choose_llm(provider)
    except (ValueError, ImportError, RuntimeError) as exc:
        raise UserError(f"--llm {provider or '(environment)'}: {exc}") from exc
    if choice.llm is None:
        raise UserError(
            f"{method.name} builds its index with an LLM and none is configured "
            f"(--llm {provider or 'from the environment'}); pass --llm embedded|openai|"
            "openai-like, or pick an LLM-free method (graphrag-ext bench --list)"
        )
    say(f"LLM: {choice.describe()} (tier {choice.tier})")
    return choice.llm, {
        "provider": provider or "environment",
        "llm": describe_llm(choice.llm),
        "tier": choice.tier,
        "source": choice.source,
    }


@contextlib.contextmanager
def llm_progress(enabled: bool) -> Iterator[Any]:
    """Count LLM calls in the block; with ``enabled``, a live bar of calls and tokens so far."""
    with count_llm_calls() as meter:
        if not enabled:
            yield meter
            return
        from tqdm.auto import tqdm

        bar = tqdm(total=0, bar_format="LLM {postfix}", position=1, leave=True)
        stop = threading.Event()

        def refresh() -> None:
            while not stop.wait(0.5):
                snap = meter.snapshot()
                bar.set_postfix_str(
                    f"calls {snap['calls']}, tokens {snap['total_tokens']}, "
                    f"cache hits {snap['cache_hits']}"
                )

        thread = threading.Thread(target=refresh, daemon=True)
        thread.start()
        try:
            yield meter
        finally:
            stop.set()
            thread.join()
            snap = meter.snapshot()
            bar.set_postfix_str(f"calls {snap['calls']}, tokens {snap['total_tokens']}")
            bar.close()


def _chunk(method, llm, size: int, overlap: int, folder: Path, docs, show: bool, index=None):
    """Chunk ``docs``; a chunker that records LLM steps records them into ``index``'s ledger
    (an update) or into the ledger returned for the new index (``{"llm_steps": ...}``)."""
    parser = methods.chunker(method, llm, size, overlap, cache_dir(folder))
    if index is not None and hasattr(parser, "attach_steps"):
        parser.attach_steps(index.llm_steps)
        steps = {}
    else:
        steps = method.spec.parser_steps(parser)
    try:
        nodes = run_transformations(docs, [parser], show_progress=show)
    except Exception:  # one document the parser cannot take must not stop the others
        nodes, failed = _chunk_each(parser, docs)
        if not nodes and failed:
            raise
        return nodes, type(parser).__name__, steps, failed
    return nodes, type(parser).__name__, steps, []


def _chunk_each(parser, docs) -> tuple[list, list[Skipped]]:
    """Chunk ``docs`` one by one: the documents the parser fails on are skipped with why
    (e.g. a sentence splitter's regular-expression time limit on a huge text)."""
    nodes, failed = [], []
    for doc in docs:
        try:
            nodes.extend(run_transformations([doc], [parser]))
        except Exception as exc:
            reason = " ".join(str(exc).split())[:160] or type(exc).__name__
            failed.append(Skipped(doc.doc_id, f"could not be chunked: {reason}"))
    return nodes, failed


def _without(reading: Reading, failed: list[Skipped]) -> None:
    """Move the files the chunker could not take from ``reading.files`` to its skipped."""
    gone = {f.path for f in failed}
    reading.files = [r for r in reading.files if r.path not in gone]
    reading.skipped.extend(failed)


def _record_files(collection: Collection, files: list[ReadFile], nodes) -> None:
    counts: dict[str, int] = {}
    for node in nodes:
        counts[node.ref_doc_id] = counts.get(node.ref_doc_id, 0) + 1
    for read in files:
        collection.files[read.path] = {
            "sha256": read.sha256,
            "chunks": counts.get(read.path, 0),
            "pages": read.pages,
        }
        if read.encoding is not None:
            collection.files[read.path]["encoding"] = read.encoding
        if read.undecodable:
            collection.files[read.path]["undecodable"] = read.undecodable


def _report_decoding(reading: Reading, say) -> None:
    """Files read from another encoding than UTF-8, and characters that could not be read."""
    for read in reading.files:
        if read.encoding not in (None, "utf-8", "utf-8-sig"):
            say(f"  {read.path}: read as {read.encoding}")
        if read.undecodable:
            say(
                f"warning: {read.path}: {read.undecodable} undecodable character(s) "
                "replaced by U+FFFD"
            )


def _outside(files: list[Path], folder: Path) -> list[Path]:
    """``files`` less those inside the index folder (an index kept among its own documents)."""
    root = folder.resolve()
    return [f for f in files if root not in f.parents]


def _report_skipped(reading: Reading, say) -> None:
    _report_decoding(reading, say)
    if reading.skipped:
        say(f"skipped {len(reading.skipped)} file(s):")
        for item in reading.skipped:
            say(f"  {item.path}: {item.reason}")


def run_index(req: IndexRequest, say=safe_print) -> int:
    """Build (``--out``) or update (``--update``) an index; returns the exit status.

    One writer at a time per folder (:mod:`.lock`): the whole run holds the lock.
    """
    if not req.update and not (req.method and req.out):
        raise UserError("index needs --method NAME and --out DIR (or --update DIR)")
    folder = Path(req.update or req.out)
    if req.update and not folder.is_dir():
        read_collection(folder)  # its message: no such folder, or not an index folder
    with writer_lock(folder, index_dir(folder), req.wait):
        return _update(req, say) if req.update else _build(req, say)


def _build(req: IndexRequest, say) -> int:
    folder = Path(req.out)
    method = methods.resolve(req.method, req.options)
    if (index_dir(folder) / "collection.json").is_file():
        old = read_collection(folder)
        if old.method != method.name:
            raise UserError(
                f"{folder} holds a {old.method} index; pick another --out, or update it "
                f"with --update {folder} (method {old.method})"
            )
        say(f"{folder} holds a {old.method} index: rebuilding it from scratch")
    files = _outside(discover(req.paths, req.exclude, req.include), folder)
    reading, _ = read_files(files, show_progress=req.show_progress)
    _report_skipped(reading, say)
    if not reading.files:
        raise UserError(
            f"no file could be indexed ({len(files)} found, {len(reading.skipped)} skipped)"
        )
    size = req.chunk_size or method.chunking.size
    overlap = req.chunk_overlap if req.chunk_overlap is not None else method.chunking.overlap
    if overlap >= size:
        raise UserError(f"--chunk-overlap {overlap} must be smaller than the chunk size {size}")
    embed_name = _embed_name(req.embed_model or "default")
    embed_model, embedder = None, "none (BM25 embeds nothing)"
    if method.spec.embeds:
        embed_model = make_embedder(embed_name)
        embedder = describe_embed_model(embed_model)
    say(f"embedder: {embedder}")
    llm, llm_info = resolve_llm_for(method, req.llm, say)
    started = time.perf_counter()
    docs = [read.document() for read in reading.files]
    with llm_progress(req.show_progress and llm is not None) as meter:
        nodes, parser, steps, failed = _chunk(
            method, llm, size, overlap, folder, docs, req.show_progress
        )
        if failed:
            _without(reading, failed)
            _report_skipped(Reading([], failed), say)
        if not nodes:
            raise UserError("the files gave no chunk to index")
        index = methods.build(
            method, nodes, embed_model, llm, cache_dir(folder), req.show_progress, **steps
        )
    collection = Collection(
        method=method.name,
        options=dict(req.options),
        config=method.config.describe(),
        chunking={
            "chunk_size": size,
            "chunk_overlap": overlap,
            "parser": parser,
            "default": f"{method.chunking.size}/{method.chunking.overlap}: {method.chunking.source}",
        },
        embed_model=embed_name,
        embedder=embedder,
        reranker=_reranker_name(req.reranker),
        llm=llm_info,
    )
    _record_files(collection, reading.files, nodes)
    collection.skipped = [{"path": s.path, "reason": s.reason} for s in reading.skipped]
    _finish(collection, index, method, meter, folder, started, "built", say)
    say(
        f"indexed {len(reading.files)} file(s) into {len(nodes)} chunk(s) with {method.name} "
        f"-> {folder}"
    )
    return 0


def _update(req: IndexRequest, say) -> int:
    folder = Path(req.update)
    collection = read_collection(folder)
    if req.method and req.method != collection.method:
        raise UserError(
            f"{folder} holds a {collection.method} index, not {req.method}; "
            f"drop --method or build a new index with --out"
        )
    for flag, value in (("--chunk-size", req.chunk_size), ("--chunk-overlap", req.chunk_overlap)):
        if value is not None:
            raise UserError(f"{flag} cannot change on --update (the index keeps its chunking)")
    if req.embed_model is not None and _embed_name(req.embed_model) != collection.embed_model:
        raise UserError(
            f"{folder} was built with the embedder {collection.embed_model}, not "
            f"{req.embed_model}: its vectors cannot be mixed; drop --embed-model, or build "
            "a new index with --out"
        )
    if req.reranker is not None:  # a query-time choice: --update may change it
        collection.reranker = _reranker_name(req.reranker)
    method = methods.resolve(collection.method, collection.options)
    files = _outside(discover(req.paths, req.exclude, req.include), folder)
    known = {path: info["sha256"] for path, info in collection.files.items()}
    reading, unchanged = read_files(files, known=known, show_progress=req.show_progress)
    _report_skipped(reading, say)
    present = {str(p) for p in files}
    removed = sorted(p for p in known if p not in present)
    changed = [r for r in reading.files if r.path in known]
    added = [r for r in reading.files if r.path not in known]
    say(
        f"update: {len(added)} new, {len(changed)} changed, {len(removed)} removed, "
        f"{len(unchanged)} unchanged"
    )
    for tag, paths in (
        ("+", [r.path for r in added]),
        ("~", [r.path for r in changed]),
        ("-", removed),
    ):
        for path in paths:
            say(f"  {tag} {path}")
    if not (added or changed or removed):
        say("nothing to do: the index is up to date")
        return 0
    if not (added or set(known) - set(removed) - {r.path for r in changed}):
        raise UserError("the update would leave the index empty; nothing was changed")
    embed_model = make_embedder(collection.embed_model) if method.spec.embeds else None
    llm, _ = resolve_llm_for(method, req.llm, say)
    started = time.perf_counter()
    index = methods.load(
        method, index_dir(folder) / METHOD_DIR, embed_model, llm, cache_dir(folder)
    )
    docs = [r.document() for r in added + changed]
    with llm_progress(req.show_progress and llm is not None) as meter:
        for path in removed + [r.path for r in changed]:
            index.delete_ref_doc(path)
            collection.files.pop(path, None)
        nodes = []
        if docs:
            size, overlap = collection.chunking["chunk_size"], collection.chunking["chunk_overlap"]
            nodes, _, _, failed = _chunk(
                method, llm, size, overlap, folder, docs, req.show_progress, index=index
            )
            if failed:
                gone = {f.path for f in failed}
                added = [r for r in added if r.path not in gone]
                changed = [r for r in changed if r.path not in gone]
                reading.skipped.extend(failed)
                _report_skipped(Reading([], failed), say)
            if nodes:
                index.insert_nodes(nodes)
    _record_files(collection, added + changed, nodes)
    collection.skipped = [{"path": s.path, "reason": s.reason} for s in reading.skipped]
    _finish(collection, index, method, meter, folder, started, "updated", say)
    say(f"updated {folder}: {len(collection.files)} file(s) indexed")
    return 0


def _finish(collection, index, method, meter, folder: Path, started: float, what: str, say):
    counts = meter.snapshot()
    collection.add_usage(counts)
    steps = getattr(index, "llm_steps", None)
    if steps is not None:
        collection.llm_steps = [record.to_dict() for record in steps.records()]
        fallbacks = [r for r in steps.records() if getattr(r, "fallbacks", 0)]
        for record in fallbacks:
            say(f"warning: {record.step}: {record.fallbacks} fallback(s) to the LLM-free stand-in")
    collection.sizes = methods.sizes(index)
    collection.history.append(
        {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "action": what,
            "files": len(collection.files),
            "seconds": round(time.perf_counter() - started, 2),
            "llm_calls": counts["calls"],
            "llm_tokens": counts["total_tokens"],
        }
    )
    write_collection(folder, collection, index)
    if counts["calls"] or counts["cache_hits"]:
        say(
            f"LLM: {counts['calls']} call(s), {counts['total_tokens']} token(s), "
            f"{counts['cache_hits']} answered from the cache in {folder / 'llm-cache'}"
        )
