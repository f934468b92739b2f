"""Bootstrap for ``tbdtrace capture``: runs in every captured Python child.

``tbdtrace capture`` puts this directory first on the child's PYTHONPATH, so Python's
``site`` module imports this file at start-up, before the user's script, with no change
to the script. The user's own ``sitecustomize`` (the next one on sys.path) still runs,
after ours.

* ``--backend torch`` (``TBDTRACE_TORCH_SPOOL``): starts torch.profiler
  (tbdtrace.collector.profiler_child.start_in_child); the child's part of the trace is
  written at exit.
* ``--backend cupti`` (``TBDTRACE_TORCH_MEMORY_SPOOL``, ``TBDTRACE_TORCH_FLOPS_SPOOL``):
  nothing is imported here. When the program itself imports torch, the caching
  allocator's history and the memory tracker start
  (tbdtrace.collector.memory.torch_cuda.start_in_child),
  so tensor allocations join CUPTI's trace, and the dispatch-level FLOP recorder starts
  (tbdtrace.collector.torch_flops.start_in_child), so matmul, convolution and attention
  ops join it with their shapes and FLOPs; programs that never import torch are left alone.
  With capture windows (``TBDTRACE_WINDOWS``) the window controller starts here
  (tbdtrace.collector.window_child): it resumes and pauses the injected collector.
* ``--backend tf|mxnet|auto`` (``TBDTRACE_FRAMEWORK_SPOOL``, ``TBDTRACE_FRAMEWORK``):
  nothing is imported here. Once the program imports its framework (``tensorflow``,
  ``mxnet``; for ``auto`` the first of ``torch``, ``tensorflow`` and ``mxnet``), that
  framework's profiler starts (tbdtrace.collector.profiler_child.start_in_child).

The variables' names come from tbdtrace/collector/child_protocol.py, loaded by its path
(importing the package would load it whether a capture runs or not).
Only standard-library code runs here when the capture variables are absent.
"""

from __future__ import annotations

import os
import sys


def _protocol():  # type: ignore[no-untyped-def]
    """tbdtrace/collector/child_protocol.py (standard library only), loaded by its path."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(os.path.dirname(here), "child_protocol.py")
    spec = importlib.util.spec_from_file_location("_tbdtrace_child_protocol", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


P = _protocol()


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


def _package_on_path() -> None:
    root = os.environ.get(P.PACKAGE_ROOT)
    if root and root not in sys.path:
        sys.path.append(root)  # appended: the user's own modules keep precedence


class _AfterImport:
    """A one-shot meta-path finder: runs ``callback(module)`` once ``name`` has been
    imported by the program (its loader's ``exec_module`` is wrapped).

    It stays on ``sys.meta_path`` until the module is executed, not merely looked up: a
    program that probes ``importlib.util.find_spec(name)`` before importing it (as
    ``workloads.mxnet`` does) must not use up the hook."""

    def __init__(self, name: str, callback):  # type: ignore[no-untyped-def]
        self.name, self.callback = name, callback
        self._looking = False  # our own find_spec below runs the meta path again

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname != self.name or self._looking:
            return None
        import importlib.util

        self._looking = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._looking = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run, callback, finder = loader.exec_module, self.callback, self

        def exec_module(module):  # type: ignore[no-untyped-def]
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            run(module)
            try:
                callback(module)
            except Exception as e:  # noqa: BLE001 - capture must never break the program
                sys.stderr.write(f"tbdtrace: {finder.name} hooks not started: {e}\n")

        loader.exec_module = exec_module
        return spec


def _start_torch_hooks(torch) -> None:  # type: ignore[no-untyped-def]
    _package_on_path()
    if os.environ.get(P.TORCH_MEMORY_SPOOL):
        from tbdtrace.collector.memory import torch_cuda

        torch_cuda.start_in_child()
    if os.environ.get(P.TORCH_FLOPS_SPOOL):
        from tbdtrace.collector import torch_flops

        torch_flops.start_in_child()
    if os.environ.get(P.WINDOWS):
        from tbdtrace.collector import window_child

        window_child.watch_torch_nvtx(torch)


def _start_injected_windows() -> None:
    """cupti with windows: the controller of this process, driving the injected collector."""
    _package_on_path()
    from tbdtrace.collector import window_child, windows

    plan = windows.WindowPlan.from_json(os.environ[P.WINDOWS])
    window_child.start_in_child(plan, window_child.InjectedWindows(), os.environ[P.SPOOL_DIR])


_FRAMEWORK_MODULES = {
    "tf": ("tensorflow",),
    "mxnet": ("mxnet",),
    "auto": ("torch", "tensorflow", "mxnet"),
}
_BACKEND_OF = {"torch": "torch", "tensorflow": "tf", "mxnet": "mxnet"}


def _hook_frameworks(which: str) -> None:
    """Start the backend of the first framework module in ``which`` the program imports."""
    started: list[str] = []
    finders: list[_AfterImport] = []

    def start(module) -> None:  # type: ignore[no-untyped-def]
        if started:
            return
        started.append(module.__name__)
        for f in finders:  # the other frameworks' hooks are no longer needed
            if f in sys.meta_path:
                sys.meta_path.remove(f)
        _package_on_path()
        from tbdtrace.collector import profiler_child

        profiler_child.start_in_child(_BACKEND_OF[module.__name__])

    for name in _FRAMEWORK_MODULES.get(which, ()):
        if name in sys.modules:
            start(sys.modules[name])
            return
        finders.append(_AfterImport(name, start))
    sys.meta_path[:0] = finders


def _start() -> None:
    if os.environ.get(P.TORCH_SPOOL):
        _package_on_path()
        from tbdtrace.collector import profiler_child

        profiler_child.start_in_child("torch")
    elif os.environ.get(P.FRAMEWORK_SPOOL):
        _hook_frameworks(os.environ.get(P.FRAMEWORK, "auto"))
    else:
        if os.environ.get(P.SPOOL_DIR) and os.environ.get(P.WINDOWS):
            _start_injected_windows()
        if (
            os.environ.get(P.TORCH_MEMORY_SPOOL)
            or os.environ.get(P.TORCH_FLOPS_SPOOL)
            or os.environ.get(P.WINDOWS)
        ):
            if "torch" in sys.modules:
                _start_torch_hooks(sys.modules["torch"])
            else:
                sys.meta_path.insert(0, _AfterImport("torch", _start_torch_hooks))


_start()
_chain_user_sitecustomize()
