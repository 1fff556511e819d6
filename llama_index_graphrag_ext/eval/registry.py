"""The one registry of benchmarkable methods.

Each method's adapter in :mod:`llama_index_graphrag_ext.eval.methods` registers its
names here (``register_method``); the runner,
the demo and the CLI look them up. A name can be a pattern with named groups,
such as ``cue-(?P<alpha>[0-9.]+)``, whose values reach the builder as options.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.schema import Document, NodeWithScore

from ..core.nodes import dedupe_by_source

logger = logging.getLogger(__name__)

_PACKAGE = __name__.split(".")[0]

Tier = Literal["llm-free", "embedded-llm", "llm"]

#: Modules that register the built-in methods; imported on first lookup. A module
#: whose method package is not part of this install is skipped.
BUILTIN_MODULES = (
    "llama_index_graphrag_ext.eval.methods.baselines",
    "llama_index_graphrag_ext.eval.methods.qcg",
    "llama_index_graphrag_ext.eval.methods.cue",
    "llama_index_graphrag_ext.eval.methods.chainrag",
    "llama_index_graphrag_ext.eval.methods.fgrag",
    "llama_index_graphrag_ext.eval.methods.lprag",
    "llama_index_graphrag_ext.eval.methods.compose",
)


@dataclass
class BenchContext:
    """What a method builder gets besides the documents.

    Attributes:
        embed_model: The shared embedder (loaded once per run).
        llm_factory: Builds the configured LLM on first use, so LLM-free methods
            never load one.
        top_k: How many passages the runner reads per question.
        options: ``--set key=value`` pairs and a pattern name's groups.
        cache_dir: Where methods keep their LLM response caches.
        show_progress: Show progress bars while indexing.
    """

    embed_model: BaseEmbedding
    llm_factory: Callable[[], LLM | None] = lambda: None
    top_k: int = 10
    options: dict[str, str] = field(default_factory=dict)
    cache_dir: Path | None = None
    show_progress: bool = False
    _llm: Any = field(default=None, init=False, repr=False)
    _llm_made: bool = field(default=False, init=False, repr=False)

    def llm(self) -> LLM | None:
        """The configured LLM (built once)."""
        if not self._llm_made:
            self._llm = self.llm_factory()
            self._llm_made = True
        return self._llm

    def option(self, name: str, default: Any, cast: Callable[[str], Any] | None = None) -> Any:
        """An option's value converted like ``default`` (or by ``cast``)."""
        if name not in self.options:
            return default
        raw = self.options[name]
        if cast is None:
            cast = (
                (lambda s: s.lower() in ("1", "true", "yes"))
                if isinstance(default, bool)
                else type(default)
            )
        return cast(raw)


@dataclass
class BenchSystem:
    """A built method, as the runner drives it.

    Attributes:
        retriever: Ranks chunks for a question (required).
        answerer: Optional callable ``question -> (answer text, ranked passage ids)``
            for methods that answer by themselves (query engines).
        info: Free-form facts for the report (sample sizes, settings, ...).
        steps: The step ledgers (``LLMSteps``) of the method's LLM-using
            components: which LLM and tier each step used and its fallbacks. The
            runner reports them and fails a method whose full tier fell back too often.
    """

    retriever: BaseRetriever
    answerer: Callable[[str], tuple[str, list[str]]] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    steps: list[Any] = field(default_factory=list)

    def retrieve(self, question: str) -> tuple[list[str], list[NodeWithScore]]:
        """Ranked passage ids (first occurrence of each source) and the raw results."""
        results = self.retriever.retrieve(question)
        return dedupe_by_source(results), results


@dataclass(frozen=True)
class MethodSpec:
    """A registered method.

    Attributes:
        name: The name, or a regular expression with named groups.
        tier: ``llm-free``, ``embedded-llm`` or ``llm`` (the configured provider).
        build: ``(documents, context) -> BenchSystem``.
        description: One line for ``graphrag-ext bench --list``.
    """

    name: str
    tier: Tier
    build: Callable[[Sequence[Document], BenchContext], BenchSystem]
    description: str = ""

    @property
    def is_pattern(self) -> bool:
        """True when the name is a pattern with groups."""
        return "(?P<" in self.name


class MethodRegistry:
    """Name → :class:`MethodSpec`."""

    def __init__(self, modules: Sequence[str] = BUILTIN_MODULES) -> None:
        self._specs: dict[str, MethodSpec] = {}
        self._modules = list(modules)
        self._loaded = False

    def register(self, spec: MethodSpec) -> MethodSpec:
        """Add a method; a name can be registered once."""
        if spec.name in self._specs and self._specs[spec.name] is not spec:
            raise ValueError(f"method {spec.name!r} is already registered")
        self._specs[spec.name] = spec
        return spec

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for module in self._modules:
            try:
                found = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:  # the method's package itself is absent
                found = False
            if not found:
                logger.debug("method module %s is not installed; skipped", module)
                continue
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:  # the adapter's method package is absent
                if not (exc.name or "").startswith(_PACKAGE + "."):
                    raise
                logger.debug("method package %s is not installed; %s skipped", exc.name, module)

    def resolve(self, name: str) -> tuple[MethodSpec, dict[str, str]]:
        """The spec for ``name`` and the options its pattern captured.

        Raises:
            KeyError: No such method (the message lists the known ones).
        """
        self._load()
        if name in self._specs:
            return self._specs[name], {}
        for spec in self._specs.values():
            if spec.is_pattern:
                match = re.fullmatch(spec.name, name)
                if match:
                    return spec, {k: v for k, v in match.groupdict().items() if v is not None}
        known = ", ".join(readable_name(n) for n in self._specs)
        raise KeyError(
            f"unknown method {name!r}; known: {known} (`graphrag-ext bench --list` "
            "shows the options of each family)"
        )

    def names(self) -> list[str]:
        """Registered names (patterns as written)."""
        self._load()
        return list(self._specs)

    def specs(self) -> list[MethodSpec]:
        """Registered specs."""
        self._load()
        return list(self._specs.values())


def readable_name(pattern: str) -> str:
    """A registered name as a user types it: optional parts dropped, required
    groups shown as ``<name>`` (``cue-(?P<alpha>[0-9.]+)...`` -> ``cue-<alpha>``)."""
    text = pattern
    while True:  # innermost groups first, until none is left
        new = re.sub(r"\((?:\?:|\?P<\w+>)?[^()]*\)[?*]", "", text)  # optional: dropped
        new = re.sub(r"\(\?P<\w+>\)", "", new)  # emptied by the line above
        new = re.sub(r"\(\?P<(\w+)>[^()]*\)(?![?*])", r"<\1>", new)  # required: its name
        new = re.sub(r"\(\?:([^()]*)\)(?![?*])", r"\1", new)  # required, unnamed: its text
        if new == text:
            return text.replace("\\.", ".")
        text = new


#: The process-wide registry the runner, demo and CLI use.
REGISTRY = MethodRegistry()


def register_method(name: str, tier: Tier, description: str = ""):
    """Decorator: register ``build(documents, context) -> BenchSystem`` under ``name``."""

    def decorator(build: Callable[[Sequence[Document], BenchContext], BenchSystem]):
        REGISTRY.register(MethodSpec(name=name, tier=tier, build=build, description=description))
        return build

    return decorator


def query_engine_answerer(engine: BaseQueryEngine) -> Callable[[str], tuple[str, list[str]]]:
    """Adapt a query engine to :attr:`BenchSystem.answerer`."""

    def answer(question: str) -> tuple[str, list[str]]:
        response = engine.query(question)
        return str(response), dedupe_by_source(response.source_nodes)

    return answer
