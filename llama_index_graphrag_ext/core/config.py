"""Method configurations: one pydantic model per method, in sections, with named presets.

Each method folder holds its configuration (``qcg/config.py`` and so on): a
:class:`MethodConfig` whose sections group what a reader of the paper looks for
(building the graph, retrieval, LLM steps, training). Its fields carry the
paper's symbols where the paper has one, and the paper section in their
description; the class defaults are the paper's settings. Field names are
unique across a config's sections, so one flat name sets a field anywhere:
``--set gamma=1.5`` on the command line, ``config.updated(gamma=1.5)`` in Python.

Presets are named by what they are. ``paper`` is the paper's own setting and
``default`` the measured one; each preset's text says where it was chosen and
where it was reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError


class Section(BaseModel):
    """One group of a method's settings (a pydantic model: validated, documented fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Preset:
    """Named settings: flat field values over a base preset (``None``: the paper's defaults).

    Attributes:
        doc: What the preset is, where it was chosen and where it is reported.
        values: Field name -> value.
        base: The preset these values change (``None``: the class defaults).
    """

    doc: str
    values: Mapping[str, Any] = field(default_factory=dict)
    base: str | None = None


def top_k_of(value: Any, default: int | None = None) -> int | None:
    """``similarity_top_k`` as every retriever reads it: the number of passages returned.

    ``None`` is ``default``; an integral float or a numeric string is read as its
    integer (as LlamaIndex's pydantic settings would); anything else, or less than 1,
    is a ``ValueError`` with one message for every method.
    """
    if value is None:
        return default
    number = value
    if (
        isinstance(value, str)
        and value.strip().isdigit()
        or isinstance(value, float)
        and value.is_integer()
    ):
        number = int(value)
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"similarity_top_k must be a whole number >= 1, got {value!r}")
    return number


class ConfigError(ValueError):
    """A preset or setting a method does not have, or a value it does not accept."""


