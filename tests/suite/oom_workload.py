"""A test workload that runs out of memory above a batch size, as a real one does.

It trains through the harness like every workload (steps records, summary line), and
each step holds ``batch x PER_SAMPLE_BYTES`` of "activations". Its address space is
capped (RLIMIT_AS) at what it uses at start plus :data:`HEADROOM_BYTES`, so batches up
to 4 fit and from 8 up NumPy's allocation fails with its own MemoryError, which ends the
process with a traceback and exit code 1: what a workload whose device memory is full
does.
"""

from __future__ import annotations

import resource

import numpy as np

from workloads import harness

MODEL = "oomtest"
PER_SAMPLE_BYTES = 32 << 20
HEADROOM_BYTES = 200 << 20  # batch 4 needs 128 MiB, batch 8 256 MiB


def _address_space_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def main() -> None:
    args = harness.parse_args(MODEL, "pytorch", {"tiny": 1, "small": 1, "paper": 1})
    cap = _address_space_bytes() + HEADROOM_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    def step(_: int) -> float:
        act = np.ones(args.batch_size * PER_SAMPLE_BYTES, dtype=np.uint8)  # touched
        return float(act[-1])

    harness.train(MODEL, "pytorch", args, step)


if __name__ == "__main__":
    main()
