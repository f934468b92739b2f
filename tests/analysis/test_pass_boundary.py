"""What code outside ``tbdtrace/analysis/passes/`` uses of a pass: its ``run``, its config
dataclass, and the names declared in ``tbdtrace.analysis.passes.EXPORTED``, nothing else.

Read from the source with ``ast``: ``from tbdtrace.analysis.passes.M import X`` uses
``M.X``; ``from tbdtrace.analysis.passes import M`` (``as N``) then ``M.X`` / ``N.X``
uses ``M.X``. The package, the benchmarks, the scripts, the workloads and the examples
are read; tests are not (they test passes' parts directly).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tbdtrace.analysis import passes

ROOT = Path(__file__).resolve().parents[2]
PASSES = "tbdtrace.analysis.passes"
READ = ("tbdtrace", "bench", "scripts", "workloads", "docs/examples")
# The goal (issue: a typed facade) is fewer than 10; the list may only shrink.
CEILING = 9


def _pass_modules() -> set[str]:
    return {p.stem for p in (ROOT / "tbdtrace/analysis/passes").glob("*.py")} - {"__init__"}


def uses(source: str, mods: set[str]) -> set[tuple[str, str]]:
    """(pass module, name) pairs that ``source`` uses."""
    tree = ast.parse(source)
    alias: dict[str, str] = {}
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == PASSES:
            alias |= {a.asname or a.name: a.name for a in node.names if a.name in mods}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PASSES + "."):
            m = (node.module or "").removeprefix(PASSES + ".")
            found |= {(m, a.name) for a in node.names}
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(PASSES + "."):
                    assert a.asname, f"import {a.name} without 'as': use 'from {PASSES} import'"
                    alias[a.asname] = a.name.removeprefix(PASSES + ".")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in alias
        ):
            found.add((alias[node.value.id], node.attr))
    return found


def outside_uses() -> dict[str, set[str]]:
    """``"module.name"`` -> the files outside passes/ that use it (run and configs left out)."""
    mods = _pass_modules()
    out: dict[str, set[str]] = {}
    for top in READ:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("tbdtrace/analysis/passes/"):
                continue
            for m, name in uses(path.read_text(), mods):
                if name == "run" or name.endswith("Config"):
                    continue
                out.setdefault(f"{m}.{name}", set()).add(rel)
    return out


def test_only_declared_helpers_are_used_outside_the_passes() -> None:
    used = outside_uses()
    undeclared = {k: sorted(v) for k, v in used.items() if k not in passes.EXPORTED}
    assert not undeclared, (
        "pass names used outside tbdtrace/analysis/passes/ without a declaration in "
        f"tbdtrace.analysis.passes.EXPORTED (call run with the config, or move them to the "
        f"engine): {undeclared}"
    )
    stale = set(passes.EXPORTED) - set(used)
    assert not stale, f"declared in EXPORTED but used by nobody outside passes/: {stale}"


def test_declared_names_exist_and_the_list_does_not_grow() -> None:
    import importlib

    for key in passes.EXPORTED:
        mod, name = key.split(".")
        assert hasattr(importlib.import_module(f"{PASSES}.{mod}"), name), key
    assert len(passes.EXPORTED) <= CEILING


def test_the_reader_sees_each_form_of_import() -> None:
    src = (
        "from tbdtrace.analysis.passes import steps, ranks as r\n"
        "from tbdtrace.analysis.passes.idle import summarize, IdleConfig\n"
        "import tbdtrace.analysis.passes.memory as mem\n"
        "def f(t):\n"
        "    steps.run(t); steps.by_rank(t); r.per_rank(t); mem.timeline(t)\n"
    )
    assert uses(src, {"steps", "ranks", "idle", "memory"}) == {
        ("steps", "run"),
        ("steps", "by_rank"),
        ("ranks", "per_rank"),
        ("idle", "summarize"),
        ("idle", "IdleConfig"),
        ("memory", "timeline"),
    }
