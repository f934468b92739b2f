"""The analysis-only install (issue 32 item 7, DECISIONS 184): `TBDTRACE_COLLECTOR=OFF
pip install .` in a fresh environment builds the Kineto parser without the CUPTI collector and
without any CUDA header or library, and `tbdtrace report` then reads a real trace exactly as
the development build does; `capture --backend cupti` says in one line why it cannot run.

Slow (a C++ build of the Kineto parser and the pybind11 module, 1-4 minutes on two busy
cores): marked `heavy`, so `make test-quick` leaves it out. The fresh environment has no pip
of its own: a path file lends it the development venv's packages (pip, cmake, ninja,
pybind11, pyarrow, ...) and `--no-index --no-deps --no-build-isolation` keeps pip off the
network; the tbdtrace it imports is the one it built (checked).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import fixture

pytestmark = [pytest.mark.heavy, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = "kineto/tracelens/gaunernst_bert-small-uncased__1016001.json.gz"


def _copy_source(dst: Path) -> None:
    """What `pip install .` reads from a checkout: no built module, no build folder."""
    skip = shutil.ignore_patterns("*.so", "__pycache__", "*.pyc", "build", "*.egg-info")
    for name in ("CMakeLists.txt", "setup.py", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dst / name)
    for name in ("csrc", "tbdtrace"):
        shutil.copytree(ROOT / name, dst / name, ignore=skip)


@pytest.fixture(scope="module")
def analysis_only(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("analysis-only")
    src, venv = base / "src", base / "venv"
    src.mkdir()
    _copy_source(src)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    vpy = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
    )
    # Plain path lines: the development venv's own .pth files (its editable tbdtrace) are
    # not processed, so `import tbdtrace` finds only what this environment installs.
    (purelib / "dev-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = _env_without_cuda(venv)
    env["TBDTRACE_COLLECTOR"] = "OFF"
    r = subprocess.run(
        [str(vpy), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
         "--no-build-isolation", "--ignore-installed", "--disable-pip-version-check", str(src)],
        env=env, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return {"venv": venv, "src": src, "purelib": purelib, "base": base}


def _env_without_cuda(venv: Path) -> dict[str, str]:
    """No CUDA on PATH or in CUDA_* variables; the development venv's tools (cmake, ninja)
    after the fresh environment's own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CUDA", "TBDTRACE_", "PYTHON")) and k not in ("LD_LIBRARY_PATH",)
    }
    path = [str(venv / "bin"), str(Path(sys.executable).parent)]
    path += [p for p in os.environ.get("PATH", "").split(os.pathsep) if "cuda" not in p.lower()]
    env["PATH"] = os.pathsep.join(path)
    return env


def test_build_uses_no_cuda_header_or_library(analysis_only: dict[str, Path]) -> None:
    build = analysis_only["src"] / "build" / "native"
    cache = (build / "CMakeCache.txt").read_text()
    assert "TBDTRACE_COLLECTOR:STRING=OFF" in cache
    # Every header every object file was compiled against, as the compiler reported it
    # (ninja's dependency log; make's depend.make where ninja is absent).
    ninja = shutil.which("ninja", path=str(Path(sys.executable).parent)) or shutil.which("ninja")
    assert ninja is not None and (build / "build.ninja").exists(), "expected a Ninja build"
    deps = subprocess.run(
        [ninja, "-C", str(build), "-t", "deps"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
    headers = [ln.strip() for ln in deps.splitlines() if ln.startswith(" ")]
    assert any(h.endswith("kineto/parser.h") for h in headers), "the dependency log is empty"
    cuda = [h for h in headers if "cuda" in h.lower() or "cupti" in h.lower() or "/nvidia/" in h]
    assert not cuda, f"the analysis-only build read CUDA headers: {cuda[:5]}"
    objects = [ln.split(":")[0] for ln in deps.splitlines() if ln and not ln.startswith(" ")]
    assert not [o for o in objects if any(c in o for c in ("collector", "cupti", "inject"))]
    installed = analysis_only["purelib"] / "tbdtrace"
    assert not list(installed.glob("libtbdtrace_inject*")), "the injection library was built"
    (module,) = installed.glob("_native*.so")
    needed = subprocess.run(
        ["readelf", "-d", str(module)], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    assert "(NEEDED)" in needed
    assert "cupti" not in needed and "cuda" not in needed.lower(), needed


def _tbdtrace(analysis_only: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    venv = analysis_only["venv"]
    return subprocess.run(
        [str(venv / "bin" / "tbdtrace"), *args],
        cwd=analysis_only["base"], env=_env_without_cuda(venv),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_report_matches_the_development_build(analysis_only: dict[str, Path]) -> None:
    trace = fixture(FIXTURE)
    venv = analysis_only["venv"]
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import tbdtrace, tbdtrace._native as n; print(tbdtrace.__file__, n.has_collector)"],
        cwd=analysis_only["base"], env=_env_without_cuda(venv),
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout.split()  # fmt: skip
    assert Path(where[0]).is_relative_to(analysis_only["purelib"]), where
    assert where[1] == "False"
    got = _tbdtrace(analysis_only, "report", "--format", "json", str(trace))
    assert got.returncode == 0, got.stderr
    dev = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "report", "--format", "json", str(trace)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert dev.returncode == 0, dev.stderr
    report = json.loads(got.stdout)
    assert report == json.loads(dev.stdout)
    assert report, "empty report"


def test_capture_with_cupti_says_why_in_one_line(analysis_only: dict[str, Path]) -> None:
    out = analysis_only["base"] / "capture-out"
    r = _tbdtrace(analysis_only, "capture", "--backend", "cupti", "--out", str(out), "--", "true")
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "without the CUPTI collector" in lines[0] and "Traceback" not in r.stderr
