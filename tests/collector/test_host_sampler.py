"""Host sampler on real child processes: a busy loop uses one core, a sleep none."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tbdtrace import trace
from tbdtrace.collector.host_sampler import HostSampler, SamplerConfig

# The busy child reports its own CPU share (process time / wall time), an independent
# figure: on an idle machine it is ~1.0; on a loaded one the scheduler gives it less.
BUSY = (
    "import time\nw=time.time(); c=time.process_time(); t=w+{s}\n"
    "while time.time()<t: pass\n"
    "print((time.process_time()-c)/(time.time()-w))\n"
)
IDLE = "import time\ntime.sleep({s})\n"


def _sample_child(code: str, seconds: float = 1.5) -> dict[str, list[object]]:
    child = subprocess.Popen(
        [sys.executable, "-c", code.format(s=seconds)], stdout=subprocess.PIPE, text=True
    )
    sampler = HostSampler(SamplerConfig(rate_hz=20.0), pid=child.pid)
    sampler.start()
    time.sleep(seconds * 0.8)
    cols = sampler.stop()
    out, _ = child.communicate()
    if out.strip():
        cols["child_share"] = [float(out)]
    return cols


def _values(cols: dict[str, list[object]], metric: str, index: int = -1) -> list[float]:
    return [
        float(v)
        for m, i, v in zip(cols["metric"], cols["index"], cols["value"], strict=True)
        if m == metric and i == index
    ]


def test_busy_loop_child_uses_one_core() -> None:
    cols = _sample_child(BUSY)
    cores = _values(cols, "proc_cpu_cores")
    assert len(cores) >= 15  # 20 Hz for 1.2 s
    # Skip the first interval (interpreter start-up); the loop itself is pure CPU.
    mean = sum(cores[2:]) / len(cores[2:])
    share = float(cols["child_share"][0])  # type: ignore[arg-type]
    # the loop really ran (one core, or what a loaded machine gives: under `make test`'s
    # parallel workers and other jobs, about a tenth of a core was seen)
    assert share > 0.05
    assert abs(mean - share) < 0.15 and mean < 1.1
    # System-wide: at least the child's core is busy (others may run on this machine).
    ncpu = len(
        {
            i
            for m, i in zip(cols["metric"], cols["index"], strict=True)
            if m == "cpu_util" and i >= 0
        }
    )
    allc = _values(cols, "cpu_util")
    assert sum(allc[2:]) / len(allc[2:]) > 0.8 * share / ncpu


def test_sleeping_child_uses_no_cpu() -> None:
    cols = _sample_child(IDLE)
    cores = _values(cols, "proc_cpu_cores")
    assert max(cores[3:]) < 0.05
    # Skip start-up: until exec, the child is a fork of this (large) test process.
    rss = _values(cols, "rss_bytes")[3:]
    assert rss and all(5e6 < r < 2e8 for r in rss)  # a bare interpreter: a few MB


def test_rate_and_table_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    s = HostSampler(SamplerConfig(rate_hz=50.0, gpu=True))
    s.start()
    time.sleep(0.5)
    cols = s.stop()
    ts = sorted(set(cols["ts_ns"]))
    assert 15 <= len(ts) <= 30  # 50 Hz for 0.5 s, plus the first and last samples
    # No NVIDIA driver here: GPU metrics are skipped and the reason kept.
    if not s.nvml_status.startswith("ok"):
        assert "gpu_util" not in cols["metric"] and s.nvml_status.startswith("unavailable")
    out = trace.write(tmp_path / "t", {"host_samples": cols}, {"source": "test"})
    import tbdtrace

    t = tbdtrace.open(out).table("host_samples")
    assert t.num_rows == len(cols["ts_ns"])
    with pytest.raises(ValueError):
        HostSampler(SamplerConfig(rate_hz=0))


def test_the_process_tree_is_scanned_again_only_every_few_seconds() -> None:
    """A recursive scan of every process costs milliseconds: the tree is cached for
    SCAN_S seconds, and a process started meanwhile joins at the next scan."""
    from tbdtrace.collector import host_sampler

    hs = HostSampler(SamplerConfig(gpu=False))
    first = [p.pid for p in hs._tree()]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert [p.pid for p in hs._tree()] == first  # within SCAN_S: the cached tree
        hs._scanned -= host_sampler.SCAN_S  # as if SCAN_S seconds had passed
        assert child.pid in [p.pid for p in hs._tree()]
    finally:
        child.kill()
        child.wait()
