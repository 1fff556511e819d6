"""Fusion methods in the benchmark runner.

Names (``graphrag-ext bench --methods ...``):

* ``fusion-<mode>:<part>+<part>[+...]``: LlamaIndex's ``QueryFusionRetriever``
  over registered LLM-free methods, each adapted by
  [`PassageRetriever`][llama_index_graphrag_ext.compose.fusion.PassageRetriever].
  ``<mode>`` is ``rrf`` (reciprocal rank), ``rel`` (relative score) or ``dist``
  (distribution-based score); parts are any LLM-free names, patterns included,
  e.g. ``fusion-rrf:qcg-sentences+cue-0.0+bm25``.
* ``fusion-llm-<mode>:<parts>``: the same with parts that need the configured LLM.
* ``fusion-qcg-cue-bm25``: ``fusion-rrf:qcg-sentences+cue-0.0+bm25``.
* ``fusion-best-pair``: ``fusion-rel:cue-0.0+bm25``, the best of the six LLM-free
  pairs measured on musique-100, and ahead of both its parts at R@2 and R@5 on
  2wiki-101 (see the composition page).
* ``shared:<part>``: the LLM-free method ``<part>`` itself, built through the
  same part cache as the fusions, so a run such as
  ``shared:cue-0.0,shared:bm25,fusion-rrf:cue-0.0+bm25`` builds each part once
  and reports it beside the fusion (its recall is the method's own).

Options (``--set key=value``): ``fusion_weights`` (comma-separated, one per part;
``rel``/``dist`` only), ``fusion_scores`` (``minmax``/``rank``/``raw``) and
``fusion_depth`` (results each part contributes; default the runner's top-k).
Other options reach the parts as usual.

**Cost.** The runner builds every method on its own, so a fusion builds its parts
again when they were also run under their own names. Parts are kept for the
rest of the process and shared by every fusion (and every ``shared:`` name) over
the same corpus (:data:`BUILT_PARTS`), so only the first of them that uses a part
pays for it; with ``--embed-cache`` a rebuild does not embed again.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import Document

from ...compose.fusion import fuse_retrievers
from ..registry import REGISTRY, BenchContext, BenchSystem, register_method

logger = logging.getLogger(__name__)

#: Fixed names and the fusion they stand for.
ALIASES = {
    "fusion-qcg-cue-bm25": "fusion-rrf:qcg-sentences+cue-0.0+bm25",
    "fusion-best-pair": "fusion-rel:cue-0.0+bm25",
}
_MODES = {"rrf": "reciprocal_rerank", "rel": "relative_score", "dist": "dist_based_score"}
_OWN_OPTIONS = ("mode", "parts", "part", "fusion_weights", "fusion_scores", "fusion_depth")


def corpus_fingerprint(documents: Sequence[Document]) -> str:
    """A digest of the documents' ids and contents (order included)."""
    digest = hashlib.sha256()
    for doc in documents:
        digest.update(doc.doc_id.encode())
        digest.update(doc.hash.encode())
    return digest.hexdigest()


class BuiltParts:
    """Systems built for fusion methods, reused while the corpus stays the same.

    Keyed by the part's name and options; a different corpus empties it (one
    corpus at a time bounds the memory). Thread-safe.
    """

    def __init__(self) -> None:
        self._corpus: str | None = None
        self._systems: dict[tuple, BenchSystem] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._systems)

    def clear(self) -> None:
        """Forget every built part."""
        with self._lock:
            self._systems.clear()
            self._corpus = None

    def get(
        self, name: str, documents: Sequence[Document], ctx: BenchContext, *, allow_llm: bool
    ) -> tuple[BenchSystem, float]:
        """The built part ``name`` and the seconds building it took now (0 when reused).

        Raises:
            KeyError: ``name`` is not a registered method.
            ValueError: ``name`` needs an LLM and ``allow_llm`` is false.
        """
        spec, captured = REGISTRY.resolve(name)
        if spec.tier != "llm-free" and not allow_llm:
            raise ValueError(
                f"fusion part {name!r} needs an LLM ({spec.tier}); "
                "use fusion-llm-<mode>:... to fuse it"
            )
        options = {k: v for k, v in ctx.options.items() if k not in _OWN_OPTIONS}
        options.update(captured)
        top_k = int(ctx.option("fusion_depth", ctx.top_k))
        key = (name, top_k, tuple(sorted(options.items())))
        fingerprint = corpus_fingerprint(documents)
        with self._lock:
            if fingerprint != self._corpus:
                self._systems.clear()
                self._corpus = fingerprint
            if key in self._systems:
                return self._systems[key], 0.0
            part_ctx = BenchContext(
                embed_model=ctx.embed_model,
                llm_factory=ctx.llm if allow_llm else (lambda: None),
                top_k=top_k,
                options=options,
                cache_dir=ctx.cache_dir,
                show_progress=ctx.show_progress,
            )
            start = time.perf_counter()
            system = spec.build(documents, part_ctx)
            self._systems[key] = system
            return system, time.perf_counter() - start


