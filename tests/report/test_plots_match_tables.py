"""Every plot of the HTML page and of the notebook draws the numbers of its table.

For every fixture (Kineto files through the fixture helper, the Nsight Systems exports,
and HTA's two sampled ranks imported as one trace for the rank and skew plots), the report
document is built once, with the opt-in roofline and critical-path sections so that every
plot is drawn;
then each figure of the page (``html.figures``, what ``html.render`` draws) and of the
notebook (``notebook.plots``) is read back from its matplotlib artists (bar lengths,
line points, scatter offsets, labels) and compared with the document's table values,
computed here from the document alone: a bar per row of the table, each bar the row's
number, nothing else drawn.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.patches import Rectangle

import tbdtrace
from tbdtrace.commands._open import open_or_import
from tbdtrace.importers import kineto
from tbdtrace.report import ReportOptions, build, html, notebook
from tests.conftest import FIXTURES, fixture

KINETO = sorted(
    str(p.relative_to(FIXTURES)) for p in (FIXTURES / "kineto").rglob("*.json.gz") if p.is_file()
)
NSYS = ["nsys/perlmutter-cloverleaf-cuda.sqlite", "nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"]
REL = 1e-9


# Two ranks of one run, imported together: the rank and collective-skew plots.
TWO_RANKS = "kineto/hta/sampled_rank-0.json.gz+kineto/hta/sampled_rank-1.json.gz"


def _doc(name: str, tmp_path: Path) -> dict[str, Any]:
    if "+" in name:
        tables, meta = kineto.import_files([fixture(n) for n in name.split("+")])
        trace = tbdtrace.open(tbdtrace.trace.write(tmp_path / "t", tables, meta))
    else:
        trace = open_or_import(str(fixture(name)))
    # every plot, the opt-in ones too
    return build(trace, ReportOptions(roofline=True, critical_path=True))


def _tagged(fig: Any) -> dict[str, list[Any]]:
    """Data artists by tag (their gid less ``tbd-data-`` and, for bars, the index)."""
    out: dict[str, list[Any]] = defaultdict(list)
    for a in fig.findobj(lambda a: str(a.get_gid() or "").startswith("tbd-data-")):
        gid = str(a.get_gid())[len("tbd-data-") :]
        if isinstance(a, Rectangle):
            gid = gid.rsplit("-", 1)[0]
        out[gid].append(a)
    return out


def _close(a: list[float], b: list[float]) -> bool:
    if len(a) != len(b):
        return False
    return all(x == pytest.approx(y, rel=REL, abs=1e-9) for x, y in zip(a, b, strict=True))


def _dev(r: dict[str, Any]) -> str:
    rank = "" if r.get("rank") is None else f"rank {r['rank']} "
    dev = r.get("device_id")
    return f"{rank}{r.get('device_type') or '?'}:{'-' if dev is None else dev}"


def _offsets(colls: list[Any]) -> list[tuple[float, float]]:
    """(x, y) of every point of the scatter collections ``colls``."""
    return [(float(x), float(y)) for c in colls for x, y in np.asarray(c.get_offsets()).tolist()]


def _texts(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.texts]


def _share_bars(fig: Any, tag: str, rows: list[dict[str, Any]], label: str) -> None:
    (ax,) = fig.axes
    bars = _tagged(fig)[tag]
    assert _close([b.get_width() for b in bars], [r["total_ns"] / 1e6 for r in rows])
    assert _texts(ax) == [f" {100 * r['share']:.1f}%" for r in rows]
    ticks = [t.get_text().replace("\\$", "$") for t in ax.get_yticklabels()]
    names = [r[label] or "-" for r in rows]
    assert len(ticks) == len(names)
    assert all(t == n for t, n in zip(ticks, names, strict=True) if len(n) <= 60)


def check_steps(fig: Any, doc: dict[str, Any]) -> None:
    steps = doc["steps"]["steps"]
    by_rank: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for s in steps:
        by_rank[s.get("rank")].append(s)
    t = _tagged(fig)
    for i, rank in enumerate(sorted(by_rank, key=lambda r: (r is None, r or 0))):
        (line,) = t[f"steps-{i}"]
        assert list(line.get_xdata()) == [s["step"] for s in by_rank[rank]]
        assert _close(list(line.get_ydata()), [s["duration_ns"] / 1e6 for s in by_rank[rank]])
    rates = [s["throughput_per_s"] for s in steps if s.get("throughput_per_s")]
    assert _close(list(t["throughput"][0].get_ydata()) if rates else [], rates)


def check_utilization(fig: Any, doc: dict[str, Any]) -> None:
    per_dev: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in doc["utilization"]["devices"]:
        if r.get("step") is not None:
            per_dev[_dev(r)].append(r)
    devs = sorted(per_dev)[:8]
    assert [ax.get_title().rsplit(": ", 1)[1] for ax in fig.axes] == devs
    for ax, d in zip(fig.axes, devs, strict=True):
        rows = sorted(per_dev[d], key=lambda r: r["step"])
        drawn = [p for p in ax.patches if str(p.get_gid() or "").startswith("tbd-data-util")]
        comp = [p.get_height() for p in drawn if "compute" in str(p.get_gid())]
        mem = [p for p in drawn if "memory" in str(p.get_gid())]
        assert _close(comp, [100 * (r["compute_utilization"] or 0) for r in rows])
        top = [p.get_y() + p.get_height() for p in mem]  # compute + memory-only = busy
        assert _close(top, [100 * (r["utilization"] or 0) for r in rows])


def check_categories(fig: Any, doc: dict[str, Any]) -> None:
    _share_bars(fig, "cat", doc["categories"], "category")
    assert doc["window"]["sections"]["categories"] in fig.texts[0].get_text()


def check_kernels(fig: Any, doc: dict[str, Any]) -> None:
    _share_bars(fig, "kern", doc["kernels"][:15], "name")


def check_ops(fig: Any, doc: dict[str, Any]) -> None:
    _share_bars(fig, "ops", doc["hotspots"]["ops"][:15], "op")


def check_sources(fig: Any, doc: dict[str, Any]) -> None:
    _share_bars(fig, "src", doc["hotspots"]["sources"][:15], "source")


def check_idle(fig: Any, doc: dict[str, Any]) -> None:
    rows = doc["idle"]["devices"]
    t = _tagged(fig)
    for key in ("busy_ns", "queued_ns", "sync_wait_ns"):
        assert _close([b.get_width() for b in t[f"idle-{key}"]], [r[key] / 1e6 for r in rows])
    host = [0.0] * len(rows)
    for key in ("host_bound_ns", "host_bound_data_ns", "host_bound_other_ns"):
        for i, b in enumerate(t.get(f"idle-{key}", [])):
            host[i] += b.get_width()
    assert _close(host, [r["host_bound_ns"] / 1e6 for r in rows])
    (ax,) = fig.axes
    assert doc["window"]["sections"]["idle"] in ax.get_title()


def check_flops(fig: Any, doc: dict[str, Any]) -> None:
    sec = doc["flops"]
    rows = [r for r in sec["rows"] if r["precision"] is not None]
    t = _tagged(fig)
    for key in ("efficiency_busy", "efficiency_wall"):
        want = [100 * r[key] for r in rows if r[key] is not None]
        assert _close([b.get_width() for b in t.get(f"flops-{key}", [])], want)
    # one bar per table row and precision: the per-kernel rows are not bars
    n_bars = sum(len(v) for k, v in t.items() if k.startswith("flops"))
    assert n_bars == sum(
        (r["efficiency_busy"] is not None) + (r["efficiency_wall"] is not None) for r in rows
    )
    (ax,) = fig.axes
    labels = [x.get_text() for x in ax.get_yticklabels()]
    assert labels == [
        ("" if r["rank"] is None else f"rank {r['rank']} ") + r["precision"] for r in rows
    ]
    cov = [x for x in _texts(ax) if "FLOPs counted for" in x]
    want_cov = [
        f"{100 * r['coverage']:.0f}%"
        for r in rows
        if r["coverage"] is not None
        and (r["efficiency_busy"] is not None or r["efficiency_wall"] is not None)
    ]
    assert [c.split("counted for ")[1].split(" ")[0] for c in cov] == want_cov
    thr = sec["coverage_threshold"]
    partial = [r for r in rows if r["coverage"] is not None and r["coverage"] < thr]
    assert sum("partial" in c for c in cov) == len(
        [r for r in partial if r["efficiency_busy"] is not None or r["efficiency_wall"] is not None]
    )


def check_memory(fig: Any, doc: dict[str, Any]) -> None:
    groups: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in doc["memory_timeline"]:
        groups[_dev(r)][r["level"]].append(r)
    for ax in fig.axes:
        d = ax.get_title().split(": ", 1)[1].split(" (")[0]
        levels = groups[d]
        alloc = levels.get("allocated") or []
        if alloc:
            peak = max(r["total_bytes"] for r in alloc)
            marks = [ln for ln in ax.lines if ln.get_gid() == "tbd-data-mem-peak"]
            assert len(marks) == 1 and _close(list(marks[0].get_ydata()), [peak / 2**20])
            # the stacked categories reach the marked peak: they sum to the allocated total
            tops = [
                float(np.max(path.vertices[:, 1]))
                for c in ax.collections
                if str(c.get_gid() or "").startswith("tbd-data-mem-")
                for path in c.get_paths()
                if len(path.vertices)
            ]
            assert not tops or _close([max(tops)], [peak / 2**20])
        res = [ln for ln in ax.lines if ln.get_gid() == "tbd-data-mem-reserved"]
        want = [r["total_bytes"] / 2**20 for r in levels.get("reserved") or []]
        assert _close(list(res[0].get_ydata()) if res else [], want)


def check_step_timeline(fig: Any, doc: dict[str, Any]) -> None:
    st = doc["step_timeline"]
    polys = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert sum(len(c.get_paths()) for c in polys) == len(st["events"])
    assert f"Step {st['step']} " in fig.axes[0].get_title()


def check_ranks(fig: Any, doc: dict[str, Any]) -> None:
    steps = [s for s in doc["steps"]["steps"] if s.get("rank") is not None and not s["warmup"]]
    t = _tagged(fig)
    for rank in {s["rank"] for s in steps}:
        rows = sorted((s for s in steps if s["rank"] == rank), key=lambda s: s["step"])
        (line,) = t[f"rank-{rank}"]
        assert _close(list(line.get_ydata()), [s["duration_ns"] / 1e6 for s in rows])


def check_skew(fig: Any, doc: dict[str, Any]) -> None:
    inst = doc["collective_skew"]["instances"]
    pts = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    got = sorted(y for _, y in _offsets(pts))
    assert _close(got, sorted(r["skew_ns"] / 1e6 for r in inst))


def check_roofline(fig: Any, doc: dict[str, Any]) -> None:
    ops = [
        r
        for r in doc["roofline"]["ops"]
        if r.get("intensity_flop_per_byte") and r.get("achieved_flops_per_s")
    ]
    pts = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    got = sorted(_offsets(pts))
    assert got == sorted((r["intensity_flop_per_byte"], r["achieved_flops_per_s"]) for r in ops)


PATH_RESOURCES = (
    "cpu_op",
    "cpu_runtime",
    "cpu_idle",
    "launch_delay",
    "gpu_kernel",
    "copy",
    "memset",
    "gpu_gap",
    "sync_wait",
)


def check_critical_path(fig: Any, doc: dict[str, Any]) -> None:
    """A stacked bar per step (the first 20), each part a <resource>_ns column; the parts
    of a bar end at the step's length."""
    sec = doc["critical_path"]
    steps = sec["steps"][:20]
    t = _tagged(fig)
    ends = [0.0] * len(steps)
    for res in PATH_RESOURCES:
        want = [s[f"{res}_ns"] / 1e6 for s in steps]
        bars = t.get(f"cp-{res}", [])
        assert _close([b.get_width() for b in bars], want if any(want) else []), res
        for i, b in enumerate(bars):
            ends[i] = max(ends[i], b.get_x() + b.get_width())
    assert _close(ends, [s["step_ns"] / 1e6 for s in steps])
    (ax,) = fig.axes
    assert doc["window"]["sections"]["critical_path"] in ax.get_title()


