"""The import in bounded memory (importers/kineto/stream.py, importers/spool.py) writes the
tables the in-memory import writes, row for row.

The batches, runs and blocks are made tiny here (a few thousand rows), so every fixture
goes through many batches per file, many runs per table and many blocks per run: what
a multi-gigabyte file does at full size. The in-memory import is the reference (its own
tables are checked against tests/rawkineto.py, an independent reader of the raw JSON, in
test_kineto_parser.py); both are written with trace.write and read back with pyarrow.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tbdtrace import importers, trace
from tbdtrace.importers import nsys, spool
from tbdtrace.importers.kineto import feed, stream
from tests.conftest import KINETO_TRACES, NSYS, fixture

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "BATCH_ROWS", 3000)
    monkeypatch.setattr(feed, "BATCH_ROWS", 3000)
    monkeypatch.setattr(spool, "BLOCK_ROWS", 500)
    monkeypatch.setattr(nsys, "BATCH_ROWS", 300)


def _written(tmp: Path, files: list[Path], streamed: bool, fmt: str | None = None) -> Path:
    out = tmp / ("streamed" if streamed else "in-memory")
    if streamed:
        work = tmp / "spool"
        work.mkdir()
        tables, meta, _ = importers.begin_import(files, fmt, streamed=True).streamed(work)
        assert list(work.iterdir()) and all(  # the spool held runs of several blocks
            p.is_dir() or p.suffix == ".arrows" for p in work.rglob("*")
        )
    else:
        tables, meta = importers.import_files(files, fmt)
    return trace.write(out, tables, meta)


def _same_traces(a: Path, b: Path) -> None:
    names = sorted(p.name for p in a.glob("*.parquet"))
    assert names == sorted(p.name for p in b.glob("*.parquet"))
    for n in names:
        ta, tb = pq.read_table(a / n), pq.read_table(b / n)
        assert ta.schema == tb.schema, n
        diff = [c for c in ta.column_names if not ta.column(c).equals(tb.column(c))]
        assert not diff, f"{n}: columns {diff} differ"
    assert json.loads((a / "meta.json").read_text()) == json.loads((b / "meta.json").read_text())


@pytest.mark.parametrize("path", KINETO_TRACES, ids=lambda p: p.name)
def test_every_fixture_streams_to_the_same_tables(path: Path, tmp_path: Path, tiny: None) -> None:
    _same_traces(_written(tmp_path, [path], False), _written(tmp_path, [path], True))


def test_several_files_with_late_time_bases(tmp_path: Path, tiny: None) -> None:
    # nccl_data and rank-34 write baseTimeNanoseconds after their events; sampled_rank-0
    # has none: runs of different files are ordered by their final times at the merge.
    files = [
        fixture("kineto/hta/sampled_rank-0.json.gz"),
        fixture("kineto/hta/nccl_data.json.gz"),
        fixture("kineto/hta/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"),
    ]
    imp = stream.spool_files(files, _mkdir(tmp_path / "probe"))
    assert max(len(sp.runs) for sp in imp.spool.tables.values()) > 3
    _same_traces(_written(tmp_path, files, False), _written(tmp_path, files, True))


def _mkdir(p: Path) -> Path:
    p.mkdir()
    return p


def _kineto(tmp: Path, name: str, events: list[dict], **top: object) -> Path:
    f = tmp / name
    f.write_bytes(gzip.compress(json.dumps({"traceEvents": events, **top}).encode()))  # keys last
    return f


def _kernels(n: int, t0: float = 1.0) -> list[dict]:
    out = []
    for i in range(n):
        args = {"stream": 7 + i % 3, "correlation": i, "device": 0}
        out.append({"ph": "X", "cat": "kernel", "name": f"k{i % 11}", "pid": 0, "tid": 7,
                    "ts": t0 + (i % 97) * 3.5 + i, "dur": 1 + i % 5, "args": args})  # fmt: skip
    return out


def test_a_base_that_overflows_is_parsed_again_as_in_memory(tmp_path: Path, tiny: None) -> None:
    # The base comes last; some times plus it leave int64: those events are skipped as
    # time_out_of_range by a second parse with the base given to the parser.
    ev = _kernels(5000)
    ev.append({**ev[0], "ts": 2e15, "args": {"correlation": 99999}})  # 2e18 ns
    f = _kineto(tmp_path, "big_base.json.gz", ev, baseTimeNanoseconds=(1 << 63) - 10**18)
    a, b = _written(tmp_path, [f], False), _written(tmp_path, [f], True)
    _same_traces(a, b)
    assert json.loads((b / "meta.json").read_text())["skipped_events"] == {"time_out_of_range": 1}


def test_a_repaired_file_streams_as_in_memory(tmp_path: Path, tiny: None) -> None:
    # Old Kineto wrote unescaped quotes inside names: repaired, then parsed again.
    ev = _kernels(4000)
    text = json.dumps({"traceEvents": ev}).replace('"name": "k3"', '"name": "k"3""', 2)
    f = tmp_path / "quotes.json"
    f.write_text(text)
    a, b = _written(tmp_path, [f], False), _written(tmp_path, [f], True)
    _same_traces(a, b)
    names = pq.read_table(b / "kernels.parquet").column("name").to_pylist()
    assert 'k"3"' in names


def test_nsys_streams_to_the_same_tables(tmp_path: Path, tiny: None) -> None:
    files = sorted(NSYS.glob("*.sqlite"))
    if not files:
        pytest.skip(f"no Nsight Systems fixtures in {NSYS}")
    _same_traces(_written(tmp_path, files, False, "nsys"), _written(tmp_path, files, True, "nsys"))


def test_report_of_a_big_file_goes_through_a_removed_temporary_trace(tmp_path: Path) -> None:
    """report FILE over the size rule (lowered to 0 here) imports into a temporary trace
    directory, reports exactly what the in-memory import reports, and removes it."""
    src = fixture("kineto/hta/nccl_data.json.gz")
    code = (
        "import sys, tempfile; tempfile.tempdir = sys.argv[1]; "
        "from tbdtrace.commands import _open; _open.STREAM_GZIP_BYTES = int(sys.argv[2]); "
        "from tbdtrace import cli; sys.argv = ['tbdtrace', *sys.argv[3:]]; cli.run()"
    )
    outs = []
    for limit in (0, 1 << 40):
        tmp = _mkdir(tmp_path / f"tmp{limit}")
        args = ["report", str(src), "--format", "json", "--window", "all"]
        r = subprocess.run(
            [sys.executable, "-c", code, str(tmp), str(limit), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        assert list(tmp.iterdir()) == []  # nothing left behind
        outs.append(r.stdout)
    assert outs[0] == outs[1]
    assert json.loads(outs[0])["trace"]["path"] == str(src)


def test_import_of_one_small_file_is_written_from_memory_as_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tbdtrace import` of one file whose events come in one batch writes it from memory,
    without the spool (refused here), the same tables and meta as the streamed import."""
    from tbdtrace import cli

    src = fixture("kineto/hta/nccl_data.json.gz")
    streamed = _written(_mkdir(tmp_path / "s"), [src], True)

    def no_spool(*_: object, **__: object) -> None:
        raise AssertionError("the spool was used")

    monkeypatch.setattr(stream, "spool_files", no_spool)
    out = tmp_path / "cli"
    assert cli.main(["import", str(src), "--out", str(out)]) == 0
    _same_traces(streamed, out)