#: The parts every fusion method of this process shares.
BUILT_PARTS = BuiltParts()


def split_parts(parts: str) -> list[str]:
    """``"a+b+c"`` → ``["a", "b", "c"]`` (at least two, no repeats)."""
    names = [p.strip() for p in parts.split("+") if p.strip()]
    if len(names) < 2:
        raise ValueError(f"a fusion needs two or more parts joined by '+', got {parts!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"fusion parts repeat: {parts!r}")
    return names


def _weights(ctx: BenchContext, count: int) -> list[float] | None:
    raw = str(ctx.option("fusion_weights", "")).strip()
    if not raw:
        return None
    weights = [float(w) for w in raw.split(",")]
    if len(weights) != count:
        raise ValueError(f"fusion_weights has {len(weights)} values for {count} parts")
    return weights


def build_fusion(
    documents: Sequence[Document], ctx: BenchContext, *, allow_llm: bool
) -> BenchSystem:
    """Build (or reuse) the parts named in ``ctx.options['parts']`` and fuse them."""
    mode = _MODES[ctx.options.get("mode", "rrf")]
    names = split_parts(ctx.options["parts"])
    parts: dict[str, Any] = {}
    built: dict[str, float] = {}
    for name in names:
        system, seconds = BUILT_PARTS.get(name, documents, ctx, allow_llm=allow_llm)
        parts[name] = system.retriever
        built[name] = round(seconds, 3)
    retriever = fuse_retrievers(
        parts,
        mode=mode,
        similarity_top_k=ctx.top_k,
        weights=_weights(ctx, len(names)),
        scores=ctx.option("fusion_scores", "minmax"),
    )
    info = {
        "mode": mode,
        "parts": names,
        "part_build_seconds": built,  # 0.0: reused from an earlier fusion in this run
        "scores": ctx.option("fusion_scores", "minmax"),
    }
    return BenchSystem(retriever=retriever, info=info)


@register_method(
    r"fusion-(?P<mode>rrf|rel|dist):(?P<parts>[^:]+)",
    "llm-free",
    "QueryFusionRetriever over LLM-free methods, e.g. fusion-rrf:qcg-sentences+cue-0.0+bm25",
)
def build_fusion_free(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    return build_fusion(documents, ctx, allow_llm=False)


@register_method(
    r"fusion-llm-(?P<mode>rrf|rel|dist):(?P<parts>[^:]+)",
    "llm",
    "QueryFusionRetriever over any methods (parts may use the configured LLM)",
)
def build_fusion_llm(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    return build_fusion(documents, ctx, allow_llm=True)


@register_method(
    r"shared:(?P<part>[^:+]+)",
    "llm-free",
    "An LLM-free method built through the fusions' part cache (built once per run)",
)
def build_shared_part(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    name = ctx.options["part"]
    system, seconds = BUILT_PARTS.get(name, documents, ctx, allow_llm=False)
    info = dict(system.info)
    info["shared_part"] = {"method": name, "build_seconds": round(seconds, 3)}
    return BenchSystem(retriever=system.retriever, answerer=system.answerer, info=info)


def _register_alias(alias: str, target: str) -> None:
    mode, parts = target.removeprefix("fusion-").split(":", 1)

    def build(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
        ctx.options = {**ctx.options, "mode": mode, "parts": parts}
        return build_fusion(documents, ctx, allow_llm=False)

    register_method(alias, "llm-free", f"= {target}")(build)


for _alias, _target in ALIASES.items():
    _register_alias(_alias, _target)
