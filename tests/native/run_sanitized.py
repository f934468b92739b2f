"""Run pytest against a sanitized build of ``tbdtrace._native`` (``make sanitize``).

``python tests/native/run_sanitized.py PKG_DIR [pytest args...]``: PKG_DIR holds a
``tbdtrace`` package whose modules are this checkout's and whose ``_native`` is the
ASan + UBSan build; it is imported first, so every test in the run (and what they import)
calls the instrumented code. The interpreter is not instrumented: the caller preloads the
sanitizer runtime and libstdc++ (LD_PRELOAD), and leak checking stays off (the interpreter
keeps its objects to the end). Exits with pytest's status; a sanitizer report aborts.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    pkg = Path(argv[0]).resolve()
    sys.path.insert(0, str(pkg))
    import tbdtrace._native as native

    if not Path(native.__file__).is_relative_to(pkg):
        print(f"run_sanitized: {native.__file__} is not the build in {pkg}", file=sys.stderr)
        return 2
    print(f"run_sanitized: {native.__file__}", flush=True)
    import pytest

    return int(pytest.main(argv[1:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
