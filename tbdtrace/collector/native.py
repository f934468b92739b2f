"""The compiled collector module, loaded on first use with a message for people when it
is missing. A module of its own, below every user of it (``cupti_backend``, ``flops``),
so that loading it ties no two collector modules together (DECISIONS 179)."""

from __future__ import annotations

from typing import Any

from tbdtrace.errors import TraceError


def native() -> Any:
    """The compiled module; TraceError with the build command when it is missing."""
    try:
        from tbdtrace import _native
    except ImportError as e:
        raise TraceError(
            f"the native CUPTI collector is not built ({e}); run `make native`"
        ) from None
    if not getattr(_native, "has_collector", True):
        raise TraceError(
            "this tbdtrace was built without the CUPTI collector (analysis-only build, or no "
            "CUPTI found at build time); reinstall with the CUDA toolkit or the "
            "nvidia-cuda-cupti wheel present and TBDTRACE_COLLECTOR=ON to capture with "
            "--backend cupti"
        )
    return _native
