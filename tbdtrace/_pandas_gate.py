"""Keep pandas out of the analysis commands' processes until something asks for it.

pyarrow imports pandas the first time it builds or converts almost any array, only to
recognize pandas inputs and outputs (pandas 3.1 takes ~0.13 s and ~35 MB to import: a
fifth of the time of ``report`` on a 54 MB profiler file). tbdtrace's analysis works on
Arrow and numpy alone, so the analysis commands (``report``, ``hotspots``, ``info``,
``import``, ``diff``) run with :func:`close` in effect: ``import pandas`` fails, and
pyarrow, which treats pandas as optional, carries on without it. Code that does want
pandas (``Trace.df``) calls :func:`open_` first; pyarrow's lazy pandas shim retries the
import when pandas is asked for, so its conversions then work as usual.
"""

from __future__ import annotations

import sys

_gate: _NoPandas | None = None


class _NoPandas:
    """A meta-path finder that refuses pandas and its submodules."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def close() -> None:
    """Refuse ``import pandas`` in this process (no effect when pandas is loaded)."""
    global _gate
    if _gate is None and "pandas" not in sys.modules:
        _gate = _NoPandas()
        sys.meta_path.insert(0, _gate)


def open_() -> None:
    """Allow pandas again (call before any pandas use). Where pandas is not installed (an
    install without the ``pandas`` extra), ImportError with the one line that says how."""
    global _gate
    if _gate is not None:
        if _gate in sys.meta_path:
            sys.meta_path.remove(_gate)
        _gate = None


def require() -> None:
    """Open the gate and check pandas is installed: ImportError naming the extra if not."""
    open_()
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise ImportError(
            "DataFrames need pandas, an optional dependency: pip install 'tbdtrace[pandas]'"
        ) from None
