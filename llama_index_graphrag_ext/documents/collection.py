"""An index folder written by ``graphrag-ext index``: the method's index plus what was indexed.

Layout of ``DIR``::

    DIR/index/collection.json   method, options, config, chunking, embedder, LLM, files (path ->
                                 hash, chunks, pages), skipped files, LLM usage, history
    DIR/index/method/           the method's own persisted index (its manifest.json inside)
    DIR/llm-cache/*.sqlite      LLM response caches (kept across runs: an interrupted
                                 build resumes without paying twice)

``DIR/index`` is written with :func:`~llama_index_graphrag_ext.core.persist.atomic_dir`:
a crash mid-write leaves the previous index whole. The cache lives outside it
so that a build killed before its first persist still keeps every answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.persist import (
    CHECKSUM,
    FILES,
    MANIFEST,
    atomic_dir,
    check_sealed,
    read_json,
    write_json,
)
from .errors import UserError

#: Version of ``collection.json``; bump when the layout changes.
COLLECTION_FORMAT = 2
COLLECTION_FILE = "collection.json"
INDEX_DIR = "index"
METHOD_DIR = "method"
CACHE_DIR = "llm-cache"
_SEAL = (FILES, CHECKSUM)


@dataclass
class Collection:
    """The contents of ``collection.json``."""

    method: str
    options: dict[str, str]
    config: dict[str, Any]
    chunking: dict[str, Any]
    embed_model: str
    llm: dict[str, Any]
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    sizes: dict[str, Any] = field(default_factory=dict)
    llm_steps: list[dict[str, Any]] = field(default_factory=list)
    #: The embedder's model and dimension, as ``info`` shows it (``embed_model``: its name).
    embedder: str = ""
    #: The reranker ``query`` and ``serve`` apply (``--reranker``; "" for none).
    reranker: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": COLLECTION_FORMAT, "tool": "graphrag-ext index", **self.__dict__}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Collection:
        data = {k: v for k, v in data.items() if k not in ("format_version", "tool", *_SEAL)}
        return cls(**data)

    def add_usage(self, counts: dict[str, int]) -> None:
        for key in ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "total_tokens"):
            self.usage[key] = int(self.usage.get(key, 0)) + int(counts.get(key, 0))


def index_dir(folder: Path) -> Path:
    return Path(folder) / INDEX_DIR


def cache_dir(folder: Path) -> Path:
    path = Path(folder) / CACHE_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def read_collection(folder: str | Path) -> Collection:
    """Read and check ``DIR``'s collection (every problem is a :class:`UserError`)."""
    folder = Path(folder)
    if not folder.exists():
        raise UserError(f"{folder}: no such folder")
    if not folder.is_dir():
        raise UserError(f"{folder} is a file, not an index folder")
    # A reader never restores anything (a writer's swap may be in flight): only the next
    # writer, under its lock, puts back an index whose swap was interrupted.
    path = index_dir(folder) / COLLECTION_FILE
    if not path.is_file() and (folder / f".{INDEX_DIR}.old").is_dir():
        raise UserError(
            f"{folder} is being updated (or an update was killed): try again in a moment; "
            "the next `graphrag-ext index --update` restores it"
        )
    if not path.is_file():
        if (folder / MANIFEST).is_file():
            kind = read_json(folder / MANIFEST).get("kind", "?")
            raise UserError(
                f"{folder} holds a {kind!r} index written by persist(), not by "
                "`graphrag-ext index`; load it in Python with its class's load(dir)"
            )
        raise UserError(
            f"{folder} is not an index folder (no {INDEX_DIR}/{COLLECTION_FILE}); "
            "build one with `graphrag-ext index PATH --method NAME --out DIR`"
        )
    try:
        data = read_json(path)
        if not isinstance(data, dict) or "format_version" not in data:
            raise ValueError(f"{path} is damaged (not an index description)")
    except ValueError as exc:  # IndexFormatError is one
        raise UserError(f"{folder}: {exc}; rebuild the index") from exc
    version = data.get("format_version")
    if version != COLLECTION_FORMAT:
        from ..specs import RENAMED

        method = str(data.get("method", "NAME"))
        raise UserError(
            f"{folder} was written in index format {version}; this release reads format "
            f"{COLLECTION_FORMAT}. Rebuild it: graphrag-ext index PATH... --method "
            f"{RENAMED.get(method, method)} --out {folder}"
        )
    try:
        # Its own digest only: the method's manifest is checked (with its files) when the
        # index is loaded, after its format version, whose message says more.
        check_sealed(index_dir(folder), data, COLLECTION_FILE, files=False)
        return Collection.from_dict(data)
    except (ValueError, TypeError) as exc:  # IndexFormatError is a ValueError
        raise UserError(f"{folder}: {exc}; rebuild the index") from exc


def write_collection(folder: Path, collection: Collection, index: Any) -> None:
    """Persist the method's index and the collection into ``DIR/index``, atomically."""
    with atomic_dir(index_dir(folder), manifest=COLLECTION_FILE) as tmp:
        index.persist(tmp / METHOD_DIR)
        write_json(tmp / COLLECTION_FILE, collection.to_dict())
