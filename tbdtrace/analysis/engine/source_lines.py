"""The user's Python source line behind each kernel (docs/METRICS.md, "Source lines").

A trace captured with Python stacks (``torch.profiler(with_stack=True)``, ``tbdtrace
capture --backend torch --with-stack``) holds ``python_function`` rows in ``ops``: one
range per Python call on its thread, named ``file(line): function``, and on recent torch
with ``call_from``, the ``file:line`` in the caller where the call was made. Per kernel,
from its launch point (:func:`tbdtrace.analysis.engine.attribution.launch_points`: the
launching runtime call's thread and start, or a CPU kernel's own):

1. U = the innermost ``python_function`` row containing the launch whose file is user code
   (:func:`is_user_file`: not the Python standard library, not site-packages, not one of
   :data:`LIBRARY_PACKAGES`); its function is the kernel's ``function``.
2. C = the innermost ``python_function`` row containing the launch that is not user code
   itself but was called from user code (its ``call_from`` is in a user file). When C is
   inside U (starts at or after U) and was called from U's file, the kernel's source is
   C's ``call_from``: the line in U that made the call (``line_kind`` "call").
3. Else (no such call: the work came from operator syntax such as ``a @ b`` or ``x[i]``,
   which the Python tracer does not record as a call, or a trace without ``call_from``)
   the source is U's own ``file:line`` as Kineto names it (``line_kind`` "frame": the
   function's first line for a call made while profiling).
4. No user frame on the launch thread (backward kernels on a GPU, launched by the autograd
   engine's device thread; a trace without Python stacks): not attributed.
"""

from __future__ import annotations

import functools
import re
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from tbdtrace.analysis.engine import shared_arrays
from tbdtrace.analysis.engine.attribution import launch_points, on_threads
from tbdtrace.analysis.engine.cache import Entry

if TYPE_CHECKING:
    from tbdtrace.analysis.engine.context import AnalysisContext

I64 = npt.NDArray[np.int64]

# Top-level packages whose frames are library code (besides the standard library and
# anything under site-packages/dist-packages): the frameworks, the libraries between a
# training script and them, the packaging machinery and tbdtrace's own harness. Kineto
# writes a file below a sys.path entry relative to it ("torch/nn/modules/module.py"), so
# the first path component is the package.
LIBRARY_PACKAGES = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "torchtext",
        "torchdata",
        "torchrec",
        "functorch",
        "triton",
        "numpy",
        "transformers",
        "accelerate",
        "deepspeed",
        "lightning",
        "lightning_fabric",
        "lightning_utilities",
        "pytorch_lightning",
        "apex",
        "tqdm",
        "typing_extensions",
        "setuptools",
        "pkg_resources",
        "_distutils_hack",
        "tbdtrace",
        "sitecustomize",
        "usercustomize",
    }
)

_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>.+)$")
_CALL = re.compile(r"^(?P<file>.+):(?P<line>\d+)$")
_STDLIB_DIR = re.compile(r"/lib/python\d+(\.\d+)?t?/")


def parse_frame(name: str) -> tuple[str, int, str] | None:
    """``"file(line): function"`` -> (file, line, function); None for other names
    (``<built-in ...>`` calls, ``nn.Module: ...`` ranges)."""
    m = _FRAME.match(name)
    return (m["file"], int(m["line"]), m["func"]) if m else None


def parse_call(text: str) -> tuple[str, int] | None:
    """A ``call_from`` value ``"file:line"`` -> (file, line); None when malformed."""
    m = _CALL.match(text)
    return (m["file"], int(m["line"])) if m else None


def is_user_file(path: str) -> bool:
    """Is ``path`` (as Kineto names a frame's file) the user's code?

    Library: ``<frozen ...>``, ``<string>`` and other pseudo-files (but ``<stdin>`` and
    IPython cells are the user's); absolute paths under site-packages, dist-packages or
    the Python installation's ``lib/pythonX.Y``; relative paths whose first component is
    standard-library module's file (it exists in this interpreter's standard library) or
    is one of :data:`LIBRARY_PACKAGES` (or an editable-install finder). Everything else
    is user code."""
    p = path.replace("\\", "/")
    if p.startswith("<"):
        return p == "<stdin>" or p.startswith("<ipython-input-")
    if p.startswith("/") or re.match(r"^[A-Za-z]:/", p):
        return not ("/site-packages/" in p or "/dist-packages/" in p or _STDLIB_DIR.search(p))
    top = p.split("/", 1)[0]
    top = top[:-3] if top.endswith(".py") else top
    return not (
        top in LIBRARY_PACKAGES
        or (top in sys.stdlib_module_names and _in_stdlib(p))
        or top.startswith("__editable__")
        or top == "__main__"
    )


