"""NVML GPU sampling against a fake NVML at the pynvml call boundary (the one seam): the
fake has pynvml's functions and returns pynvml's own ctypes structs; its device state is
set here, and the expected rows are written from that state and the documented units."""

from __future__ import annotations

import ctypes
import time
from typing import Any

import pynvml
import pytest

from tbdtrace import trace
from tbdtrace.collector.gpu_sampler import GPM_METRICS, NvmlSampler
from tbdtrace.collector.host_sampler import HostSampler, SamplerConfig
from tbdtrace.commands import capture as capture_cmd


# GPM value (percent) the fake reports for metric id `m` between samples taken at ticks t1
# and t2: a formula the test can recompute.
def gpm_percent(metric_id: int, t1: int, t2: int) -> float:
    return float((metric_id * 7 + t1 * 3 + t2) % 100)


class FakeNvml:
    """pynvml's surface as the sampler uses it; devices are dicts of their state."""

    NVMLError = pynvml.NVMLError
    NVML_SUCCESS = pynvml.NVML_SUCCESS
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
    c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t

    def __init__(self, devices: list[dict[str, Any]], init_error: int | None = None):
        for _, attr in GPM_METRICS:
            setattr(self, attr, getattr(pynvml, attr))
        self.devices = devices
        self.init_error = init_error
        self.tick = 0  # advanced by the test between samples
        self.sample_tick: dict[int, int] = {}  # GPM sample buffer address -> tick taken
        self.keep: list[Any] = []
        self.freed = 0
        self.shutdown = False

    def _dev(self, h: Any) -> dict[str, Any]:
        return self.devices[h.value]

    def _get(self, h: Any, key: str) -> Any:
        v = self._dev(h).get(key)
        if v is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return v

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Any:
        return ctypes.c_int(i)

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:
        gpu, mem = self._get(h, "util")
        return pynvml.c_nvmlUtilization_t(gpu=gpu, memory=mem)

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        return int(self._get(h, "power_mw"))

    def nvmlDeviceGetClockInfo(self, h: Any, clock: int) -> int:
        assert clock == pynvml.NVML_CLOCK_SM
        return int(self._get(h, "sm_mhz"))

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:
        used = self._get(h, "mem_used")
        return pynvml.c_nvmlMemory_t(total=80 << 30, free=(80 << 30) - used, used=used)

    def nvmlGpmQueryDeviceSupport(self, h: Any) -> Any:
        s = pynvml.c_nvmlGpmSupport_t()
        s.isSupportedDevice = 1 if self._dev(h).get("gpm") else 0
        return s

    def nvmlGpmSampleAlloc(self) -> Any:
        buf = ctypes.create_string_buffer(64)
        self.keep.append(buf)
        return ctypes.cast(buf, pynvml.c_nvmlGpmSample_t)

    def nvmlGpmSampleFree(self, s: Any) -> None:
        self.freed += 1

    def nvmlGpmSampleGet(self, h: Any, s: Any) -> Any:
        self.sample_tick[ctypes.cast(s, ctypes.c_void_p).value or 0] = self.tick
        return s

    def nvmlGpmMetricsGet(self, req: Any) -> Any:
        assert req.version == pynvml.NVML_GPM_METRICS_GET_VERSION
        t1 = self.sample_tick[ctypes.cast(req.sample1, ctypes.c_void_p).value or 0]
        t2 = self.sample_tick[ctypes.cast(req.sample2, ctypes.c_void_p).value or 0]
        for i in range(req.numMetrics):
            m = req.metrics[i]
            m.nvmlReturn = pynvml.NVML_SUCCESS
            m.value = gpm_percent(m.metricId, t1, t2)
        return req


HOPPER = {"util": (37, 12), "power_mw": 312_500, "sm_mhz": 1980, "mem_used": 3 << 30, "gpm": 1}
# An older board: no power reading, no GPM.
TURING = {"util": (5, 1), "power_mw": None, "sm_mhz": 1590, "mem_used": 1 << 30, "gpm": 0}


def rows_of(out: list[tuple[int, str, int, float]], ts: int) -> dict[tuple[str, int], float]:
    return {(m, i): v for t, m, i, v in out if t == ts}