CHECKS = {
    "steps": check_steps,
    "utilization": check_utilization,
    "categories": check_categories,
    "kernels": check_kernels,
    "ops": check_ops,
    "sources": check_sources,
    "idle": check_idle,
    "flops": check_flops,
    "memory": check_memory,
    "step_timeline": check_step_timeline,
    "ranks": check_ranks,
    "skew": check_skew,
    "roofline": check_roofline,
    "critical_path": check_critical_path,
}


def _expected_keys(doc: dict[str, Any]) -> set[str]:
    """The plots the document has data for, read from the document."""
    steps = doc["steps"]["steps"]
    rows = [r for r in doc["flops"]["rows"] if r["precision"] is not None]
    keys = {
        "steps": bool(steps),
        "utilization": any(r.get("step") is not None for r in doc["utilization"]["devices"]),
        "categories": bool(doc["categories"]),
        "kernels": bool(doc["kernels"]),
        "ops": bool(doc["hotspots"]["ops"]),
        "sources": bool(doc["hotspots"].get("sources")),
        "idle": bool(doc["idle"]["devices"]),
        "flops": any(
            r["efficiency_busy"] is not None or r["efficiency_wall"] is not None for r in rows
        ),
        "memory": bool(doc["memory_timeline"]),
        "step_timeline": bool(doc["step_timeline"].get("events")),
        "ranks": len({s["rank"] for s in steps if s.get("rank") is not None}) > 1,
        "skew": bool(doc["collective_skew"].get("instances")),
        "roofline": bool(doc["roofline"].get("included"))
        and any(
            r.get("intensity_flop_per_byte") and r.get("achieved_flops_per_s")
            for r in doc["roofline"].get("ops") or []
        ),
        "critical_path": bool(doc["critical_path"].get("steps")),
    }
    return {k for k, v in keys.items() if v}


