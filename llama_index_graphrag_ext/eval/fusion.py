"""Fusions of several methods in one run (LlamaIndex's ``QueryFusionRetriever``).

Names:

* ``fusion-<mode>:<part>+<part>[+...]``: the parts' retrievers fused, ``<mode>``
  ``rrf`` (reciprocal rank), ``rel`` (relative score) or ``dist`` (distribution-based
  score); parts are LLM-free method names, e.g. ``fusion-rrf:qcg+cue+bm25``.
* ``fusion-llm-<mode>:<parts>``: the same with parts that need the configured LLM.
* ``shared:<part>``: the method ``<part>`` itself, built through the parts' cache,
  so a run such as ``shared:cue,shared:bm25,fusion-rrf:cue+bm25`` builds each part
  once and reports it beside the fusion.
* :data:`ALIASES`: fixed names for the fusions the composition page reports.

Options (``--set``): ``fusion_weights`` (one per part; ``rel``/``dist``),
``fusion_scores`` (``minmax``/``rank``/``raw``), ``fusion_depth`` (results each part
contributes; default: the run's top-k). Parts are kept for the rest of the
process (:data:`BUILT_PARTS`), so only the first fusion that uses a part pays for it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..core.config import ConfigError
from .systems import BenchContext, BenchSystem, build_spec_system, spec_config

if TYPE_CHECKING:
    from llama_index.core.schema import Document

#: Fixed names and the fusion each stands for.
ALIASES = {
    "fusion-qcg-cue-bm25": "fusion-rrf:qcg+cue+bm25",
    "fusion-best-pair": "fusion-rel:cue+bm25",
}
FUSION_OPTIONS = ("fusion_weights", "fusion_scores", "fusion_depth")
_MODES = {"rrf": "reciprocal_rerank", "rel": "relative_score", "dist": "dist_based_score"}
FUSION_HELP = (
    "fusion-<rrf|rel|dist>:<part>+<part>...  QueryFusionRetriever over LLM-free methods "
    "(fusion-llm-<mode>:... allows LLM parts); shared:<part> builds a part once per run; "
    f"aliases: {', '.join(f'{k} = {v}' for k, v in ALIASES.items())}; "
    "--set fusion_weights=, fusion_scores=minmax|rank|raw, fusion_depth="
)


def is_fusion(name: str) -> bool:
    """True for a fusion, ``shared:`` or alias name."""
    return name in ALIASES or name.startswith(("fusion-", "shared:"))


def _parse(name: str) -> tuple[str | None, bool, list[str]]:
    """``(mode, allow_llm, parts)``; mode ``None`` for ``shared:``."""
    name = ALIASES.get(name, name)
    head, sep, rest = name.partition(":")
    if not sep or not rest:
        raise ConfigError(f"{name}: expected fusion-<mode>:<part>+<part> or shared:<part>")
    if head == "shared":
        return None, False, [rest]
    allow_llm = head.startswith("fusion-llm-")
    mode = head.removeprefix("fusion-llm-" if allow_llm else "fusion-")
    if mode not in _MODES:
        raise ConfigError(f"{name}: unknown fusion mode {mode!r}; modes: {', '.join(_MODES)}")
    parts = [p.strip() for p in rest.split("+") if p.strip()]
    if len(parts) < 2:
        raise ConfigError(f"{name}: a fusion needs two or more parts joined by '+'")
    if len(set(parts)) != len(parts):
        raise ConfigError(f"{name}: fusion parts repeat")
    return mode, allow_llm, parts


def part_names(name: str) -> list[str]:
    """The method names a fusion (or ``shared:``) name is made of."""
    return _parse(name)[2]


def fusion_tier(name: str, options: Mapping[str, Any] | None) -> str:
    """The fusion's tier; an LLM part outside ``fusion-llm-`` is an error."""
    _, allow_llm, parts = _parse(name)
    tiers = {part: _tier(part, options) for part in parts}
    needs = [p for p, t in tiers.items() if t != "llm-free"]
    if needs and not allow_llm:
        raise ConfigError(
            f"fusion parts {needs} need an LLM; use fusion-llm-<mode>:... to fuse them"
        )
    return "llm" if needs else "llm-free"


def _tier(part: str, options: Mapping[str, Any] | None) -> str:
    spec, config = spec_config(part, options)
    return spec.tier(config)


def corpus_fingerprint(documents: Sequence[Document]) -> str:
    """A digest of the documents' ids and contents (order included)."""
    digest = hashlib.sha256()
    for doc in documents:
        digest.update(doc.doc_id.encode())
        digest.update(doc.hash.encode())
    return digest.hexdigest()


class BuiltParts:
    """Parts built for fusions, reused while the corpus stays the same (thread-safe).

    Keyed by the part's name, options and depth; a different corpus empties it
    (one corpus at a time bounds the memory).
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
        self, name: str, documents: Sequence[Document], ctx: BenchContext
    ) -> tuple[BenchSystem, float]:
        """The built part ``name`` and the seconds building it took now (0 when reused)."""
        options = {k: v for k, v in ctx.options.items() if k not in FUSION_OPTIONS}
        depth = int(ctx.options.get("fusion_depth") or ctx.top_k)
        spec, config = spec_config(name, options)
        key = (name, depth, tuple(sorted(options.items())))
        fingerprint = corpus_fingerprint(documents)
        with self._lock:
            if fingerprint != self._corpus:
                self._systems.clear()
                self._corpus = fingerprint
            if key in self._systems:
                return self._systems[key], 0.0
            part_ctx = BenchContext(
                embed_model=ctx.embed_model,
                llm_factory=ctx.llm,
                top_k=depth,
                options=options,
                cache_dir=ctx.cache_dir,
                show_progress=ctx.show_progress,
            )
            start = time.perf_counter()
            system = build_spec_system(spec, config, documents, part_ctx)
            self._systems[key] = system
            return system, time.perf_counter() - start


#: The parts every fusion of this process shares.
BUILT_PARTS = BuiltParts()


def build_fusion(name: str, documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    """Build (or reuse) a fusion's parts and fuse them; ``shared:<part>`` is the part itself."""
    mode, _, parts = _parse(name)
    fusion_tier(name, {k: v for k, v in ctx.options.items() if k not in FUSION_OPTIONS})
    built = {part: BUILT_PARTS.get(part, documents, ctx) for part in parts}
    if mode is None:
        system, seconds = built[parts[0]]
        info = {**system.info, "shared_part": {"method": parts[0], "seconds": round(seconds, 3)}}
        return BenchSystem(system.retriever, system.answerer, info, system.steps, system.index)
    raw = str(ctx.options.get("fusion_weights") or "").strip()
    weights = [float(w) for w in raw.split(",")] if raw else None
    if weights is not None and len(weights) != len(parts):
        raise ConfigError(f"fusion_weights has {len(weights)} values for {len(parts)} parts")
    scores = ctx.options.get("fusion_scores") or "minmax"
    from ..compose.fusion import fuse_retrievers

    retriever = fuse_retrievers(
        {part: system.retriever for part, (system, _) in built.items()},
        mode=_MODES[mode],
        similarity_top_k=ctx.top_k,
        weights=weights,
        scores=scores,
    )
    info = {
        "mode": _MODES[mode],
        "parts": parts,
        "part_build_seconds": {p: round(s, 3) for p, (_, s) in built.items()},
        "scores": scores,
    }
    return BenchSystem(retriever=retriever, info=info)
