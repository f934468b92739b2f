"""Enumerations read from the CUDA 13.0 CUPTI headers themselves (the expected values of the
native tests: an independent reading of what the C++ compiles against)."""

from __future__ import annotations

import re
from pathlib import Path

INCLUDE = Path("/usr/local/cuda/include")


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
