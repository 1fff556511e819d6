"""Building one method of a run: its passages as chunks, its index, its retriever.

Every method is built the same way through its spec (:mod:`..core.spec`): its
passages become one chunk each (or its own node parser's chunks), its index is
built with the config the name selects, and its retriever reads the run's
top-k. Nothing here knows one method from another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.config import MethodConfig
from ..core.spec import MethodSpec, make_config, parse_method_name, with_cache
from ..specs import get_spec

if TYPE_CHECKING:  # `bench --list` reads the registry without the model stack
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.llms import LLM
    from llama_index.core.schema import Document, NodeWithScore


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
        from ..core.nodes import dedupe_by_source

        return dedupe_by_source(results), results


def spec_config(
    name: str, options: Mapping[str, Any] | None = None
) -> tuple[MethodSpec, MethodConfig]:
    """The spec and config ``NAME[:PRESET][/FIELD=VALUE...]`` selects (``options``: ``--set``,
    each method taking the fields it has)."""
    parsed = parse_method_name(name)
    spec = get_spec(parsed.method)
    return spec, make_config(spec, parsed, options, strict_options=False)


def build_spec_system(
    spec: MethodSpec, config: MethodConfig, documents: Sequence[Document], ctx: BenchContext
) -> BenchSystem:
    """Index ``documents`` (one chunk per passage) with ``config`` and make its retriever."""
    own_engine = spec.own_engine(config)
    llm = ctx.llm() if config.uses_llm or own_engine else None
    config = with_cache(config, ctx.cache_dir, spec.name)
    parser = spec.node_parser(config, llm) if spec.node_parser is not None else None
    steps = spec.parser_steps(parser)
    from llama_index.core.ingestion import run_transformations

    from ..core.nodes import PassageParser, prepare_documents

    docs, _ = prepare_documents(documents)
    nodes = run_transformations(docs, [parser or PassageParser()], show_progress=ctx.show_progress)
    index = spec.build(
        nodes,
        config,
        embed_model=ctx.embed_model,
        llm=llm,
        show_progress=ctx.show_progress,
        **steps,
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
        from ..core.nodes import dedupe_by_source

        return str(response), dedupe_by_source(response.source_nodes)

    return answer
