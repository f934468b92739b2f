"""The real collector (csrc/collector/collector.cpp) driven through the fake CUPTI (csrc/testing):
producer threads write CUpti_ActivityKernel10 records into buffers the collector hands out,
from several threads, at a set rate; periodic flushes, spills, stop, pool exhaustion, a stop
during a flush, SIGTERM/SIGINT, a second start, failed starts. Expected values come from the
fake (the correlation ids it wrote or dropped), the spool is read back with the Python
reader. The same scenarios run under ASan/UBSan and TSan with `make sanitize`
(csrc/testing/seam_test.cpp)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tbdtrace import _native_testing as nt
from tbdtrace import trace
from tbdtrace.collector import merge, spool
from tbdtrace.commands import capture as capture_cmd

KIB = 1024
ROOT = Path(__file__).resolve().parents[2]


def start(fake: nt.FakeCupti, path: Path, count: int = 8, flush_ms: int = 10) -> None:
    """A fixed pool of ``count`` buffers (buffer_max = count)."""
    ok, status, msg = nt.start(
        fake, str(path), ["kernel"], 64 * KIB, count, flush_ms, buffer_max=count
    )
    assert ok, (status, msg)


def spool_ids(sp: spool.Spool) -> np.ndarray:
    cols = spool.columns(sp, "kernels")
    return np.sort(cols["correlation_id"].to_numpy()) if cols else np.array([], dtype=np.int64)


def check_complete(fake: nt.FakeCupti, path: str) -> spool.Spool:
    """Every record the fake wrote is in the spool once; dropped ones are counted."""
    sp = spool.read(path)
    st = fake.stats()
    assert sp.meta is not None and sp.truncated_bytes == 0
    np.testing.assert_array_equal(spool_ids(sp), np.sort(fake.written_ids().astype(np.int64)))
    assert st["written"] + st["dropped"] == st["produced"]
    assert len(fake.dropped_ids()) == st["dropped"]
    assert sp.meta["records"] == st["written"]
    assert sum(sp.meta["dropped_records"].values()) == st["dropped"]
    assert sp.meta["denied_buffer_requests"] == st["denied"]
    assert sp.meta["spool_errors"] == 0 and sp.meta["spool_lost_rows"] == 0
    return sp


def test_records_from_several_threads_with_periodic_flush_and_spill(tmp_path: Path) -> None:
    fake = nt.FakeCupti(threads=3, records_per_thread=400, rate_per_s=2000.0)  # 0.2 s
    start(fake, tmp_path / "a.tbds")
    assert nt.running()
    fake.start_producers()
    fake.join_producers()
    path = nt.stop()
    assert path == str(tmp_path / "a.tbds") and not nt.running()
    sp = check_complete(fake, path)
    st = fake.stats()
    assert st["dropped"] == 0 and st["written"] == 1200
    # Every 10 ms for at least 0.2 s (less only if the machine starves the flush thread),
    # then the stop's forced flush.
    assert st["flushes"] >= 8 and st["forced_flushes"] == 1
    assert len(sp.tables["kernels"]) >= 3  # spilled every period, not only at stop
    assert st["subscribes"] == st["unsubscribes"] == 1 and st["enables"] == st["disables"]


def test_burst_at_full_speed(tmp_path: Path) -> None:
    fake = nt.FakeCupti(threads=4, records_per_thread=20000)
    start(fake, tmp_path / "b.tbds", count=16, flush_ms=2)
    fake.start_producers()
    fake.join_producers()
    check_complete(fake, nt.stop())


def test_pool_exhaustion_is_counted(tmp_path: Path) -> None:
    # Each producer keeps a buffer while it fills it: a pool of 2 must refuse some of 4.
    fake = nt.FakeCupti(threads=4, records_per_thread=3000)
    start(fake, tmp_path / "c.tbds", count=2, flush_ms=1000)
    fake.start_producers()
    fake.join_producers()
    check_complete(fake, nt.stop())
    st = fake.stats()
    assert st["denied"] > 0 and st["dropped"] > 0


def test_stop_while_a_flush_is_running(tmp_path: Path) -> None:
    fake = nt.FakeCupti(
        threads=2, records_per_thread=100000, rate_per_s=20000.0, flush_delay_us=30000
    )
    start(fake, tmp_path / "d.tbds", flush_ms=5)
    fake.start_producers()
    assert fake.wait_in_flush(5000)
    path = nt.stop()  # the flush thread is inside flush_all
    fake.join_producers()  # later records find no session and are dropped
    sp = spool.read(path)
    assert sp.meta is not None and sp.truncated_bytes == 0
    ids = spool_ids(sp)
    assert len(ids) > 0 and len(np.unique(ids)) == len(ids)
    assert np.isin(ids, fake.written_ids()).all()
    assert sp.meta["records"] == len(ids)


def test_second_start_is_refused_and_restart_works(tmp_path: Path) -> None:
    fake, other = nt.FakeCupti(), nt.FakeCupti()
    start(fake, tmp_path / "e.tbds")
    ok, status, msg = nt.start(other, str(tmp_path / "f.tbds"), ["kernel"], 64 * KIB, 2, 10)
    assert not ok and status == "error" and "already running" in msg
    assert other.stats()["subscribes"] == 0 and not (tmp_path / "f.tbds").exists()
    assert nt.stop() == str(tmp_path / "e.tbds")
    assert nt.stop() == ""  # idle
    start(other, tmp_path / "f.tbds")
    assert nt.stop() == str(tmp_path / "f.tbds")


def test_failed_start_keeps_buffers_cupti_holds(tmp_path: Path) -> None:
    # The second enable fails as without a driver (999) after CUPTI took a buffer it keeps.
    fake = nt.FakeCupti(enable_result=999, enable_ok_count=1, hold_buffer=True)
    ok, status, msg = nt.start(
        fake, str(tmp_path / "g.tbds"), ["kernel", "memcpy"], 64 * KIB, 2, 10
    )
    assert not ok and status == "no_device" and "CUPTI_ERROR_UNKNOWN" in msg
    assert not nt.running() and not (tmp_path / "g.tbds").exists()
    st = fake.stats()
    assert st["forced_flushes"] == 1 and st["unsubscribes"] == 1 and st["disables"] == 1
    del fake  # writes into the kept buffer: a use after free if the pool had been freed


def test_another_cupti_subscriber_is_named(tmp_path: Path) -> None:
    fake = nt.FakeCupti(subscribe_result=39, old_subscriber="Nsight Systems")
    ok, status, msg = nt.start(fake, str(tmp_path / "h.tbds"), ["kernel"], 64 * KIB, 2, 10)
    assert not ok and status == "other_tool" and "Nsight Systems" in msg


CHILD = """
import signal, sys, time
from tbdtrace import _native_testing as nt
signal.signal(signal.{sig}, signal.SIG_DFL)  # the collector takes over default actions only
fake = nt.FakeCupti(threads=2, records_per_thread=10**6, rate_per_s=5000.0)
ok, status, msg = nt.start(fake, sys.argv[1], ["kernel"], 65536, 8, 20)
assert ok, msg
nt.install_signal_handlers()
fake.start_producers()
print("capturing", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_signal_during_capture_stops_cleanly_then_dies(tmp_path: Path, sig: str) -> None:
    path = tmp_path / "s.tbds"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(sig=sig), str(path)], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"capturing"
    proc.send_signal(getattr(signal, sig))
    assert proc.wait(timeout=30) == -getattr(signal, sig)  # re-raised after the stop
    proc.stdout.close()
    sp = spool.read(path)
    assert sp.meta is not None and sp.truncated_bytes == 0
    ids = spool_ids(sp)
    assert len(ids) > 0 and len(np.unique(ids)) == len(ids) and sp.meta["records"] == len(ids)


