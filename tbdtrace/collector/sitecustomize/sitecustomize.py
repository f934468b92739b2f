"""Bootstrap for ``tbdtrace capture --backend torch``: runs in the captured child.

``tbdtrace capture`` puts this directory first on the child's PYTHONPATH, so Python's
``site`` module imports this file at start-up, before the user's script, with no change
to the script. It starts torch.profiler (tbdtrace.collector.torch_child.start_in_child)
and arranges for the child's part of the trace to be written at exit. The user's own
``sitecustomize`` (the next one on sys.path) still runs, after ours.

Only standard-library code runs here when the capture variables are absent.
"""

from __future__ import annotations

import os
import sys


def _chain_user_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.machinery
    import importlib.util

    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


def _start() -> None:
    if not os.environ.get("TBDTRACE_TORCH_SPOOL"):
        return
    root = os.environ.get("TBDTRACE_PACKAGE_ROOT")
    if root and root not in sys.path:
        sys.path.append(root)  # appended: the user's own modules keep precedence
    from tbdtrace.collector import torch_child

    torch_child.start_in_child()


_start()
_chain_user_sitecustomize()
