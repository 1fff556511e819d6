"""Benchmark registrations for CUE-RAG.

Names (``graphrag-ext bench --methods ...``):

* ``cue-0.0``: LLM-free (alpha = 0: sentence units, spaCy NER, spaCy query entities).
* ``cue-<alpha>``, e.g. ``cue-0.5``, ``cue-1.0``: the configured LLM writes the
  units of the knapsack-chosen chunks (``--llm``); with the embedded SmolLM2 the
  extraction falls back to sentences and the run says so in its info.
* Presets (:data:`PRESETS`) go before the ablations: ``cue-0.0`` is the preset
  chosen on 2wiki-101 (run it on musique-100 and on your own data),
  ``cue-0.0-tuned-musique`` the one chosen on musique-100 (run it on 2wiki-101),
  ``cue-0.0-paper`` the paper's M = 5 with plain cosine scores.
* Ablations (Table 4) append ``-no-sa``, ``-no-ka`` and/or ``-no-qu``:
  ``cue-0.0-no-sa``, ``cue-0.0-tuned-musique-no-qu-no-ka``, ...

Options (``--set key=value``): ``K``, ``D``, ``M`` (Q-Iter), ``top_n`` (default:
the runner's top-k), ``lexical_weight``, ``path_weight``, ``long_chunks``
(``best-window``/``pooled``), ``preset``, ``fill`` (``dense``/``none``), ``selection``
(``bleu``/``cos``/``random``), ``title_entity`` (true/false), ``query_entities``
(``spacy``/``llm``; default ``llm`` when alpha > 0 and a non-embedded LLM is set),
``unit_vectors`` / ``entity_vectors`` (``separate``/``late``; default: the preset's),
``nlp_processes`` (spaCy worker processes; default: the CPUs, at most 4),
``sentence_splitter`` (``rule``, the default, or ``model``: spaCy's parser).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.llms import LLM
from llama_index.core.schema import Document

from ...core.llm import describe_llm, writes_json
from ...core.nodes import PassageParser
from ...core.text.parallel import available_processes
from ...cue.index import MultiPartiteIndex
from ..registry import BenchContext, BenchSystem, register_method

_ABLATIONS = r"(?P<ablations>(?:-no-(?:sa|ka|qu))*)"
_PRESETS = r"(?:-(?P<preset>paper|tuned-musique))?"

#: Query-time settings of the LLM-free stand-in, by preset (see docs/methods/cue.md).
#: ``default`` was chosen on 2wiki-101 and is reported on musique-100; ``tuned-musique``
#: was chosen on musique-100 and is reported on 2wiki-101. ``paper`` is §4.1's M = 5
#: with the plain cosine scorer and the chunk ranking by R(q, t) alone, units and
#: entities embedded on their own. The two measured presets pool unit and entity
#: vectors from the chunk's own forward pass (``late``: one pass over the text; R@5
#: within the noise of separate vectors on both dev sets, see the CUE-RAG page).
PRESETS: dict[str, dict[str, Any]] = {
    "default": {
        "M": 10,
        "lexical_weight": 0.8,
        "path_weight": 0.25,
        "vectors": "late",
        "long_chunks": "best-window",
    },
    "tuned-musique": {
        "M": 8,
        "lexical_weight": 0.8,
        "path_weight": 0.5,
        "vectors": "late",
        "long_chunks": "best-window",
    },
    "paper": {
        "M": 5,
        "lexical_weight": 0.0,
        "path_weight": 0.0,
        "vectors": "separate",
        "long_chunks": "pooled",
    },
}


def preset_of(ctx: BenchContext) -> dict[str, Any]:
    """The preset a name selects (``cue-0.0`` -> ``default``)."""
    return PRESETS[ctx.options.get("preset") or "default"]


def index_options(ctx: BenchContext) -> dict[str, Any]:
    """The index settings of a name and its ``--set`` options (runner and CLI alike)."""
    preset = preset_of(ctx)
    return {
        "selection": ctx.option("selection", "bleu"),
        "title_entity": ctx.option("title_entity", True),
        "unit_vectors": ctx.option("unit_vectors", preset["vectors"]),
        "entity_vectors": ctx.option("entity_vectors", preset["vectors"]),
        "sentence_splitter": ctx.option("sentence_splitter", "rule"),
        # spaCy in worker processes: the same units, built faster on several cores.
        "nlp_processes": ctx.option("nlp_processes", available_processes()),
    }


def make_retriever(index: MultiPartiteIndex, ctx: BenchContext, llm: LLM | None):
    """Q-Iter with the name's preset, ablations and ``--set`` options (runner and CLI alike)."""
    preset = preset_of(ctx)
    ablations = set(ctx.options.get("ablations", "").split("-no-")) - {""}
    return index.as_retriever(
        top_k=ctx.option("K", 3),
        depth=ctx.option("D", 3),
        beam=ctx.option("M", preset["M"]),
        top_n=ctx.option("top_n", ctx.top_k),
        use_sa="sa" not in ablations,
        use_ka="ka" not in ablations,
        use_qu="qu" not in ablations,
        lexical_weight=ctx.option("lexical_weight", preset["lexical_weight"]),
        path_weight=ctx.option("path_weight", preset["path_weight"]),
        long_chunks=ctx.option("long_chunks", preset["long_chunks"]),
        fill=ctx.option("fill", "dense"),
        query_entities=ctx.option("query_entities", "llm" if writes_json(llm) else "spacy"),
        llm=llm,
    )


