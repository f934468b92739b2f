"""What makes ``report FILE`` fast must not change what it says.

* analysis commands never import pandas, and ``Trace.df`` still works after them;
* the background parse gives the same tables as the foreground one, including a file the
  C++ parser stops on and the importer repairs (then parsed again in the foreground);
* the grouping helpers agree with a plain Python dictionary;
* the memory pass's per-device peaks agree with a pandas groupby.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import tbdtrace
from tbdtrace import _pandas_gate, importers
from tbdtrace.analysis.engine import memory_replay as memory
from tbdtrace.analysis.engine.grouping import dense_codes, group_sum
from tbdtrace.trace import from_tables
from tests.conftest import KINETO

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = KINETO / "hta" / "nccl_data.json.gz"


@pytest.mark.parametrize("cmd", [["report"], ["report", "--format", "json"], ["hotspots"]])
def test_analysis_commands_do_not_import_pandas(cmd: list[str]) -> None:
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tbdtrace", *cmd, str(FIXTURE)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    imported = {
        ln.rsplit("|", 1)[-1].strip()
        for ln in r.stderr.splitlines()
        if ln.startswith("import time:")
    }
    assert "numpy" in imported and "pyarrow" in imported  # the timing covers the analysis
    # A refused `import pandas` is listed too (microseconds, nothing under it): pandas
    # itself never loads.
    assert not any(m.startswith("pandas.") for m in imported), sorted(imported)
    assert "rich" not in imported
    assert r.stdout.strip()


def test_trace_df_opens_the_gate() -> None:
    code = (
        "from tbdtrace import _pandas_gate, importers\n"
        "from tbdtrace.trace import from_tables\n"
        "_pandas_gate.close()\n"
        "try:\n    import pandas\nexcept ImportError:\n    print('refused')\n"
        f"t = from_tables(*importers.import_files([{str(FIXTURE)!r}]))\n"
        "df = t.df('kernels')\n"
        "print(type(df).__name__, len(df))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.split()
    assert lines[0] == "refused" and lines[1] == "DataFrame" and int(lines[2]) > 0


def _tables(pending: importers.PendingImport) -> dict[str, pa.Table]:
    tables, _meta = pending.result()
    return {n: pa.table(c) if not isinstance(c, pa.Table) else c for n, c in tables.items()}


@pytest.mark.parametrize(
    "path",
    [FIXTURE, KINETO / "kineto_tb_plugin" / "worker0.1623143089861.pt.trace.json.gz"],
    ids=lambda p: p.name,
)
def test_background_parse_equals_foreground(path: Path) -> None:
    fg = _tables(importers.begin_import([path], background=False))
    pending = importers.begin_import([path])
    assert pending.job is not None  # the parse really ran on the background thread
    bg = _tables(pending)
    assert fg.keys() == bg.keys()
    for name in fg:
        assert fg[name].equals(bg[name]), name


def test_background_parse_of_a_repaired_file(tmp_path: Path) -> None:
    bad = tmp_path / "trace.json"
    # An unescaped quote inside a name: the parser stops, repair.py re-escapes it.
    bad.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "a"b", "ts": 1, '
        '"dur": 2, "pid": 0, "tid": 7, "args": {"device": 0}}]}'
    )
    fg = _tables(importers.begin_import([bad], background=False))
    bg = _tables(importers.begin_import([bad]))
    assert fg.keys() == bg.keys() and all(fg[n].equals(bg[n]) for n in fg)
    assert fg["kernels"].num_rows == 1
    assert fg["kernels"].column("name").to_pylist() == ['a"b']


def test_capture_process_does_not_import_pandas(tmp_path: Path) -> None:
    """The capture command's own process converts the profile without pandas; the
    program it captures keeps its imports (torch here)."""
    prog = "import torch; print(int((torch.ones(3) * 2).sum()))"
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tbdtrace", "capture", "--backend", "torch"]
        + ["-o", str(tmp_path / "t"), "--", sys.executable, "-c", prog],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "6" in r.stdout.split()  # the program ran
    imported = {
        ln.rsplit("|", 1)[-1].strip()
        for ln in r.stderr.splitlines()
        if ln.startswith("import time:")
    }
    assert "pyarrow" in imported  # the timing covers the conversion to tables
    assert not any(m.startswith("pandas.") for m in imported), sorted(imported)
    assert tbdtrace.open(tmp_path / "t").num_rows("ops") > 0


def test_dense_codes_and_group_sum_match_a_dictionary() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(-1, 4, 5000)
    b = rng.integers(0, 1 << 62, 7, dtype=np.int64)[rng.integers(0, 7, 5000)]  # wide keys
    v = rng.integers(0, 10**9, 5000)
    code, vals = dense_codes(b)
    assert np.array_equal(vals[code], b)
    first_seen = list(dict.fromkeys(b.tolist()))
    assert vals.tolist() == first_seen
    ga, gb, gs, gc = group_sum(a, b, v)
    want_s: dict[tuple[int, int], int] = defaultdict(int)
    want_c: dict[tuple[int, int], int] = defaultdict(int)
    for x, y, z in zip(a.tolist(), b.tolist(), v.tolist(), strict=True):
        want_s[(x, y)] += z
        want_c[(x, y)] += 1
    got = {(int(x), int(y)): (int(s), int(c)) for x, y, s, c in zip(ga, gb, gs, gc, strict=True)}
    assert got == {k: (want_s[k], want_c[k]) for k in want_s}


def test_memory_device_peaks_match_pandas() -> None:
    pytest.importorskip("pandas")
    _pandas_gate.open_()
    rng = np.random.default_rng(5)
    n = 400
    rows = {
        "ts_ns": np.arange(n, dtype=np.int64) * 10,
        "action": ["alloc"] * n,
        "level": rng.choice(["allocated", "reserved"], n).tolist(),
        "bytes": rng.integers(1, 1000, n).tolist(),
        "address": np.arange(n).tolist(),
        "device_type": rng.choice(["cuda", "cpu"], n).tolist(),
        "device_id": rng.integers(0, 3, n).tolist(),
        "rank": [None if r < 0 else int(r) for r in rng.integers(-1, 2, n)],
        "pid": rng.integers(1, 3, n).tolist(),
    }
    tr = from_tables({"memory": rows}, {"source": "test"}, Path("mem"))
    tl = memory.timeline(tr)
    r = memory.replay(memory.of(tr))  # the peaks come from the replay's events
    got = memory._devices(r.blocks, r.events)
    df = tl.to_pandas()
    for c in ("level", "device_type"):  # plain strings: groupby sorts them by value
        df[c] = df[c].astype(object)
    want = []
    keys = ["level", "device_type", "device_id", "rank", "pid"]
    for key, g in df.groupby(keys, dropna=False, sort=True):
        i = int(np.argmax(g["device_total_bytes"].to_numpy()))
        k = [None if (isinstance(x, float) and x != x) or x is None else x for x in key]
        want.append(
            {
                "level": k[0],
                "device_type": k[1],
                "device_id": None if k[2] is None else int(k[2]),
                "rank": None if k[3] is None else int(k[3]),
                "pid": None if k[4] is None else int(k[4]),
                "peak_bytes": int(g["device_total_bytes"].iloc[i]),
                "peak_ts_ns": int(g["ts_ns"].iloc[i]),
            }
        )
    assert got == want


def test_hotspots_command_offers_the_pass_groupings() -> None:
    from tbdtrace.analysis.passes import hotspots as pas
    from tbdtrace.commands import hotspots as cmd

    assert cmd.BY == pas.BY


@pytest.mark.parametrize("case", ["dense_unsorted", "duplicates", "nulls", "sparse", "sorted"])
def test_join_sorted_finds_the_first_equal_id(case: str) -> None:
    from tbdtrace.analysis.engine.joins import NULL_ID, join_sorted

    rng = np.random.default_rng(11)
    b = np.arange(1, 5001, dtype=np.int64)
    if case != "sorted":
        rng.shuffle(b)
    if case == "duplicates":
        b[rng.integers(0, b.size, 300)] = rng.integers(1, 100, 300)
    if case == "nulls":
        b[rng.integers(0, b.size, 50)] = NULL_ID
    if case == "sparse":
        b = b * 1000
    a = np.concatenate(
        [rng.choice(b, 4000), rng.integers(-5, 6_000_000, 1000), np.full(10, NULL_ID)]
    ).astype(np.int64)
    first: dict[int, int] = {}
    for i, v in enumerate(b.tolist()):
        if v != NULL_ID:
            first.setdefault(v, i)
    want = np.array([first.get(v, -1) if v != NULL_ID else -1 for v in a.tolist()])
    assert np.array_equal(join_sorted(a, b), want)
