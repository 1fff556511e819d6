"""Every method as a persistent, updatable index of a user's files, through its spec.

A name (``NAME[:PRESET][/FIELD=VALUE...]``, with ``--set`` fields) selects a
spec and a config (:mod:`..core.spec`); the spec says how the method chunks a
file by its paper's default, and the index protocol does the rest: build,
persist, load, insert, delete, retrieve, answer. Nothing here knows one method
from another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.config import ConfigError, MethodConfig
from ..core.persist import IndexFormatError
from ..core.spec import Chunking, MethodSpec, make_config, parse_method_name, with_cache
from ..specs import get_spec
from .errors import UserError

if TYPE_CHECKING:  # `info` and `bench --list` read this module without the model stack
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms import LLM
    from llama_index.core.schema import BaseNode


@dataclass(frozen=True)
class Method:
    """A resolved method name: its spec and config."""

    name: str
    spec: MethodSpec
    config: MethodConfig

    @property
    def uses_llm(self) -> bool:
        """True when building the index calls an LLM."""
        return self.config.uses_llm

    @property
    def chunking(self) -> Chunking:
        return self.spec.chunking


def resolve(name: str, options: Mapping[str, Any] | None = None) -> Method:
    """The method named ``name`` with ``--set`` options (every field checked).

    Raises:
        UserError: An unknown method, preset or field, a bad value, or a fusion.
    """
    if name.startswith(("fusion-", "shared:")):
        raise UserError(
            f"{name} fuses several methods at query time and has no index of its own; "
            "index each part (e.g. --method cue, --method bm25) into its own folder"
        )
    try:
        parsed = parse_method_name(name)
        spec = get_spec(parsed.method)
        return Method(name, spec, make_config(spec, parsed, options))
    except ConfigError as exc:
        raise UserError(str(exc)) from exc


def chunker(method: Method, llm: LLM | None, size: int, overlap: int, cache_dir: Path | None):
    """The method's own node parser for this config and LLM, else a sentence splitter."""
    if method.spec.node_parser is not None:
        config = with_cache(method.config, cache_dir, method.spec.name)
        parser = method.spec.node_parser(config, llm)
        if parser is not None:
            return parser
    from ..core.splitting import sentence_splitter

    return sentence_splitter(size, overlap)


def build(
    method: Method,
    nodes: Sequence[BaseNode],
    embed_model: BaseEmbedding,
    llm: LLM | None,
    cache_dir: Path | None,
    show_progress: bool,
    **kwargs: Any,
) -> Any:
    """Build the method's index from chunk nodes (its LLM cache under ``cache_dir``)."""
    config = with_cache(method.config, cache_dir, method.spec.name)
    return method.spec.build(
        nodes, config, embed_model=embed_model, llm=llm, show_progress=show_progress, **kwargs
    )


def load(
    method: Method,
    folder: Path,
    embed_model: BaseEmbedding,
    llm: LLM | None,
    cache_dir: Path | None = None,
) -> Any:
    """Load the index :func:`build` made (its config is the one stored with it; its LLM
    cache, which an index never stores, under ``cache_dir``).

    Raises:
        UserError: The index cannot be loaded: one line naming the folder (and the file,
            where the reader knows it) and how to rebuild, never a traceback.
    """
    try:
        index = method.spec.load(folder, embed_model=embed_model, llm=llm)
    except Exception as exc:
        detail = " ".join(str(exc).split())[:300] or type(exc).__name__
        if not isinstance(exc, (IndexFormatError, FileNotFoundError)):
            detail = f"{type(exc).__name__}: {detail}"
        raise UserError(
            f"{folder}: the index cannot be loaded: {detail}. Rebuild it with "
            f"`graphrag-ext index PATH... --method {method.name} --out DIR`"
        ) from exc
    index.config = with_cache(index.config, cache_dir, method.spec.name)
    return index


def sizes(index: Any) -> dict[str, Any]:
    """Chunks, the graph's nodes and edges by kind where the method has a graph, and stats."""
    out: dict[str, Any] = {"chunks": len(index)}
    graph = getattr(index, "graph", None)
    if graph is not None:
        out["graph"] = {
            "nodes": {kind: graph.num_nodes(kind) for kind in graph.node_kinds()},
            "edges": {kind: graph.num_edges(kind) for kind in graph.edge_kind_names()},
        }
    out["stats"] = _plain(index.stats())
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)