@pytest.mark.parametrize("name", [*KINETO, *NSYS, TWO_RANKS])
def test_every_plot_draws_its_tables_numbers(name: str, tmp_path: Path) -> None:
    doc = _doc(name, tmp_path)
    page, notes = html.figures(doc)
    assert notes == []
    nb = notebook.plots(doc)
    assert [k for k, _ in page] == list(nb)
    assert set(nb) == _expected_keys(doc)
    for key, fig in [*page, *nb.items()]:
        CHECKS[key](fig, doc)
    if name == TWO_RANKS:
        assert {"ranks", "skew"} <= set(nb)


def test_the_flops_plot_draws_the_precision_rows_only() -> None:
    """The defect class on a document made for the test: a flops section with per-kernel
    rows and a coverage threshold beside per-precision rows."""
    doc = {
        "flops": {
            "coverage_threshold": 0.8,
            "rows": [
                {"rank": 0, "precision": "tf32", "efficiency_busy": 0.25, "efficiency_wall": 0.1,
                 "coverage": 0.5, "flops_source": "framework"},
                {"rank": 0, "precision": "fp32", "efficiency_busy": None, "efficiency_wall": None,
                 "coverage": 1.0, "flops_source": "framework"},
                {"rank": 1, "precision": None, "efficiency_busy": None, "efficiency_wall": None,
                 "coverage": 0.0, "flops_source": "none"},
            ],
            "kernels": [{"rank": 0, "precision": "tf32", "name": "k", "efficiency": 0.9}],
        }
    }  # fmt: skip
    (fig,) = notebook.plots(doc).values()
    t = _tagged(fig)
    assert [b.get_width() for b in t["flops-efficiency_busy"]] == [25.0]
    assert [b.get_width() for b in t["flops-efficiency_wall"]] == [10.0]
    assert sum(len(v) for v in t.values()) == 2
    texts = _texts(fig.axes[0])
    assert any("counted for 50%" in x and "partial" in x for x in texts)
    assert not any("counted for 80%" in x for x in texts)
    assert any("no peak" in x for x in texts)
    assert [x.get_text() for x in fig.axes[0].get_yticklabels()] == ["rank 0 tf32", "rank 0 fp32"]
