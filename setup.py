"""Thin setup.py: CMake (CMakeLists.txt) builds tbdtrace._native and libtbdtrace_inject.so.

``python setup.py build_ext --inplace`` (``make native``) puts both next to the package.
Set ``TBDTRACE_CMAKE_ARGS`` for extra CMake options, e.g. ``-DTBDTRACE_CUPTI_FROM_WHEEL=ON``.
``TBDTRACE_COLLECTOR=OFF`` builds the analysis only (the Kineto parser, no CUPTI collector, no
CUDA header or library: a laptop, macOS); ``ON`` requires CUPTI; ``AUTO`` (default) builds the
collector where CUPTI is found (DECISIONS 184).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# cmake and ninja from the environment running setup.py (the venv) come first.
BIN = Path(sys.executable).parent
os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def run(self) -> None:
        # setuptools clears self.inplace while building and copies into the source tree after.
        self._developer_build = bool(self.inplace or getattr(self, "editable_mode", False))
        super().run()

    def build_extension(self, ext: Extension) -> None:
        out_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = ROOT / "build" / "native"
        build_dir.mkdir(parents=True, exist_ok=True)
        args = [
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
            f"-DPython_EXECUTABLE={sys.executable}",
            "-DCMAKE_BUILD_TYPE=Release",
            # tbdtrace._native_testing (test hooks, fake CUPTI): developer builds only.
            f"-DTBDTRACE_TESTING={'ON' if self._developer_build else 'OFF'}",
            f"-DTBDTRACE_COLLECTOR={_collector_switch()}",
            *shlex.split(os.environ.get("TBDTRACE_CMAKE_ARGS", "")),
        ]
        gen = (
            ["-G", "Ninja"] if _has_ninja() and not (build_dir / "CMakeCache.txt").exists() else []
        )
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), *gen, *args], check=True)
        subprocess.run(
            ["cmake", "--build", str(build_dir), "-j", str(os.cpu_count() or 2)], check=True
        )
        self._inject_lib = out_dir / "libtbdtrace_inject.so"
        self._testing_libs = list(out_dir.glob("_native_testing*.so"))

    def copy_extensions_to_source(self) -> None:
        # --inplace copies only the extension module into the package; the injection
        # library goes next to it too.
        super().copy_extensions_to_source()
        lib = getattr(self, "_inject_lib", None)
        if lib is not None and lib.exists():
            shutil.copy2(lib, ROOT / "tbdtrace" / lib.name)
        for t in getattr(self, "_testing_libs", []):
            if t.resolve().parent != (ROOT / "tbdtrace").resolve():
                shutil.copy2(t, ROOT / "tbdtrace" / t.name)


def _collector_switch() -> str:
    value = os.environ.get("TBDTRACE_COLLECTOR", "AUTO").strip().upper() or "AUTO"
    value = {"0": "OFF", "1": "ON", "FALSE": "OFF", "TRUE": "ON"}.get(value, value)
    if value not in ("AUTO", "ON", "OFF"):
        sys.exit(f"setup.py: TBDTRACE_COLLECTOR must be AUTO, ON or OFF, not {value!r}")
    return value


def _has_ninja() -> bool:
    try:
        subprocess.run(["ninja", "--version"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


setup(ext_modules=[CMakeExtension("tbdtrace._native")], cmdclass={"build_ext": CMakeBuild})