def _build(documents: Sequence[Document], ctx: BenchContext, alpha: float) -> BenchSystem:
    ablations = set(ctx.options.get("ablations", "").split("-no-")) - {""}
    preset_name = ctx.options.get("preset") or "default"
    llm = ctx.llm() if alpha > 0 else None
    cache = str(ctx.cache_dir / "cue-units.sqlite") if ctx.cache_dir and alpha > 0 else None
    index = MultiPartiteIndex.from_documents(
        documents,
        transformations=[PassageParser()],
        embed_model=ctx.embed_model,
        llm=llm,
        show_progress=ctx.show_progress,
        alpha=alpha,
        cache_path=cache,
        **index_options(ctx),
    )
    retriever = make_retriever(index, ctx, llm)
    stats = index.stats()
    info = {
        "alpha": alpha,
        "ablations": sorted(ablations),
        "llm": describe_llm(llm),
        "units": stats["units"],
        "entities": stats["entities"],
        "chunks_llm": stats["extraction"].get("chunks_llm", 0),
        "chunks_fallback": stats["extraction"].get("chunks_fallback", 0),
        "llm_index_tokens": stats["extraction"].get("llm_total_tokens", 0),
        "scorer": retriever.scorer.name,
        "preset": preset_name,
        "M": retriever.beam,
        "path_weight": retriever.path_weight,
        "long_chunks": getattr(retriever.scorer, "long_chunks", None),
        "chunk_windows": stats["extraction"].get("chunk_windows", 0),
        "query_entities": retriever.query_entities,
        "vectors": {
            "units": index.extractor.unit_vectors,
            "entities": index.extractor.entity_vectors,
            **{k: v for k, v in stats["extraction"].items() if k.startswith("late_")},
        },
    }
    return BenchSystem(retriever=retriever, info=info, steps=[index.llm_steps, retriever.llm_steps])


@register_method(
    r"cue-0\.0" + _PRESETS + _ABLATIONS,
    "llm-free",
    "CUE-RAG alpha=0: sentence units, spaCy entities, Q-Iter "
    "(presets -paper/-tuned-musique; suffix -no-sa/-no-ka/-no-qu)",
)
def build_cue_free(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    return _build(documents, ctx, 0.0)


@register_method(
    r"cue-(?P<alpha>[0-9.]+)" + _PRESETS + _ABLATIONS,
    "llm",
    "CUE-RAG with LLM units for the alpha token share (BLEU knapsack), Q-Iter",
)
def build_cue(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    alpha = float(ctx.options.get("alpha", "1.0"))
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"cue-<alpha>: alpha must be in [0, 1], got {alpha}")
    return _build(documents, ctx, alpha)