def test_only_the_first_batch_grows_its_big_columns_as_mappings(tmp_path: Path) -> None:
    # The first batch's columns past the core's mapping size are mappings of their own
    # (grown without copies); later batches grow in the heap, which holds the pages the
    # batches before them freed (feed._run). Read from /proc/self/maps: a mapping of its
    # own starts a page of an anonymous region, where no malloc'd block does.
    from tbdtrace import _native_testing as nt
    from tests.native.test_column_blocks import own_mapping

    n, batch = 330_000, 150_000  # batches of ~150k kernels: int64 columns of 2 MiB
    assert batch * 8 > nt.column_map_bytes
    lines = ",\n".join(
        f'{{"ph":"X","cat":"kernel","name":"k{i % 5}","pid":0,"tid":7,"ts":{i}.5,"dur":1,'
        f'"args":{{"stream":7,"correlation":{i},"device":0}}}}'
        for i in range(n)
    )
    f = tmp_path / "kernels.json"
    f.write_text('{"traceEvents":[\n' + lines + "\n]}")
    job = feed.start([f], batch_rows=batch)
    starts, mapped = [], []
    while (item := job.next_batch()) is not None:
        cols = item[1]["tables"]["kernels"]
        starts.append(cols["start_ns"][0])
        mapped.append(own_mapping(cols["start_ns"][0]))
    assert len(starts) == 3 and mapped == [True, False, False]
    got = np.concatenate(starts)
    np.testing.assert_array_equal(got, np.arange(n, dtype=np.int64) * 1000 + 500)
