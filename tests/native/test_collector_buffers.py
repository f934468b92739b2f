"""The collector's activity buffers through the fake CUPTI (csrc/testing/fake_cupti.*):
handed to CUPTI zeroed and already faulted in (zeroing and first touch on collector
threads), with CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER and
CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER set before the callbacks are registered, and
a pool that grows with the producing threads. The fake checks every buffer it is handed
(each byte zero; every page resident, by mincore). The same scenario runs under ASan/UBSan
and TSan (`make sanitize`, scenario `buffers`)."""

from __future__ import annotations

from pathlib import Path

from tbdtrace import _native_testing as nt
from tbdtrace.collector import spool

from .cupti_headers import enum_values

KIB = 1024


def _attr_ids() -> dict[str, int]:
    return enum_values("cupti_activity.h", "CUpti_ActivityAttribute")


def _run(tmp_path: Path, threads: int, count: int, buffer_max: int) -> tuple[nt.FakeCupti, dict]:
    fake = nt.FakeCupti(threads=threads, records_per_thread=3000, rate_per_s=20000.0)
    ok, status, msg = nt.start(
        fake, str(tmp_path / "b.tbds"), ["kernel"], 64 * KIB, count, 5, buffer_max=buffer_max
    )
    assert ok, (status, msg)
    fake.start_producers()
    fake.join_producers()
    sp = spool.read(nt.stop())
    assert sp.meta is not None
    st = fake.stats()
    assert sp.meta["records"] == st["written"]
    return fake, sp.meta


def test_buffers_are_zeroed_and_faulted_in_before_cupti_gets_them(tmp_path: Path) -> None:
    fake, meta = _run(tmp_path, threads=6, count=4, buffer_max=64)
    st = fake.stats()
    assert st["written"] > 0
    # Every hand-out was checked (one per completed buffer at least).
    assert st["dirty_buffers"] == 0 and st["cold_buffers"] == 0
    ids = _attr_ids()
    calls = fake.calls()
    register = next(i for i, c in enumerate(calls) if c[0] == "register")
    attrs = {c[1]: c[2] for c in calls[:register] if c[0] == "attr"}
    assert attrs == {
        ids["CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER"]: 1,
        ids["CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER"]: 1,
    }
    assert not [c for c in calls[register:] if c[0] == "attr"]
    assert meta["warnings"] == []


def test_pool_grows_to_a_spare_per_producing_thread(tmp_path: Path) -> None:
    # 12 threads each hold a buffer while filling it: 2 buffers cannot serve them, so the
    # flush thread adds buffers (zeroed there) until a spare waits for each held one.
    fake, meta = _run(tmp_path, threads=12, count=2, buffer_max=64)
    assert meta["max_buffers_held"] >= 2
    assert meta["buffers_allocated"] >= meta["max_buffers_held"] + 1
    assert meta["buffers_allocated"] <= 64
    assert fake.stats()["dirty_buffers"] == 0 and fake.stats()["cold_buffers"] == 0


def test_a_fixed_pool_does_not_grow(tmp_path: Path) -> None:
    fake, meta = _run(tmp_path, threads=12, count=2, buffer_max=2)
    assert meta["buffers_allocated"] == 2
    assert fake.stats()["denied"] > 0  # refused, counted, never allocated on demand
