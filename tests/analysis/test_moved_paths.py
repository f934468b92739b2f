"""Moved public paths keep working: every ``tbdtrace.*`` path named in README.md and
docs/API.md imports, and the old ``tbdtrace.passes.<name>`` modules are the moved ones
(the same objects, so a config class from either path is one class)."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _resolve(dotted: str) -> Any:
    """The object a dotted path names: the longest importable module prefix, then
    attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


def _named_paths() -> list[str]:
    found = set()
    for doc in ("README.md", "docs/API.md"):
        text = (ROOT / doc).read_text()
        for m in re.finditer(r"\btbdtrace(?:\.[A-Za-z_]\w*)+", text):
            path = m.group(0)
            if path.endswith((".py", ".md", ".json", ".gz", ".trace")):
                continue
            found.add(path)
        # ``from tbdtrace.x import y`` in the code examples names tbdtrace.x.y
        for m in re.finditer(r"from (tbdtrace[\w.]*) import (\w+)", text):
            found.add(f"{m.group(1)}.{m.group(2)}")
    return sorted(found)


def test_the_docs_name_paths() -> None:
    paths = _named_paths()
    assert "tbdtrace.analyze" in paths and "tbdtrace.report.notebook" in paths
    assert any(p.startswith("tbdtrace.analysis.passes.") for p in paths)


@pytest.mark.parametrize("path", _named_paths())
def test_every_path_the_docs_name_imports(path: str) -> None:
    assert _resolve(path) is not None


def test_top_level_entry_points() -> None:
    import tbdtrace
    from tbdtrace.analysis.facade import analyze
    from tbdtrace.report import notebook
    from tbdtrace.trace import open as open_trace

    assert tbdtrace.analyze is analyze and tbdtrace.open is open_trace
    assert callable(notebook.plots) and callable(notebook.trace_html)


def test_old_pass_paths_are_the_moved_modules() -> None:
    import tbdtrace.passes as old

    for name, new in old.MOVED.items():
        mod = sys.modules[f"tbdtrace.passes.{name}"]
        assert isinstance(mod, ModuleType)
        assert mod is importlib.import_module(new) is getattr(old, name), name
    from tbdtrace.passes.steps import StepsConfig as OldStepsConfig
    from tbdtrace.passes.window import WindowSpec as OldWindowSpec

    from tbdtrace.analysis.engine.window import WindowSpec
    from tbdtrace.analysis.passes.steps import StepsConfig

    assert OldStepsConfig is StepsConfig and OldWindowSpec is WindowSpec


def test_nothing_in_the_package_imports_the_old_paths() -> None:
    for path in (ROOT / "tbdtrace").rglob("*.py"):
        if path.parent.name == "passes" and path.parent.parent.name == "tbdtrace":
            continue
        text = path.read_text()
        assert not re.search(r"^\s*(from|import) tbdtrace\.passes\b", text, re.M), path
