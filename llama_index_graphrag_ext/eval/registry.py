"""How a run's method names become built systems: a spec's name or a fusion of them.

A name is ``NAME[:PRESET][/FIELD=VALUE...]`` (:mod:`..core.spec`), built by
:mod:`.systems`, or a fusion of such names (:mod:`.fusion`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.config import ConfigError, MethodConfig
from ..core.spec import MethodSpec, parse_method_name
from ..specs import SPECS, get_spec
from .fusion import FUSION_HELP, FUSION_OPTIONS, build_fusion, fusion_tier, is_fusion, part_names
from .systems import BenchContext, BenchSystem, build_spec_system, spec_config

if TYPE_CHECKING:
    from llama_index.core.schema import Document

__all__ = [
    "BenchContext",
    "BenchSystem",
    "Resolved",
    "build_system",
    "check_options",
    "describe_methods",
    "resolve",
]


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
    if is_fusion(name):
        return Resolved(name, fusion_tier(name, options))
    spec, config = spec_config(name, options)
    return Resolved(name, spec.tier(config), spec, config)


def check_options(names: Sequence[str], options: Mapping[str, Any]) -> None:
    """Every ``--set`` field belongs to at least one method of the run (typos fail fast)."""
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
    if is_fusion(name):
        return build_fusion(name, documents, ctx)
    resolved = resolve(name, ctx.options)
    return build_spec_system(resolved.spec, resolved.config, documents, ctx)


def describe_methods() -> str:
    """``graphrag-ext bench --list``: each method, its presets and its settings, as typed."""
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
