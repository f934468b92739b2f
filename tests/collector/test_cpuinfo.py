"""The capture host's CPU description (meta.extra.cpu) from /proc/cpuinfo text."""

from __future__ import annotations

from pathlib import Path

from tbdtrace.analysis.engine.peaks import cpu_fp32_peak
from tbdtrace.collector.cpuinfo import describe

# One package reporting 2 cores and 2 siblings: no SMT.
CPUINFO = """processor\t: 0
model name\t: Test CPU
physical id\t: 0
core id\t: 0
siblings\t: 2
cpu cores\t: 2
cpu MHz\t\t: 2500.000
flags\t\t: fpu sse2 avx avx2 fma

processor\t: 1
model name\t: Test CPU
physical id\t: 0
core id\t: 1
siblings\t: 2
cpu cores\t: 2
cpu MHz\t\t: 2500.000
flags\t\t: fpu sse2 avx avx2 fma
"""


def test_describe_reads_model_flags_and_clock(tmp_path: Path) -> None:
    f = tmp_path / "cpuinfo"
    f.write_text(CPUINFO)
    d = describe(f, sysfs=tmp_path / "nosys")
    assert d["model"] == "Test CPU"
    assert {"avx2", "fma"} <= set(d["flags"])
    assert d["mhz"] == 2500.0 and d["mhz_source"] == "/proc/cpuinfo cpu MHz"
    assert d["cores"] >= 1


def test_cpufreq_max_wins_over_current_clock(tmp_path: Path) -> None:
    f = tmp_path / "cpuinfo"
    f.write_text(CPUINFO)
    (tmp_path / "sys" / "cpu0" / "cpufreq").mkdir(parents=True)
    (tmp_path / "sys" / "cpu0" / "cpufreq" / "cpuinfo_max_freq").write_text("3000000\n")
    assert describe(f, sysfs=tmp_path / "sys")["mhz"] == 3000.0


def test_fp32_peak_from_the_description() -> None:
    # 2 cores x 8 lanes (AVX2) x 2 FMA units x 2 flops x 2.5 GHz = 160 GFLOP/s.
    peak, why = cpu_fp32_peak(
        {"extra": {"cpu": {"cores": 2, "mhz": 2500.0, "flags": ["avx2", "fma"]}}}
    )
    assert peak == 2 * 8 * 2 * 2 * 2.5e9 and "meta.extra.cpu" in why


def test_this_machine_is_described() -> None:
    d = describe()
    assert d["cores"] >= 1 and d["flags"] and d["mhz"] > 0
