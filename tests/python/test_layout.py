"""The front end's layout: no module of the ``sluice`` package imports, directly or through
others, a module that imports it back (issue 26). Imports inside functions count too: a
cycle broken only by importing late is still a cycle of the design."""

from __future__ import annotations

import ast
from pathlib import Path

import sluice

ROOT = Path(sluice.__file__).resolve().parent


def _module(path: Path) -> str:
    parts = ["sluice", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in ROOT.rglob("*.py")}
    # The Rust extension (`from . import _core`) is a module, not its package's __init__.
    native = {f"sluice.{p.name.split('.')[0]}" for p in ROOT.glob("*.so")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    src = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    src = node.module or ""
                # `from X import name`: the submodule X.name if there is one, else X.
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in files.keys() | native else src
                           for a in node.names]  # fmt: skip
            else:
                continue
            graph[mod] |= {t for t in targets if t in files and t != mod}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_front_end_has_no_import_cycle():
    graph = _graph()
    # The graph is read, not empty: the CLI reaches its command groups and the run.
    assert {"sluice.cli.run", "sluice.cli.options"} <= graph["sluice.cli"] | graph["sluice.cli.run"]
    assert "sluice.run" in graph["sluice.pool"]
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(g) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