SPOOL_LIMIT_CHILD = """
import resource, signal, sys
from tbdtrace import _native_testing as nt
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the limit: write() fails with EFBIG
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
fake = nt.FakeCupti(threads=2, records_per_thread=5000)
ok, status, msg = nt.start(fake, sys.argv[1], ["kernel"], 65536, 8, 100000)
fake.start_producers()
fake.join_producers()
nt.stop()
print(fake.stats()["written"])
"""


def test_spool_write_errors_are_recorded_and_surfaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 10,000 kernel rows (~1 MB of columns) cannot fit under a 64 KiB file size limit; the
    # meta chunk (~1 KB) does, because the torn chunk is cut off.
    path = tmp_path / "full.tbds"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [sys.executable, "-c", SPOOL_LIMIT_CHILD, str(path), str(64 * KIB)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if "cannot write the spool" in ln]
    assert len(warnings) == 1 and "File too large" in warnings[0]
    sp = spool.read(path)
    assert sp.meta is not None and sp.truncated_bytes == 0  # no torn chunk left behind
    assert sp.meta["spool_errors"] >= 1 and "File too large" in sp.meta["spool_error"]
    written = int(r.stdout)
    kept = len(spool_ids(sp))
    assert kept + sp.meta["spool_lost_rows"] == written and kept < written
    # capture: a warning line and exit status 3 when the command itself succeeded.
    tables, meta = merge.merge([sp])
    assert meta["extra"]["spool_errors"] == sp.meta["spool_errors"]
    written = trace.open(trace.write(tmp_path / "trace", tables, meta)).meta
    assert capture_cmd._incomplete_status(written, 0) == capture_cmd.INCOMPLETE_EXIT == 3
    assert capture_cmd._incomplete_status(written, 7) == 7  # the command's failure comes first
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("tbdtrace capture: warning: the trace is incomplete: ")
    assert "rows lost" in line and "File too large" in line