@functools.lru_cache(maxsize=4096)
def _in_stdlib(rel: str) -> bool:
    """Is the relative path ``rel``, whose first component names a standard-library
    module, that module's file? Yes when this interpreter's standard library has the
    file (or the library's folder is not there to look in), so that a user's own
    ``test/train.py`` or ``code/model.py`` stays user code."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    return not lib.is_dir() or (lib / rel).is_file()


@dataclass(frozen=True)
class SourceLines:
    """Per kernel row: a code into ``sources`` (-1 = not attributed)."""

    code: I64
    sources: list[tuple[str, str, str]]  # (file:line, function, line_kind)
    has_stacks: bool  # the trace (window) has python_function rows


SOURCE_LINES: Entry[SourceLines] = Entry(
    "source_lines.attribute", "every kernel's user source line (file:line, function)"
)


def attribute(ctx: AnalysisContext) -> SourceLines:
    """The source line of every kernel (computed once per context)."""
    return ctx.cache.get(SOURCE_LINES, lambda: _attribute(ctx))


def _attribute(ctx: AnalysisContext) -> SourceLines:
    n = ctx.num_rows("kernels")
    # Without Python stacks no kernel has a source line: a read-only view of one value,
    # no memory (kept per context: 10M kernels, 76 MB each).
    unattributed: I64 = np.broadcast_to(np.int64(-1), (n,))
    if n == 0 or ctx.num_rows("ops") == 0:
        return SourceLines(unattributed, [], False)
    is_py = shared_arrays.label_mask(ctx, "ops", "category", lambda x: x == "python_function")
    if not is_py.any():
        return SourceLines(unattributed, [], False)
    none = np.full(n, -1, dtype=np.int64)
    name_codes, names = shared_arrays.codes(ctx, "ops", "name")
    frames = [parse_frame(x) if x is not None else None for x in names]
    user_frame = np.array([f is not None and is_user_file(f[0]) for f in frames] + [False])
    keep_user = is_py & user_frame[name_codes]
    if not keep_user.any():
        return SourceLines(none, [], True)
    if shared_arrays.has_values(ctx, "ops", "call_from"):
        cf_codes, cf_labels = shared_arrays.codes(ctx, "ops", "call_from")
        calls = [parse_call(x) if x is not None else None for x in cf_labels]
        user_call = np.array([c is not None and is_user_file(c[0]) for c in calls] + [False])
        keep_call = (
            is_py & ~user_frame[name_codes] & user_call[np.where(cf_codes >= 0, cf_codes, -1)]
        )
    else:
        cf_codes, calls = np.full(is_py.size, -1, dtype=np.int64), []
        keep_call = np.zeros(is_py.size, dtype=bool)
    points = launch_points(ctx)
    if points is None:
        return SourceLines(none, [], True)
    tq, queries, q_t, _ = points
    u = on_threads(ctx, "ops", keep_user, queries, q_t)
    c = on_threads(ctx, "ops", keep_call, queries, q_t) if keep_call.any() else np.full_like(u, -1)
    start = shared_arrays.ints(ctx, "ops", "start_ns")
    uc, cc = np.clip(u, 0, None), np.clip(c, 0, None)
    u_name = np.where(u >= 0, name_codes[uc] if name_codes.size else -1, -1)
    c_call = np.where(c >= 0, cf_codes[cc] if cf_codes.size else -1, -1)
    inside = (u >= 0) & (c >= 0) & (start[cc] >= start[uc])
    # Key per query: the user frame's name code and the call's call_from code (-1: none).
    call_key = np.where(inside, c_call, -1)
    keys = np.stack([u_name, call_key], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    label_of: dict[tuple[str, str, str], int] = {}
    lut = np.full(len(uniq), -1, dtype=np.int64)
    for i, (un, ck) in enumerate(uniq.tolist()):
        if un < 0:
            continue
        f = frames[un]
        assert f is not None
        call = calls[ck] if ck >= 0 else None
        if call is not None and call[0] == f[0]:
            key = (f"{call[0]}:{call[1]}", f[2], "call")
        else:
            key = (f"{f[0]}:{f[1]}", f[2], "frame")
        lut[i] = label_of.setdefault(key, len(label_of))
    code = none.copy()
    code[tq] = lut[inv]
    return SourceLines(code, list(label_of), True)
