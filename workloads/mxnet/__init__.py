"""TBD workloads on MXNet 1.9 Gluon.

Run each with ``.venv-mxnet/bin/python -m workloads.mxnet.<model>`` (``make venv-mxnet``).
Run with an interpreter that lacks MXNet (e.g. ``.venv``'s), a workload exits 1 with one
line saying which interpreter to use instead of an import traceback.
"""

import importlib.util
import sys

# While ``python -m workloads.mxnet.<model>`` imports this package, runpy has set
# sys.argv[0] to "-m"; a plain import (the registry's find_spec, tests) is left alone.
if sys.argv[:1] == ["-m"] and importlib.util.find_spec("mxnet") is None:
    print(
        f"workloads.mxnet: MXNet is not installed for {sys.executable}; "
        "run with .venv-mxnet/bin/python (make venv-mxnet)",
        file=sys.stderr,
    )
    raise SystemExit(1)
