"""Every method of the suite by the name a user types: the one list the runner, the CLI
and the server read (each method's own description is its folder's ``spec.py``)."""

from __future__ import annotations

import importlib

from .core.config import ConfigError
from .core.spec import MethodSpec

#: Where each spec lives, in the order ``graphrag-ext bench --list`` shows them.
_SPEC_PATHS = (
    "baselines.spec:DENSE",
    "baselines.spec:BM25",
    "baselines.spec:HYBRID",
    "qcg.spec:SPEC",
    "cue.spec:SPEC",
    "chainrag.spec:SPEC",
    "fgrag.spec:SPEC",
    "lprag.spec:SPEC",
)


def _load() -> dict[str, MethodSpec]:
    specs = {}
    for path in _SPEC_PATHS:
        module, _, name = path.partition(":")
        try:
            spec = getattr(importlib.import_module(f"{__package__}.{module}"), name)
        except ModuleNotFoundError as exc:  # TEMPORARY while the methods move to specs
            if exc.name != f"{__package__}.{module}":
                raise
            continue
        specs[spec.name] = spec
    return specs


#: Name -> spec.
SPECS: dict[str, MethodSpec] = _load()

#: Names of earlier releases, and what names them now (for the error message only).
RENAMED = {
    "qcg-sentences": "qcg",
    "qcg-sentences-tuned-musique": "qcg:more-nodes",
    "dense-sentences": "dense:sentences",
    "cue-0.0": "cue",
    "cue-0.0-tuned-musique": "cue:path-weighted",
    "cue-0.0-paper": "cue:paper/alpha=0/query_entities=spacy/title_entity=true/fill=dense",
    "cue-0.0-no-sa": "cue/use_sa=false",
    "cue-0.0-no-ka": "cue/use_ka=false",
    "cue-0.0-no-qu": "cue/use_qu=false",
    "cue-1.0": "cue:paper",
    "cue-0.5": "cue:paper/alpha=0.5",
    "chainrag-retriever": "chainrag",
    "chainrag-retriever-no-ec": "chainrag/follow_ec=false",
    "chainrag-retriever-no-ss": "chainrag/follow_ss=false",
    "chainrag-retriever-no-sa": "chainrag/follow_sa=false",
    "lprag-pseudo": "lprag:pseudo",
    "lprag-pseudo-titles": "lprag",
    "lprag-pseudo-titles-tuned-musique": "lprag:short-training",
    "fgrag-llm": "fgrag:paper/fill=similarity",
}


def get_spec(name: str) -> MethodSpec:
    """The spec of method ``name`` (an error naming the known ones otherwise)."""
    if name in SPECS:
        return SPECS[name]
    hint = f" (now {RENAMED[name]})" if name in RENAMED else ""
    raise ConfigError(
        f"unknown method {name!r}{hint}; methods: {', '.join(SPECS)} "
        "(`graphrag-ext bench --list` shows their presets and settings)"
    )