def test_crc_matches_zlib_for_every_length_and_offset() -> None:
    import random
    import zlib

    rnd = random.Random(7)
    data = rnd.randbytes(5000)
    for n in [*range(0, 200), 1023, 1024, 1025, 4096, 4999]:
        off = rnd.randrange(0, 8)
        seed = rnd.randrange(0, 2**32)
        chunk = data[off : off + n]
        assert nt.crc32(chunk, seed) == zlib.crc32(chunk, seed), (n, off)


def test_capture_window_pause_and_resume(tmp_path: Path) -> None:
    """Capture windows (collector_pause/resume): started paused, nothing recorded until
    resumed; a pause turns the kernel kind off (the device kind stays), flushes, and the
    flush thread spills at once; every record written in the windows is in the spool."""
    import time

    fake = nt.FakeCupti(threads=2, records_per_thread=600, rate_per_s=2000.0)  # 0.3 s
    ok, status, msg = nt.start(
        fake, str(tmp_path / "w.tbds"), ["kernel", "device"], 64 * KIB, 8, 1000, start_paused=True
    )
    assert ok and msg == "paused", (status, msg)
    assert nt.paused()
    st = fake.stats()
    assert (st["enables"], st["disables"]) == (2, 1)  # both on, then kernel off
    fake.start_producers()
    time.sleep(0.06)
    assert fake.stats()["produced"] == 0
    assert nt.resume() and not nt.resume() and not nt.paused()
    time.sleep(0.08)
    assert nt.pause() and not nt.pause()
    at_pause = fake.stats()
    assert at_pause["produced"] > 0 and at_pause["forced_flushes"] == 2  # start, pause
    # The window's records reach the spool file at the pause, not at the next period (1 s).
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline and not spool_ids(spool.read(tmp_path / "w.tbds")).size:
        time.sleep(0.01)
    assert spool_ids(spool.read(tmp_path / "w.tbds")).size == at_pause["written"]
    time.sleep(0.06)
    assert fake.stats()["produced"] == at_pause["produced"]  # paused: nothing recorded
    assert nt.resume()
    fake.join_producers()
    sp = check_complete(fake, nt.stop())
    st = fake.stats()
    assert at_pause["produced"] < st["produced"] < 2 * 600  # the pauses left gaps
    assert len(spool_ids(sp)) == st["written"]
    assert not nt.pause() and not nt.resume()  # no session