def test_per_device_figures_in_their_units_and_gpm_between_samples() -> None:
    fake = FakeNvml([dict(HOPPER), dict(TURING)])
    s = NvmlSampler(fake)
    assert s.status == "ok (2 devices; GPM on 0)"
    out: list[tuple[int, str, int, float]] = []
    for tick in range(3):
        fake.tick = tick
        s.sample(100 + tick, out)
    first = rows_of(out, 100)
    assert first == {
        ("gpu_util", 0): 0.37,
        ("gpu_memory_util", 0): 0.12,
        ("gpu_power_watts", 0): 312.5,
        ("gpu_sm_clock_hz", 0): 1980e6,
        ("gpu_memory_used_bytes", 0): float(3 << 30),
        ("gpu_util", 1): 0.05,
        ("gpu_memory_util", 1): 0.01,
        ("gpu_sm_clock_hz", 1): 1590e6,
        ("gpu_memory_used_bytes", 1): float(1 << 30),
    }  # GPM needs two samples; device 1 has no power reading: no row, not a zero
    for tick in (1, 2):
        got = rows_of(out, 100 + tick)
        for name, attr in GPM_METRICS:
            want = gpm_percent(getattr(pynvml, attr), tick - 1, tick) / 100.0
            assert got[(name, 0)] == pytest.approx(want)
            assert (name, 1) not in got
    s.close()
    assert fake.freed == 2 and fake.shutdown


def test_a_metric_that_stops_answering_is_dropped_for_that_device_only() -> None:
    fake = FakeNvml([dict(HOPPER), dict(HOPPER)])
    s = NvmlSampler(fake)
    out: list[tuple[int, str, int, float]] = []
    s.sample(1, out)
    fake.devices[1]["sm_mhz"] = None
    s.sample(2, out)
    fake.devices[1]["sm_mhz"] = 1000  # not asked again
    s.sample(3, out)
    assert ("gpu_sm_clock_hz", 0) in rows_of(out, 3) and ("gpu_sm_clock_hz", 1) not in rows_of(
        out, 3
    )
    assert ("gpu_power_watts", 1) in rows_of(out, 3)


def test_no_driver_means_no_gpu_rows_and_one_info_line(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    hs = HostSampler(SamplerConfig(rate_hz=50.0), nvml=fake)
    assert hs.nvml_status == (
        "unavailable: NVMLError_LibraryNotFound: NVML Shared Library Not Found"
    )
    hs.start()
    cols = hs.stop()
    assert not [m for m in cols["metric"] if str(m).startswith("gpu_")]
    assert capsys.readouterr().err == ""  # the sampler itself is silent
    # `capture` says it once, after writing the trace (meta.extra.host_sampler.nvml).
    meta: dict[str, Any] = {"source": "test", "extra": {"host_sampler": {"nvml": hs.nvml_status}}}
    capture_cmd._nvml_info(
        trace.open(trace.write(tmp_path / "t", {"host_samples": cols}, meta)).meta
    )
    assert capsys.readouterr().err.splitlines() == [
        "tbdtrace capture: info: no GPU samples (NVML unavailable: "
        "NVMLError_LibraryNotFound: NVML Shared Library Not Found)"
    ]
    meta["extra"]["host_sampler"]["nvml"] = "ok (1 devices; no GPM)"
    capture_cmd._nvml_info(
        trace.open(trace.write(tmp_path / "u", {"host_samples": cols}, meta)).meta
    )
    assert capsys.readouterr().err == ""


def test_host_sampler_writes_gpu_rows_into_the_trace(tmp_path: Any) -> None:
    fake = FakeNvml([dict(HOPPER)])
    hs = HostSampler(SamplerConfig(rate_hz=50.0), nvml=fake)
    hs.start()
    time.sleep(0.2)
    cols = hs.stop()
    gpu = {m for m in cols["metric"] if str(m).startswith("gpu_")}
    assert gpu == {
        "gpu_util",
        "gpu_memory_util",
        "gpu_power_watts",
        "gpu_sm_clock_hz",
        "gpu_memory_used_bytes",
        *(name for name, _ in GPM_METRICS),
    }
    t = trace.open(trace.write(tmp_path / "t", {"host_samples": cols}, {"source": "test"}))
    tbl = t.table("host_samples").to_pydict()
    power = [v for m, v in zip(tbl["metric"], tbl["value"], strict=True) if m == "gpu_power_watts"]
    assert power and set(power) == {312.5}
