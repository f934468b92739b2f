"""Enumerations read from the CUDA 13.0 CUPTI headers themselves (the expected values of the
native tests: an independent reading of what the C++ compiles against)."""

from __future__ import annotations

import os
import re
import sysconfig
from pathlib import Path


def _include() -> Path:
    """The CUDA toolkit's headers, else the nvidia-cuda-cupti wheel's (as the build finds
    them, CMakeLists.txt)."""
    cands = [Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"]
    cands.append(Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13" / "include")
    return next((c for c in cands if (c / "cupti_activity.h").exists()), cands[0])


INCLUDE = _include()


def enum_values(header: str, typedef: str) -> dict[str, int]:
    """Members of ``typedef enum {...} typedef;`` in ``header``, implicit values counted."""
    text = (INCLUDE / header).read_text()
    end = re.search(r"\}\s*" + re.escape(typedef) + r"\s*;", text)
    assert end is not None, f"{typedef} not in {header}"
    body = text[text.rindex("typedef enum", 0, end.start()) : end.start()]
    body = re.sub(r"/\*.*?\*/|//[^\n]*", "", body, flags=re.S)
    body = body[body.index("{") + 1 :]
    out: dict[str, int] = {}
    nxt = 0
    for item in body.split(","):
        m = re.fullmatch(r"\s*(\w+)\s*(?:=\s*(0x[0-9a-fA-F]+|-?\d+)(?:\s*<<\s*(\d+))?)?\s*", item)
        if m is None:
            continue
        if m.group(2):
            nxt = int(m.group(2), 0) << int(m.group(3) or 0)
        out[m.group(1)] = nxt
        nxt += 1
    return out
