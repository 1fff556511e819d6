"""Package attributes imported on first use (PEP 562).

A package ``__init__`` that re-exports its modules' names would import them all,
and with them LlamaIndex's model stack, torch and spaCy, whenever any one of its
modules is imported: ``graphrag-ext --help`` then took seconds. The packages
declare what they export instead, and each name is imported when first read.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps each public
    name to the relative module defining it (``".graph"``)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # imported once
        return value

    def __dir__() -> list[str]:
        return sorted({*exports, *vars(sys.modules[package])})

    return __getattr__, __dir__
