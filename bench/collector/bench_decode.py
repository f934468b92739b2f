"""Decode + columnarize benchmark: ns per record for synthetic CUPTI kernel records.

Builds N ``CUpti_ActivityKernel10`` records (64 distinct mangled kernel names, as in a
training step) in one buffer and decodes them on one core, clearing the column chunks
every 65,536 rows the way the collector's spill does. Prints the decoder-only figure and
the figure with ``cuptiActivityGetNextRecord`` walking the buffer (libcupti 13.0.x).
Goal: at most 30 ns/record.

    .venv/bin/python bench/collector/bench_decode.py [--records 10000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os

from tbdtrace import _native_testing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--names", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    runs = [
        _native_testing.bench_decode_kernels(args.records, args.names) for _ in range(args.repeat)
    ]
    best = {k: min(r[k] for r in runs) for k in runs[0] if k.endswith("_per_record")}
    print(
        json.dumps(
            {
                "records": args.records,
                "distinct_names": args.names,
                "load_avg_1m": os.getloadavg()[0],
                **best,
            },
            indent=2,
        )
    )
    print(
        f"decode+columnarize: {best['decode_ns_per_record']:.1f} ns/record wall, "
        f"{best['decode_cpu_ns_per_record']:.1f} ns/record CPU "
        f"(goal <= 30)"
    )


if __name__ == "__main__":
    main()