class MethodConfig(BaseModel):
    """A method's settings (subclass it: sections as fields, presets in :attr:`presets`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Preset name -> :class:`Preset`; every method has ``paper`` and ``default``.
    presets: ClassVar[dict[str, Preset]] = {"default": Preset("No settings of its own.")}
    #: What an index built with no ``config=`` uses.
    default_preset: ClassVar[str] = "default"
    #: The sections a retriever or engine may change (the others fix what the index built).
    query_sections: ClassVar[tuple[str, ...]] = ("retrieval", "llm")

    _origin: str = PrivateAttr(default="")

    def __eq__(self, other: object) -> bool:
        """Equal settings (where a config came from does not count)."""
        return type(other) is type(self) and self.model_dump() == other.model_dump()

    def __hash__(self) -> int:
        return hash(repr(self.model_dump()))

    # ------------------------------------------------------------------ fields

    @classmethod
    def sections(cls) -> dict[str, type[Section]]:
        """Section name -> its model."""
        return {
            name: info.annotation
            for name, info in cls.model_fields.items()
            if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
        }

    @classmethod
    def field_sections(cls) -> dict[str, str]:
        """Flat field name -> the section holding it (names are unique across sections)."""
        out: dict[str, str] = {}
        for section, model in cls.sections().items():
            for name in model.model_fields:
                if name in out:
                    raise TypeError(f"{cls.__name__}: field {name!r} is in two sections")
                out[name] = section
        return out

    def flat(self) -> dict[str, Any]:
        """Every field by its flat name (JSON-ready values)."""
        dumped = self.model_dump(mode="json")
        return {name: dumped[section][name] for name, section in self.field_sections().items()}

    # ------------------------------------------------------------------ presets

    @classmethod
    def preset(cls, name: str) -> MethodConfig:
        """The preset ``name`` as a config."""
        if name not in cls.presets:
            raise ConfigError(
                f"{cls.__name__} has no preset {name!r}; presets: {', '.join(cls.presets)}"
            )
        chain, seen = [], set()
        at: str | None = name
        while at is not None:
            if at in seen:
                raise TypeError(f"{cls.__name__}: presets {sorted(seen)} form a cycle")
            seen.add(at)
            chain.append(cls.presets[at])
            at = cls.presets[at].base
        values: dict[str, Any] = {}
        for preset in reversed(chain):
            values.update(preset.values)
        config = cls().updated(values)
        config._origin = name
        return config

    @classmethod
    def resolve(
        cls, config: str | MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> MethodConfig:
        """A config from a preset name, a config, a (nested or flat) mapping, or ``None``.

        ``None`` is :attr:`default_preset`. ``overrides`` are flat field values.
        """
        if config is None:
            config = cls.default_preset
        if isinstance(config, str):
            base = cls.preset(config)
        elif isinstance(config, cls):
            base = config
        elif isinstance(config, MethodConfig):
            raise ConfigError(f"expected a {cls.__name__}, got a {type(config).__name__}")
        elif isinstance(config, Mapping):
            nested = set(config) <= set(cls.sections())
            base = cls._validate(dict(config)) if nested else cls().updated(config)
            base._origin = "custom"
        else:
            raise ConfigError(f"config must be a preset name or a {cls.__name__}, got {config!r}")
        return base.updated(overrides) if overrides else base

    def updated(self, values: Mapping[str, Any] | None = None, /, **more: Any) -> MethodConfig:
        """A copy with flat fields set (values validated; strings are converted)."""
        values = {**(values or {}), **more}
        if not values:
            return self
        where = self.field_sections()
        unknown = sorted(set(values) - set(where))
        if unknown:
            raise ConfigError(
                f"{type(self).__name__} has no setting {', '.join(map(repr, unknown))}; "
                f"settings: {', '.join(sorted(where))}"
            )
        data = self.model_dump()
        for name, value in values.items():
            data[where[name]][name] = value
        try:
            config = type(self).model_validate(data)
        except ValidationError as exc:
            # ``none`` on the command line: None for an optional setting, unless
            # "none" is one of the setting's own values (and then it validated).
            failed = {e["loc"][1] for e in exc.errors() if len(e["loc"]) > 1}
            for name in failed & set(values):
                if isinstance(values[name], str) and values[name].lower() in ("none", "null"):
                    data[where[name]][name] = None
            config = self._validate(data)
        changes = ", ".join(f"{k}={v}" for k, v in values.items())
        config._origin = f"{self._origin} + {changes}" if self._origin else changes
        return config

    def at_query_time(self, overrides: Mapping[str, Any], *sections: str) -> MethodConfig:
        """A copy with ``overrides`` of query-time fields: those of ``sections`` (default:
        :attr:`query_sections`). A field of the index's own sections is an error: a
        retriever cannot change the graph its index built."""
        allowed = sections or self.query_sections
        where = self.field_sections()
        built = sorted(k for k in overrides if k in where and where[k] not in allowed)
        if built:
            raise ConfigError(
                f"{', '.join(built)}: a setting of the index, given when it is built "
                "(config= or by name), not per retriever or engine"
            )
        return self.updated(overrides)

    @classmethod
    def _validate(cls, data: dict[str, Any]) -> MethodConfig:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'][-1:]))}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"{cls.__name__}: {problems}") from None

    @property
    def origin(self) -> str:
        """The preset this config came from and what was changed, e.g. ``default + gamma=1.5``."""
        return self._origin or "custom"

    # ------------------------------------------------------------------ tiers

    @property
    def uses_llm(self) -> bool:
        """True when indexing or retrieving with this config calls an LLM (its tier is then
        ``llm``); answering always may. Each method says."""
        return False

    def describe(self) -> dict[str, Any]:
        """What a report or ``info`` shows: the preset, what differs from it, every setting."""
        return {"config": self.origin, "settings": self.flat()}
