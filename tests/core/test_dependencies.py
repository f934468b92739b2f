"""Every package tbdtrace imports is declared in pyproject.toml, as a dependency or in an
extra (DECISIONS 184): an import that is not declared fails after `pip install .`
with an internal error (issue 32: `export --format chrome` without orjson)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The user's training frameworks: capture uses whichever the workload imports; none is a
# dependency (MXNet 1.9 needs numpy<1.24, which the core's numpy>=2 excludes).
FRAMEWORKS = {"torch", "tensorflow", "mxnet"}
# This repository's own packages: `workloads` (the TBD suite) is run from a checkout by
# `tbdtrace suite` / `capture --workload`, not installed by `pip install .`.
PROJECT = {"tbdtrace", "workloads"}


def imported_top_level() -> dict[str, str]:
    """{top-level module: first file importing it} over tbdtrace/, deferred imports too."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "tbdtrace").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def declared() -> dict[str, str]:
    """{normalized distribution name: where declared} from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {}
    groups = {"dependencies": project["dependencies"]}
    groups.update({f"extra {k}": v for k, v in project["optional-dependencies"].items()})
    for where, reqs in groups.items():
        for req in reqs:
            name = re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0]
            out[_norm(name)] = where
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_package_is_declared() -> None:
    modules = {
        m: f
        for m, f in imported_top_level().items()
        if m not in sys.stdlib_module_names and m not in PROJECT and m not in FRAMEWORKS
    }
    dists = importlib.metadata.packages_distributions()
    have = declared()
    missing = []
    for module, where in sorted(modules.items()):
        owners = {_norm(d) for d in dists.get(module, [])}
        assert owners, f"{module} (imported by {where}) is installed by no distribution here"
        if not owners & have.keys():
            missing.append(f"{module} ({'/'.join(sorted(owners))}, imported by {where})")
    assert not missing, "imported but not declared in pyproject.toml: " + "; ".join(missing)


def test_extras_name_the_pinned_development_versions() -> None:
    # Each declared package is pinned in requirements.txt (the development environment), so
    # the tests run against a version the declaration admits.
    pinned = {
        _norm(line.split("==")[0])
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    unpinned = sorted(set(declared()) - pinned - {"tbdtrace"})
    assert not unpinned, (
        f"declared in pyproject.toml but not pinned in requirements.txt: {unpinned}"
    )
