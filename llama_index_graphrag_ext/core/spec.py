"""One description per method, read by the benchmark runner, the CLI and the server.

Each method folder exposes ``SPEC`` (its ``spec.py``): names, config class and
presets, the paper's chunking, and the index class. Every index follows one
protocol, so nothing outside the method folder knows more of it:

* ``Index(nodes, config=..., embed_model=..., llm=..., show_progress=...)`` builds;
  ``Index.load(folder, embed_model=..., llm=...)`` loads what ``persist`` wrote;
* ``index.config`` is the :class:`~.config.MethodConfig` it was built with;
* ``index.as_retriever(similarity_top_k=k)`` retrieves with that config;
* ``index.as_query_engine(llm=..., streaming=...)`` answers (the method's own
  engine where its paper defines one);
* ``index.stats()`` gives sizes and counts for reports and ``info``;
* ``insert_nodes``, ``delete_ref_doc`` and ``persist`` keep it up to date.

A run names a method as ``NAME[:PRESET][/FIELD=VALUE...]``, e.g. ``cue``,
``qcg:paper``, ``lprag/predictor=sage``: :func:`parse_method_name` reads it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import ConfigError, MethodConfig


@dataclass(frozen=True)
class Chunking:
    """The paper's chunking of a user's files (tokens, LlamaIndex's ``SentenceSplitter``)."""

    size: int
    overlap: int
    source: str


@dataclass(frozen=True)
class MethodSpec:
    """A method as the runner, the CLI and the server know it.

    Attributes:
        name: What a user types (``qcg``).
        summary: One line for ``graphrag-ext bench --list``.
        config: The method's :class:`~.config.MethodConfig` class (its presets inside).
        index: The index class as ``"module:Class"`` (imported on first use).
        chunking: The paper's chunking of a user's files.
        node_parser: ``(config, llm) -> TransformComponent | None``: the method's own
            chunker for this config and LLM (LP-RAG's atomic chunker), ``None`` for the
            default (one chunk per passage in the runner, ``chunking`` for files).
        own_engine: ``config -> bool``: the index's ``as_query_engine`` answers in the
            runner (the method's own engine), not retrieve-then-synthesize.
    """

    name: str
    summary: str
    config: type[MethodConfig]
    index: str
    chunking: Chunking
    node_parser: Callable[[MethodConfig, Any], Any] | None = None
    own_engine: Callable[[MethodConfig], bool] = field(default=lambda config: False)
    #: Whether the index embeds anything (BM25 does not: its queries load no embedder).
    embeds: bool = True

    def index_class(self) -> type:
        """The index class (imported now)."""
        module, _, name = self.index.partition(":")
        return getattr(importlib.import_module(module), name)

    def tier(self, config: MethodConfig) -> str:
        """``llm`` when building the index calls an LLM, else ``llm-free``."""
        return "llm" if config.uses_llm else "llm-free"

    def build(self, nodes: Any, config: MethodConfig, **kwargs: Any) -> Any:
        """The index of ``nodes`` (``kwargs``: ``embed_model``, ``llm``, ``show_progress``, ...)."""
        return self.index_class()(list(nodes), config=config, **kwargs)

    def parser_steps(self, parser: Any) -> dict[str, Any]:
        """``{"llm_steps": ledger}`` for :meth:`build` when ``parser`` records LLM steps
        (LP-RAG's atomic chunker), attached before it runs: the chunking step then goes
        into the index's ledger and is persisted with it. ``{}`` otherwise."""
        if parser is None or not hasattr(parser, "attach_steps"):
            return {}
        from .llm import LLMSteps

        steps = LLMSteps(self.index.rpartition(":")[2])
        parser.attach_steps(steps)
        return {"llm_steps": steps}

    def load(self, folder: Any, **kwargs: Any) -> Any:
        """The index persisted in ``folder`` (``kwargs``: ``embed_model``, ``llm``)."""
        return self.index_class().load(folder, **kwargs)


@dataclass(frozen=True)
class MethodName:
    """A parsed ``NAME[:PRESET][/FIELD=VALUE...]``."""

    text: str
    method: str
    preset: str | None
    overrides: dict[str, str]


def parse_method_name(text: str) -> MethodName:
    """Split ``NAME[:PRESET][/FIELD=VALUE...]`` (see the module docs)."""
    head, *sets = text.strip().split("/")
    method, _, preset = head.partition(":")
    overrides: dict[str, str] = {}
    for pair in sets:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{text}: expected /FIELD=VALUE after the name, got /{pair}")
        overrides[key.strip()] = value.strip()
    if not method:
        raise ConfigError(f"{text!r} names no method")
    return MethodName(text.strip(), method.strip(), preset.strip() or None, overrides)


def make_config(
    spec: MethodSpec,
    name: MethodName,
    options: Mapping[str, Any] | None = None,
    *,
    strict_options: bool = True,
) -> MethodConfig:
    """The config a name selects: its preset, then ``options``, then the name's own fields.

    With ``strict_options=False`` an option the method lacks is skipped (one ``--set``
    given to a run of several methods reaches those that have it).
    """
    config = spec.config.resolve(name.preset)
    if options:
        known = spec.config.field_sections()
        taken = {k: v for k, v in options.items() if strict_options or k in known}
        config = config.updated(taken)
    return config.updated(name.overrides)


def with_cache(config: MethodConfig, cache_dir: Path | None, name: str) -> MethodConfig:
    """The config with its LLM response cache under ``cache_dir`` (one file per method).

    Only a config with a ``cache_path`` field and none set is changed; its
    :attr:`~.config.MethodConfig.origin` stays (the cache changes no result).
    """
    section = config.field_sections().get("cache_path")
    if cache_dir is None or section is None or getattr(config, section).cache_path:
        return config
    path = str(Path(cache_dir) / f"{name}-llm.sqlite")
    part = getattr(config, section).model_copy(update={"cache_path": path})
    return config.model_copy(update={section: part})
