"""The lite API set (csrc/collector/api_filter.h): which runtime/driver callback ids the
collector switches on and off through the CUPTI seam in each mode, against the rules of
docs/DECISIONS.md 173 applied here to the CUDA 13.0 headers (cupti_runtime_cbid.h,
cupti_driver_cbid.h), and the order CUPTI needs (no RUNTIME/DRIVER kind enabled in lite;
the per-call switches after every kind, since a kind enabled later overrides them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tbdtrace import _native_testing as nt
from tbdtrace.collector import spool

from .cupti_headers import enum_values

KIB = 1024

# Rules over callback names (runtime names without their _vNNNN version suffix).
RUNTIME_RULES = (
    r"^(__)?cudaLaunch(Kernel|KernelExC|CooperativeKernel|CooperativeKernelMultiDevice|HostFunc)?(_ptsz)?$",
    r"^cudaGraphLaunch(_ptsz)?$",
    r"^cudaMemcpy",
    r"^cudaMemset",  # case matters: cudaMemSetMemPool is not a memset
    r"^cuda(Thread|Device|Stream|Event)Synchronize(_ptsz)?$",
    r"^cudaStreamWaitEvent(_ptsz)?$",
    r"^cudaWaitExternalSemaphoresAsync(_ptsz)?$",
    r"^cuda(Malloc|Free)",
    r"^cudaHost(Alloc|Register|Unregister)$",
)
DRIVER_RULES = (
    r"^cuLaunch",
    r"^cuGraphLaunch(_ptsz)?$",
    r"^cuMem",
    r"^cu(Ctx|Stream|Event)Synchronize",
    r"^cuStreamWait(Event|Value)",
    r"^cuWaitExternalSemaphoresAsync",
)


def _expected(header: str, typedef: str, prefix: str, rules: tuple[str, ...]) -> set[int]:
    out = set()
    for name, value in enum_values(header, typedef).items():
        short = re.sub(r"_v\d{4,5}$", "", name.removeprefix(prefix))
        if short in ("INVALID", "SIZE", "FORCE_INT"):
            continue
        if any(re.search(r, short) for r in rules):
            out.add(value)
    return out


RUNTIME = _expected(
    "cupti_runtime_cbid.h",
    "CUpti_runtime_api_trace_cbid",
    "CUPTI_RUNTIME_TRACE_CBID_",
    RUNTIME_RULES,
)
DRIVER = _expected(
    "cupti_driver_cbid.h", "CUpti_driver_api_trace_cbid", "CUPTI_DRIVER_TRACE_CBID_", DRIVER_RULES
)
KINDS = enum_values("cupti_activity.h", "CUpti_ActivityKind")


def _capture(tmp_path: Path, api_set: str, acts: list[str]) -> tuple[list, dict]:
    fake = nt.FakeCupti(threads=1, records_per_thread=10)
    ok, status, msg = nt.start(
        fake, str(tmp_path / "a.tbds"), acts, 64 * KIB, 2, 1000, api_set=api_set
    )
    assert ok, (status, msg)
    fake.start_producers()
    fake.join_producers()
    sp = spool.read(nt.stop())
    assert sp.meta is not None
    return fake.calls(), sp.meta


def test_sets_read_from_the_headers_are_plausible() -> None:
    names = enum_values("cupti_runtime_cbid.h", "CUpti_runtime_api_trace_cbid")
    for n in (
        "cudaLaunchKernel_v7000",
        "cudaLaunchKernelExC_v11060",
        "cudaGraphLaunch_v10000",
        "cudaMemcpyAsync_v3020",
        "cudaStreamSynchronize_v3020",
        "cudaMalloc_v3020",
    ):
        assert names["CUPTI_RUNTIME_TRACE_CBID_" + n] in RUNTIME, n
    for n in (
        "cudaGetDevice_v3020",
        "cudaGetLastError_v3020",
        "cudaMemSetMemPool_v13000",
        "cudaStreamQuery_v3020",
        "cudaFuncGetAttributes_v3020",
    ):
        assert names["CUPTI_RUNTIME_TRACE_CBID_" + n] not in RUNTIME, n
    dnames = enum_values("cupti_driver_cbid.h", "CUpti_driver_api_trace_cbid")
    for n in ("cuLaunchKernel", "cuLaunchKernelEx", "cuMemAlloc_v2", "cuMemcpyAsync"):
        assert dnames["CUPTI_DRIVER_TRACE_CBID_" + n] in DRIVER, n
    for n in ("cuDevicePrimaryCtxGetState", "cuCtxGetCurrent", "cuKernelGetName"):
        assert dnames["CUPTI_DRIVER_TRACE_CBID_" + n] not in DRIVER, n


def test_the_collectors_lists_follow_the_rules() -> None:
    rt, dr = nt.lite_api_cbids()
    assert set(rt) == RUNTIME and len(rt) == len(RUNTIME)
    assert set(dr) == DRIVER and len(dr) == len(DRIVER)


def test_lite_switches_exactly_the_set_on_at_start_and_off_at_stop(tmp_path: Path) -> None:
    calls, meta = _capture(tmp_path, "lite", ["kernel", "runtime", "driver", "memcpy"])
    enabled = [c[1] for c in calls if c[0] == "enable"]
    assert KINDS["CUPTI_ACTIVITY_KIND_RUNTIME"] not in enabled
    assert KINDS["CUPTI_ACTIVITY_KIND_DRIVER"] not in enabled
    assert KINDS["CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"] in enabled
    last_enable = max(i for i, c in enumerate(calls) if c[0] == "enable")
    switches = [(i, c) for i, c in enumerate(calls) if c[0] in ("runtime_api", "driver_api")]
    on = [c for i, c in switches if c[2] == 1]
    off = [c for i, c in switches if c[2] == 0]
    assert min(i for i, c in switches if c[2] == 1) > last_enable
    assert {c[1] for c in on if c[0] == "runtime_api"} == RUNTIME
    assert {c[1] for c in on if c[0] == "driver_api"} == DRIVER
    assert len(on) == len(RUNTIME) + len(DRIVER)
    assert sorted(off) == sorted((w, i, 0) for w, i, _ in on)  # each turned off at stop
    assert meta["api"] == "lite"
    assert meta["api_runtime_cbids"] == len(RUNTIME)
    assert meta["api_driver_cbids"] == len(DRIVER)


def test_lite_without_the_runtime_kind_switches_on_only_driver_calls(tmp_path: Path) -> None:
    calls, _ = _capture(tmp_path, "lite", ["kernel", "driver"])
    assert {c[1] for c in calls if c[0] == "driver_api" and c[2]} == DRIVER
    assert not [c for c in calls if c[0] == "runtime_api"]


def test_full_enables_the_kinds_and_switches_no_call(tmp_path: Path) -> None:
    calls, meta = _capture(tmp_path, "full", ["kernel", "runtime", "driver"])
    enabled = {c[1] for c in calls if c[0] == "enable"}
    assert {KINDS["CUPTI_ACTIVITY_KIND_RUNTIME"], KINDS["CUPTI_ACTIVITY_KIND_DRIVER"]} <= enabled
    assert not [c for c in calls if c[0] in ("runtime_api", "driver_api")]
    assert meta["api"] == "full" and meta["api_runtime_cbids"] == 0


def test_an_unknown_api_set_is_refused(tmp_path: Path) -> None:
    fake = nt.FakeCupti(threads=1, records_per_thread=1)
    ok, status, msg = nt.start(
        fake, str(tmp_path / "x.tbds"), ["kernel"], 64 * KIB, 2, 1000, api_set="some"
    )
    assert not ok and status == "error" and "lite or full" in msg
    assert fake.calls() == []


@pytest.mark.parametrize("api_set", ["lite", "full"])
def test_api_set_is_in_the_spool_meta(tmp_path: Path, api_set: str) -> None:
    _, meta = _capture(tmp_path, api_set, ["kernel"])
    assert meta["api"] == api_set
