"""Peak RSS and time of Kineto import (the C++ parser, fed the file in pieces).

Usage: python bench/kineto_stream_rss.py [EVENTS]   (default 400000 events)

Writes a synthetic Kineto trace (kernels, runtime calls and cpu ops in the shape real
traces have) to a temporary file, then imports it in a fresh subprocess. Prints one JSON
line: file size, events, seconds, peak RSS (ru_maxrss) of the importing process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import resource, sys, time
from pathlib import Path
from tbdtrace.importers import kineto
t = time.perf_counter()
tables, meta = kineto.import_files([Path(sys.argv[1])])
dt = time.perf_counter() - t
print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def make(path: Path, n: int) -> None:
    with path.open("w") as f:
        f.write(
            '{"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1},\n'
            '"traceEvents": [\n'
        )
        for i in range(n):
            ts = 1_700_000_000_000_000 + i * 10
            kind = i % 3
            if kind == 0:
                ev = {
                    "ph": "X",
                    "cat": "kernel",
                    "name": f"void gemm_kernel<{i % 97}>(float*)",
                    "pid": 0,
                    "tid": 7,
                    "ts": ts,
                    "dur": 4.5,
                    "args": {
                        "External id": i,
                        "device": 0,
                        "stream": 7,
                        "correlation": i,
                        "grid": [128, 1, 1],
                        "block": [256, 1, 1],
                        "registers per thread": 32,
                        "shared memory": 0,
                    },
                }
            elif kind == 1:
                ev = {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 100,
                    "tid": 100,
                    "ts": ts,
                    "dur": 3.25,
                    "args": {"External id": i, "cbid": 211, "correlation": i},
                }
            else:
                ev = {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "aten::mm",
                    "pid": 100,
                    "tid": 100,
                    "ts": ts,
                    "dur": 8.125,
                    "args": {
                        "External id": i,
                        "Input Dims": [[64, 64], [64, 64]],
                        "Input type": ["float", "float"],
                    },
                }
            f.write(json.dumps(ev) + (",\n" if i < n - 1 else "\n"))
        f.write('], "baseTimeNanoseconds": 0}\n')


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400_000
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "big.json"
        make(p, n)
        size = p.stat().st_size
        for mode in ("native",):
            env = dict(os.environ, PYTHONPATH=str(root))
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(p), mode],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            print(
                json.dumps(
                    {
                        "mode": mode,
                        "events": n,
                        "file_bytes": size,
                        "seconds": round(float(out[0]), 2),
                        "peak_rss_bytes": int(out[1]),
                    }
                )
            )


if __name__ == "__main__":
    main()
