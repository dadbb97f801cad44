"""Reads a package's imports (``ast``, nothing is executed) and reports the ones that run against a
layer order, and the import cycles, function-level imports included. docs/ARCHITECTURE.md explains
the order that ``SESSIONS_APP_LAYERS`` writes down."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

# Highest first. A module may import modules of its own layer and of every layer below it.
SESSIONS_APP_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "interface",
        (
            "sessions_app.api",
            "sessions_app.web",
            "sessions_app.management",
            "sessions_app.admin",
            "sessions_app.middleware",
            "sessions_app.apps",
        ),
    ),
    ("tasks", ("sessions_app.tasks", "sessions_app.steps")),
    ("services", ("sessions_app.services",)),
    ("selectors", ("sessions_app.selectors",)),
    ("models", ("sessions_app.models", "sessions_app.migrations")),
    ("bindings", ("sessions_app.engine", "sessions_app.errors", "sessions_app")),
    ("engine", ("compaction",)),
)


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported}"


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (a directory under ``root``) by dotted name."""
    found = {}
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(root: Path, package: str) -> Iterator[Import]:
    """Every import in the package's modules that names a module of the package or of another
    package of the layer order, resolved to the module it loads."""
    known = modules(root, package)
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(name, alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(name, is_package, node.module, node.level)
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    # ``from pkg import module`` loads the module; ``from module import name`` the module.
                    yield Import(name, candidate if candidate in known else base, node.lineno)


def _absolute(importer: str, is_package: bool, module: str | None, level: int) -> str:
    if not level:
        return module or ""
    parts = importer.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def layer_of(module: str, layers: Sequence[tuple[str, Sequence[str]]]) -> int | None:
    """The index of the layer whose prefix matches ``module`` most closely (0 is the highest)."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def violations(root: Path, package: str, layers: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """Imports from a lower layer up to a higher one, and modules in no layer at all."""
    found = []
    for each in imports(root, package):
        mine = layer_of(each.importer, layers)
        theirs = layer_of(each.imported, layers)
        if mine is None:
            found.append(f"{each.importer} is in no layer")
        elif theirs is not None and theirs < mine:
            found.append(f"{each} — {layers[mine][0]} must not import {layers[theirs][0]}")
    return sorted(set(found))


def cycles(root: Path, package: str) -> list[list[str]]:
    """The package's import cycles (its strongly connected components of more than one module, or a
    module importing itself), each as a sorted list of module names."""
    known = modules(root, package)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for each in imports(root, package):
        if each.imported in known:
            graph[each.importer].add(each.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the package is small enough to recurse
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return sorted(found)
