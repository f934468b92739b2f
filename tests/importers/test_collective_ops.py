"""The collectives table's op column: from the args' collective name when present, else
from an NCCL kernel name; a dictionary in first-appearance order (as dictionary_encode)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.importers import collectives


def test_op_per_row_and_dictionary_order():
    names = [
        "ncclDevKernel_AllGather_RING_LL",  # all_gather, by name
        "ampere_sgemm_128x64_nn",  # not a collective
        "ncclKernel_AllReduce_RING_LL_Sum_float",  # all_reduce by name...
        "ncclKernel_AllReduce_RING_LL_Sum_float",  # ...but its args say reduce_scatter
        "rcclKernel_SendRecv",  # "other" (SendRecv serves several ops)
        "vectorized_elementwise_kernel",  # not a collective, args name none
        "ncclDevKernel_AllGather_RING_LL",
    ]
    coll = [None, None, None, "_reduce_scatter_base", None, None, "allgather_into_tensor"]
    n = len(names)
    kern = {
        "start_ns": pa.array(range(n), pa.int64()),
        "end_ns": pa.array(range(1, n + 1), pa.int64()),
        "name": pc.dictionary_encode(pa.array(names)),
    }
    args: dict[str, pa.Array | None] = {a: None for a in collectives.ARGS}
    args["coll_name"] = pa.array(coll, pa.string())
    out = collectives.from_kernels(kern, args, None)
    assert out is not None
    assert out["start_ns"].to_pylist() == [0, 2, 3, 4, 6]
    op = out["op"]
    assert op.to_pylist() == ["all_gather", "all_reduce", "reduce_scatter", "other", "all_gather"]
    assert op.dictionary.to_pylist() == ["all_gather", "all_reduce", "reduce_scatter", "other"]
    assert op.indices.to_pylist() == [0, 1, 2, 3, 0]


def test_no_collective_kernel_gives_no_table():
    kern = {
        "start_ns": pa.array([0], pa.int64()),
        "end_ns": pa.array([1], pa.int64()),
        "name": pc.dictionary_encode(pa.array(["gemm"])),
    }
    assert collectives.from_kernels(kern, {a: None for a in collectives.ARGS}, None) is None
