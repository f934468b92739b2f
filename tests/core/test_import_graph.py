"""No import circle in the whole ``tbdtrace`` package, and every layer imports downward.

The graph is read from the source with ``ast`` (not by importing): an edge A -> B for
every ``import``/``from ... import`` in A that names a module B of the package, at module
level or deferred into a function (a deferred import still ties A to B: it only moves the
cost, and the usual reason to defer one is to hide a circle). Imports under
``if TYPE_CHECKING:`` do not count (they never run). ``from P import x`` names the module
``P.x`` when that is a module (a ``.py`` file or the compiled extension), else ``P``.
Importing ``P.x`` also runs ``P/__init__.py``; those implicit edges are left out, since
every package ``__init__`` here imports its submodules only on attribute use (and such
deferred imports are edges of their own). Imports by computed name (``importlib``) are not
seen: the command table (``cli``), the facade's method table and ``suite.metrics`` use
them, each downward.

There are no known exceptions: the whole graph has no circle. The layers and what each
may import are in docs/ARCHITECTURE.md (DECISIONS 177).

``.venv/bin/python tests/core/test_import_graph.py`` prints the circles and the layer
violations, if any.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "tbdtrace"


def _modules() -> dict[str, Path]:
    """Every module of the package: ``.py`` files and compiled extensions (``_native``)."""
    out = {}
    for path in [*PKG.rglob("*.py"), *PKG.glob("*.so")]:
        parts = list(path.relative_to(PKG.parent).parts)
        parts[-1] = parts[-1].split(".")[0]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in ``body``, nested ones included, except those under an
    ``if TYPE_CHECKING:`` (whose ``else`` branch does count)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found += _imports(node.orelse)
            continue
        for _field, value in ast.iter_fields(node):
            if isinstance(value, list):
                found += _imports([v for v in value if isinstance(v, ast.stmt)])
                # Handlers and match cases hold statements one level down.
                for v in value:
                    if isinstance(v, ast.excepthandler | ast.match_case):
                        found += _imports(v.body)
    return found


def edges(mod: str, source: str, mods: set[str], is_pkg: bool = False) -> set[str]:
    """The modules of ``mods`` that module ``mod`` (its text: ``source``) imports."""
    out: set[str] = set()
    for node in _imports(ast.parse(source).body):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = mod.split(".") if is_pkg else mod.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
            ]
        out |= {t for t in targets if t in mods and t != mod}
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports (deferred imports included)."""
    mods = _modules()
    names = set(mods)
    return {
        m: set()
        if p.suffix == ".so"
        else edges(m, p.read_text(), names, is_pkg=p.name == "__init__.py")
        for m, p in mods.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
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


# Storage: the modules a trace is made of, and the leaves they use.
STORAGE = {
    "tbdtrace.trace",
    "tbdtrace.schema",
    "tbdtrace.tablefile",
    "tbdtrace.meta",
    "tbdtrace.trace_check",
    "tbdtrace.trace_write",
}
BELOW_STORAGE = {
    "tbdtrace.arrow_ints",
    "tbdtrace.errors",
    "tbdtrace.outdir",
    "tbdtrace.safe_text",
    "tbdtrace.version",
    "tbdtrace._pandas_gate",
}
# Layer -> module prefixes it must not import (docs/ARCHITECTURE.md, "Layers").
ABOVE = {
    "tbdtrace.analysis.engine": (
        "tbdtrace.analysis.passes",
        "tbdtrace.analysis.facade",
        "tbdtrace.analysis.sql",
        "tbdtrace.analysis.compare",
        "tbdtrace.report",
        "tbdtrace.export",
        "tbdtrace.suite",
        "tbdtrace.scaleout",
        "tbdtrace.collector",
        "tbdtrace.importers",
        "tbdtrace.commands",
        "tbdtrace.passes",
    ),
    "tbdtrace.analysis.passes": (
        "tbdtrace.analysis.facade",
        "tbdtrace.analysis.sql",
        "tbdtrace.analysis.compare",
        "tbdtrace.report",
        "tbdtrace.export",
        "tbdtrace.suite",
        "tbdtrace.scaleout",
        "tbdtrace.collector",
        "tbdtrace.importers",
        "tbdtrace.commands",
        "tbdtrace.passes",
    ),
    "tbdtrace.collector": (
        "tbdtrace.analysis.passes",
        "tbdtrace.analysis.facade",
        "tbdtrace.report",
        "tbdtrace.commands",
        "tbdtrace.passes",
    ),
    "tbdtrace.importers": (
        "tbdtrace.analysis",
        "tbdtrace.collector",
        "tbdtrace.report",
        "tbdtrace.commands",
        "tbdtrace.passes",
    ),
}


def _under(mod: str, prefix: str) -> bool:
    return mod == prefix or mod.startswith(prefix + ".")


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Edges that climb a layer: storage importing anything but storage and its leaves,
    or a module of a layer in :data:`ABOVE` importing one of its forbidden prefixes."""
    out = []
    for mod, targets in sorted(graph.items()):
        for t in sorted(targets):
            if mod in STORAGE and t not in STORAGE | BELOW_STORAGE:
                out.append(f"{mod} -> {t} (storage imports only storage)")
            for layer, banned in ABOVE.items():
                if _under(mod, layer) and any(_under(t, b) for b in banned):
                    out.append(f"{mod} -> {t} ({layer} must not import it)")
    return out


def test_the_graph_sees_module_level_and_deferred_edges() -> None:
    g = import_graph()
    assert "tbdtrace.schema" in g["tbdtrace.trace"]  # module level
    assert "tbdtrace.outdir" in g["tbdtrace.trace"]  # deferred into write()
    assert "tbdtrace._native" in g["tbdtrace.importers.kineto.tables"]  # the extension
    assert len(g) > 150


def test_type_checking_imports_are_left_out() -> None:
    src = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import p.b\nelse:\n    import p.c\n"
        "def f():\n    import p.d\n"
        "class K:\n    def g(self):\n        try:\n            import p.e\n"
        "        except ImportError:\n            import p.f\n"
    )
    mods = {"p.a", "p.b", "p.c", "p.d", "p.e", "p.f"}
    assert edges("p.a", src, mods) == {"p.c", "p.d", "p.e", "p.f"}


def test_cycle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_in_the_whole_graph() -> None:
    assert cycles(import_graph()) == []


def test_every_layer_imports_downward() -> None:
    assert violations(import_graph()) == []


def test_the_layer_check_sees_a_climb() -> None:
    g = {
        "tbdtrace.trace": {"tbdtrace.report.notebook"},
        "tbdtrace.collector.x": {"tbdtrace.analysis.passes.memory"},
    }
    assert len(violations(g)) == 2


if __name__ == "__main__":
    graph = import_graph()
    for c in cycles(graph):
        print("circle:", " <-> ".join(c))
    for v in violations(graph):
        print("climbs:", v)
