"""GPU samples through NVML (``pynvml``, package nvidia-ml-py): the host sampler's GPU part.

``pynvml`` is the one seam: :class:`NvmlSampler` takes the module (tests pass a fake with
the same functions and pynvml's own ctypes structs). Per device and sample, rows of the
``host_samples`` table (index = NVML device index):

====================================  =========================================================
metric                                value
====================================  =========================================================
``gpu_util``                          utilization.gpu, 0..1: share of the last sample period in
                                      which a kernel ran (not how many SMs were busy)
``gpu_memory_util``                   utilization.memory, 0..1: share of the period in which
                                      device memory was read or written
``gpu_power_watts``                   board power draw, W (nvmlDeviceGetPowerUsage, mW / 1000)
``gpu_sm_clock_hz``                   current SM clock, Hz (nvmlDeviceGetClockInfo(SM), MHz)
``gpu_memory_used_bytes``             device memory in use, bytes (all processes)
``gpu_sm_util``                       GPM (Hopper and newer): SM activity 0..1 between the
                                      previous sample and this one
``gpu_sm_occupancy``                  GPM: resident warps / maximum warps, 0..1
``gpu_fp32_util``, ``gpu_fp16_util``  GPM: FP32 / FP16 pipe utilization, 0..1
``gpu_tensor_util``                   GPM: any tensor pipe utilization, 0..1
====================================  =========================================================

A figure a device does not support (NVML answers NOT_SUPPORTED, or GPM is absent: before
Hopper, or in a VM without it) is left out for that device, once: no row, never a zero.
Without a driver there are no GPU rows at all and :attr:`NvmlSampler.status` says why.
"""

from __future__ import annotations

import contextlib
from typing import Any

Row = tuple[int, str, int, float]

# (metric name, pynvml GPM metric id attribute); GPM values are percentages.
GPM_METRICS = (
    ("gpu_sm_util", "NVML_GPM_METRIC_SM_UTIL"),
    ("gpu_sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY"),
    ("gpu_fp32_util", "NVML_GPM_METRIC_FP32_UTIL"),
    ("gpu_fp16_util", "NVML_GPM_METRIC_FP16_UTIL"),
    ("gpu_tensor_util", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
)


def _load_pynvml() -> Any:
    import pynvml

    return pynvml


class _Device:
    def __init__(self, nvml: Any, index: int):
        self.index = index
        self.handle = nvml.nvmlDeviceGetHandleByIndex(index)
        self.unsupported: set[str] = set()  # metrics this device did not answer
        self.gpm_samples: list[Any] = []  # [previous, next] GPM sample buffers
        self.gpm_primed = False
        try:
            if nvml.nvmlGpmQueryDeviceSupport(self.handle).isSupportedDevice:
                self.gpm_samples = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
        except Exception:  # noqa: BLE001 (no GPM: older chip, older driver, a VM)
            self.gpm_samples = []


class NvmlSampler:
    """NVML GPU sampler; ``status`` starts with ``ok`` when NVML answered."""

    def __init__(self, nvml: Any | None = None):
        self.devices: list[_Device] = []
        self.status = "not tried"
        try:
            self.nvml = nvml if nvml is not None else _load_pynvml()
            self.nvml.nvmlInit()
            n = self.nvml.nvmlDeviceGetCount()
            self.devices = [_Device(self.nvml, i) for i in range(n)]
        except Exception as e:  # noqa: BLE001 (any NVML failure means: no GPU metrics)
            self.devices = []
            self.status = f"unavailable: {type(e).__name__}: {e}"
            return
        gpm = [d.index for d in self.devices if d.gpm_samples]
        self.status = f"ok ({len(self.devices)} devices" + (
            f"; GPM on {', '.join(map(str, gpm))})" if gpm else "; no GPM)"
        )

    @property
    def ok(self) -> bool:
        return self.status.startswith("ok")

    def _read(self, d: _Device, metric: str, fn: Any, *args: Any) -> Any:
        if metric in d.unsupported:
            return None
        try:
            return fn(d.handle, *args)
        except Exception:  # noqa: BLE001 (NOT_SUPPORTED and friends: leave the metric out)
            d.unsupported.add(metric)
            return None

    def sample(self, ts: int, out: list[Row]) -> None:
        nv = self.nvml
        for d in self.devices:
            u = self._read(d, "utilization", nv.nvmlDeviceGetUtilizationRates)
            if u is not None:
                out.append((ts, "gpu_util", d.index, u.gpu / 100.0))
                out.append((ts, "gpu_memory_util", d.index, u.memory / 100.0))
            mw = self._read(d, "gpu_power_watts", nv.nvmlDeviceGetPowerUsage)
            if mw is not None:
                out.append((ts, "gpu_power_watts", d.index, mw / 1000.0))
            mhz = self._read(d, "gpu_sm_clock_hz", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM)
            if mhz is not None:
                out.append((ts, "gpu_sm_clock_hz", d.index, mhz * 1e6))
            m = self._read(d, "gpu_memory_used_bytes", nv.nvmlDeviceGetMemoryInfo)
            if m is not None:
                out.append((ts, "gpu_memory_used_bytes", d.index, float(m.used)))
            if d.gpm_samples:
                self._gpm(d, ts, out)

    def _gpm(self, d: _Device, ts: int, out: list[Row]) -> None:
        """GPM metrics over the period between the previous sample and this one."""
        nv = self.nvml
        prev, cur = d.gpm_samples
        try:
            nv.nvmlGpmSampleGet(d.handle, cur)
        except Exception:  # noqa: BLE001
            d.gpm_samples = []
            return
        if d.gpm_primed:
            req = nv.c_nvmlGpmMetricsGet_t()
            req.version = nv.NVML_GPM_METRICS_GET_VERSION
            req.numMetrics = len(GPM_METRICS)
            req.sample1 = prev
            req.sample2 = cur
            for i, (_, attr) in enumerate(GPM_METRICS):
                req.metrics[i].metricId = getattr(nv, attr)
            try:
                nv.nvmlGpmMetricsGet(req)
            except Exception:  # noqa: BLE001
                d.gpm_samples = []
                return
            for i, (name, _) in enumerate(GPM_METRICS):
                if req.metrics[i].nvmlReturn == nv.NVML_SUCCESS:
                    out.append((ts, name, d.index, req.metrics[i].value / 100.0))
        d.gpm_samples = [cur, prev]
        d.gpm_primed = True

    def close(self) -> None:
        """Frees the GPM sample buffers and shuts NVML down (errors at the end: ignored)."""
        for d in self.devices:
            for s in d.gpm_samples:
                with contextlib.suppress(Exception):
                    self.nvml.nvmlGpmSampleFree(s)
            d.gpm_samples = []
        if self.ok:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()


__all__ = ["GPM_METRICS", "NvmlSampler"]
