"""The part of a kernel's name that says what the kernel is.

Profilers record a kernel's demangled signature: return type, namespaces, the function,
its template arguments and its parameter types, e.g.
``void moe::finalizeKernel<cutlass::bfloat16_t, 4>(moe::Params<cutlass::bfloat16_t>)``.
Only the qualified function name (``moe::finalizeKernel``) names the kernel; the template
and parameter lists name the types it works on, and matching category patterns inside
them made a MoE combine kernel a GEMM (``cutlass::bfloat16_t``) and a quantize kernel
attention (a ``flashinfer::`` parameter type).

Some libraries launch every kernel through one generic entry point whose first type
template argument is the real kernel (CUTLASS ``cutlass::Kernel<Op>`` and
``cutlass::device_kernel<Op>``, CK-tile ``ck_tile::kentry<...>``): for those, that
argument's name is the one to read.

Names recorded mangled (Itanium C++ ABI, ``_ZN2ck16tensor_operation6device...``: ROCm's
tracer and Nsight Systems record many kernels so) are demangled first, by the C++
runtime's ``abi::__cxa_demangle`` (``tbdtrace._native.demangle``): the mangled text runs
the function name and its template arguments together, so a Composable Kernel
convolution whose descriptor type holds CK's ``Embed`` transform read as an embedding.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Generic entry points whose first type template argument is the kernel that runs.
WRAPPERS = frozenset(
    {
        "cutlass::Kernel",
        "cutlass::Kernel2",
        "cutlass::device_kernel",
        "ck_tile::kentry",
    }
)
_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_TYPE = re.compile(r"[A-Za-z_]")
_RETURN = re.compile(
    r"^(?:(?:static|inline|extern|__global__|__device__|const|unsigned|signed|void|int|float"
    r"|double|bool|char|long|short|auto)\s+)+"
)


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """``name`` demangled when it is an Itanium-mangled name (``_Z...``); any other name,
    and a mangled name the C++ runtime cannot read, unchanged."""
    if not name.startswith("_Z"):
        return name
    from tbdtrace import _native  # only for a mangled name (report's import budget)

    fn = getattr(_native, "demangle", None)
    if fn is None:
        raise RuntimeError(
            "tbdtrace._native is older than this checkout (no demangle): rebuild it with "
            "`make native`"
        )
    out: str = fn(name)
    return out


def _outer(name: str) -> tuple[str, list[str]]:
    """(the text outside every bracket pair, the arguments of the first template list),
    brackets balanced by kind; a ``>`` that closes nothing (``->``) is kept as text."""
    out: list[str] = []
    args: list[str] = []
    arg: list[str] = []
    stack: list[str] = []
    state = 0  # 0: before the first template list, 1: inside it, 2: after it
    for ch in name:
        if ch in _OPEN:
            if ch == "<" and not stack and state == 0:
                state = 1
            elif state == 1:
                arg.append(ch)
            stack.append(ch)
            continue
        if ch in _CLOSE and stack and stack[-1] == _CLOSE[ch]:
            stack.pop()
            if state == 1 and not stack:
                args.append("".join(arg))
                state = 2
            elif state == 1:
                arg.append(ch)
            continue
        if state == 1 and len(stack) == 1 and ch == ",":
            args.append("".join(arg))
            arg = []
        elif state == 1:
            arg.append(ch)
        elif not stack:
            out.append(ch)
    if state == 1:  # unbalanced: keep what was read
        args.append("".join(arg))
    return "".join(out), args


def function_name(name: str) -> str:
    """The qualified function name of a kernel name: template and parameter lists, lambda
    bodies, ``(anonymous namespace)`` and a leading return type removed. A name that is
    already plain (``volta_sgemm_128x64_nn``, ``aten::addmm``) is returned unchanged; a
    mangled name is demangled first."""
    name = demangle(name)
    if not any(c in name for c in "<({[ "):
        return name
    text, _ = _outer(name.replace("(anonymous namespace)::", ""))
    text = _RETURN.sub("", text.strip()).strip()
    return text or name


def candidates(name: str) -> tuple[str, ...]:
    """Names to classify, in order: for a generic entry point (:data:`WRAPPERS`), the
    kernel it runs and then the entry point; otherwise the function name alone. A mangled
    name is demangled first."""
    name = demangle(name)
    if "<" not in name:
        return (function_name(name),)
    clean = name.replace("(anonymous namespace)::", "")
    text, args = _outer(clean)
    fn = _RETURN.sub("", text.strip()).strip() or name
    if fn in WRAPPERS:
        # The kernel is the first argument that is a type, not a number (ck_tile::kentry
        # takes its block size first).
        kernel = next((a.strip() for a in args if _TYPE.match(a.strip())), None)
        if kernel:
            return (function_name(kernel), fn)
    return (fn,)
