"""The package's layout: no import cycles, test tools not installed, one spec per method."""

from __future__ import annotations

import ast
from pathlib import Path

import llama_index_graphrag_ext

PACKAGE = Path(llama_index_graphrag_ext.__file__).parent
NAME = PACKAGE.name


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Package modules ``name`` imports, anywhere in it (functions and type-checking blocks too).

    ``from . import x`` imports the module ``x``; importing ``a.b.c`` also runs
    ``a`` and ``a.b``, but those edges are the language's, not the layout's.
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in modules]
            found.update(subs or [module])
    return {m for m in found if m in modules and m != name}


def test_no_module_imports_a_module_that_imports_it():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    cycles, done = [], set()

    def visit(node: str, stack: list[str]) -> None:
        if node in stack:
            cycles.append(stack[stack.index(node) :] + [node])
            return
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, [*stack, node])
        done.add(node)

    for name in sorted(graph):
        visit(name, [])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_test_tools_are_not_installed():
    assert not (PACKAGE / "testing").exists()
    assert not any(p.name.startswith("scripted") for p in PACKAGE.rglob("*.py"))
