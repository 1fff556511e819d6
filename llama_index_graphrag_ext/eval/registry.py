"""How a run's method names become built systems, through the methods' specs.

A name is ``NAME[:PRESET][/FIELD=VALUE...]`` (:mod:`..core.spec`), or a fusion
of such names (:mod:`.fusion`). Every method is built the same way: its
passages become one chunk each (or its own node parser's chunks), its index is
built with the config the name selects, and its retriever reads the run's
top-k. Nothing here knows one method from another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.ingestion import run_transformations
from llama_index.core.llms import LLM
from llama_index.core.schema import Document, NodeWithScore

from ..core.config import ConfigError, MethodConfig
from ..core.nodes import PassageParser, dedupe_by_source, prepare_documents
from ..core.spec import MethodSpec, make_config, parse_method_name, with_cache
from ..specs import SPECS, get_spec

logger = logging.getLogger(__name__)


@dataclass
class BenchContext:
    """What building a method gets besides the documents.

    Attributes:
        embed_model: The shared embedder (loaded once per run).
        llm_factory: Builds the configured LLM on first use, so LLM-free methods
            never load one.
        top_k: How many passages the runner reads per question.
        options: ``--set FIELD=VALUE`` pairs (each method takes the fields it has).
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


@dataclass
class BenchSystem:
    """A built method, as the runner drives it.

    Attributes:
        retriever: Ranks chunks for a question.
        answerer: Optional ``question -> (answer text, ranked passage ids)`` for
            methods that answer with their own engine.
        info: Facts for the report (config, sizes, counts).
        steps: The step ledgers (``LLMSteps``) of the method's LLM-using parts.
        index: The built index (``None`` for a fusion).
    """

    retriever: BaseRetriever
    answerer: Callable[[str], tuple[str, list[str]]] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    steps: list[Any] = field(default_factory=list)
    index: Any = None

    def retrieve(self, question: str) -> tuple[list[str], list[NodeWithScore]]:
        """Ranked passage ids (first occurrence of each source) and the raw results."""
        results = self.retriever.retrieve(question)
        return dedupe_by_source(results), results


@dataclass(frozen=True)
class Resolved:
    """A method name checked against the specs: what it builds and in which tier."""

    name: str
    tier: str
    spec: MethodSpec | None = None
    config: MethodConfig | None = None


def resolve(name: str, options: Mapping[str, Any] | None = None) -> Resolved:
    """Check ``name`` (and ``--set`` options) without building anything.

    Raises:
        ConfigError: An unknown method, preset or field, or a value it refuses.
    """
    from .fusion import fusion_tier, is_fusion

    if is_fusion(name):
        return Resolved(name, fusion_tier(name, options))
    parsed = parse_method_name(name)
    spec = get_spec(parsed.method)
    config = make_config(spec, parsed, options, strict_options=False)
    return Resolved(name, spec.tier(config), spec, config)


def check_options(names: Sequence[str], options: Mapping[str, Any]) -> None:
    """Every ``--set`` field belongs to at least one method of the run (typos fail fast)."""
    from .fusion import FUSION_OPTIONS, is_fusion, part_names

    specs: list[MethodSpec] = []
    fusions = False
    for name in names:
        if is_fusion(name):
            fusions = True
            specs += [get_spec(parse_method_name(p).method) for p in part_names(name)]
        else:
            specs.append(get_spec(parse_method_name(name).method))
    known = {f for spec in specs for f in spec.config.field_sections()}
    if fusions:
        known |= set(FUSION_OPTIONS)
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(
            f"--set {', '.join(unknown)}: no method of this run has such a setting "
            "(`graphrag-ext bench --list` shows each method's settings)"
        )


def build_system(name: str, documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    """Build the method (or fusion) ``name`` over ``documents``."""
    from .fusion import build_fusion, is_fusion

    if is_fusion(name):
        return build_fusion(name, documents, ctx)
    resolved = resolve(name, ctx.options)
    return build_spec_system(resolved.spec, resolved.config, documents, ctx)


def build_spec_system(
    spec: MethodSpec, config: MethodConfig, documents: Sequence[Document], ctx: BenchContext
) -> BenchSystem:
    """Index ``documents`` (one chunk per passage) with ``config`` and make its retriever."""
    own_engine = spec.own_engine(config)
    llm = ctx.llm() if config.uses_llm or own_engine else None
    config = with_cache(config, ctx.cache_dir, spec.name)
    parser = spec.node_parser(config, llm) if spec.node_parser is not None else None
    docs, _ = prepare_documents(documents)
    nodes = run_transformations(docs, [parser or PassageParser()], show_progress=ctx.show_progress)
    index = spec.build(
        nodes, config, embed_model=ctx.embed_model, llm=llm, show_progress=ctx.show_progress
    )
    retriever = index.as_retriever(similarity_top_k=ctx.top_k)
    steps = [getattr(part, "llm_steps", None) for part in (index, retriever)]
    answerer = None
    if own_engine and llm is not None:
        engine = index.as_query_engine(llm=llm)
        answerer = query_engine_answerer(engine)
        steps.append(getattr(engine, "llm_steps", None))
    info = {"config": config.origin, **index.stats()}
    if parser is not None:
        info["chunker"] = type(parser).__name__
    return BenchSystem(
        retriever=retriever,
        answerer=answerer,
        info=info,
        steps=[s for s in steps if s is not None],
        index=index,
    )


def query_engine_answerer(engine: BaseQueryEngine) -> Callable[[str], tuple[str, list[str]]]:
    """Adapt a query engine to :attr:`BenchSystem.answerer`."""

    def answer(question: str) -> tuple[str, list[str]]:
        response = engine.query(question)
        return str(response), dedupe_by_source(response.source_nodes)

    return answer


def describe_methods() -> str:
    """``graphrag-ext bench --list``: each method, its presets and its settings, as typed."""
    from .fusion import FUSION_HELP

    lines = [
        "Name a method as NAME[:PRESET][/FIELD=VALUE...]; --set FIELD=VALUE sets a field "
        "for every method of a run that has it.",
        "",
    ]
    for spec in SPECS.values():
        default = spec.config.resolve()
        lines.append(f"{spec.name}  ({spec.tier(default)})  {spec.summary}")
        for preset, info in spec.config.presets.items():
            mark = " (the default)" if preset == spec.config.default_preset else ""
            tier = spec.tier(spec.config.preset(preset))
            lines.append(f"  {spec.name}:{preset}  [{tier}]{mark}  {info.doc}")
        for section, model in spec.config.sections().items():
            values = getattr(default, section)
            fields = ", ".join(f"{k}={getattr(values, k)!r}" for k in model.model_fields)
            lines.append(f"  settings, {section}: {fields}")
        lines.append("")
    lines.append(FUSION_HELP)
    return "\n".join(lines)
