"""The critical-path section (opt-in: ``report --critical-path``): each step's path by
resource, the ops on the paths, and the time by resource per step
(``passes/critical_path.py``)."""

from __future__ import annotations

from typing import Any

from tbdtrace.analysis.engine import outputs
from tbdtrace.analysis.engine.context import AnalysisContext
from tbdtrace.report.fmt import clip, fmt_ns, fmt_pct
from tbdtrace.report.section_api import ReportOptions, Section, table_records, titled
from tbdtrace.report.textui import Console, Table

HOW = "tbdtrace report --critical-path (library: ReportOptions(critical_path=True))"


def critical_path_section(ctx: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    """``included`` false (and how to turn it on) unless ``opts.critical_path``; else
    ``resources`` (per rank, resource and category over the window's steps), ``steps``
    (per step: its length and ``<resource>_ns`` columns, adding up to it) and ``top_ops``
    (the ops on the paths; limited by ``top_json``)."""
    if not opts.critical_path:
        return {"included": False, "how": HOW}
    from tbdtrace.analysis.passes import critical_path  # loaded only when asked for

    # one walk: the pass keeps its segments in the context's cache for the other tables
    per_step = critical_path.run(ctx, critical_path.CriticalPathConfig(by="resource"))
    ops = critical_path.run(ctx, critical_path.CriticalPathConfig(by="op"))
    if opts.top_json is not None:
        ops = ops.slice(0, opts.top_json)
    return {
        "included": True,
        "resources": _resources(table_records(per_step)),
        "steps": _steps(table_records(per_step)),
        "top_ops": table_records(ops),
    }


def _resources(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (rank, resource, category): the path's time over the steps, per step, share."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    total: dict[Any, int] = {}
    steps: dict[Any, set[int]] = {}
    for r in rows:
        key = (r["rank"], r["resource"], r["category"])
        o = out.setdefault(
            key,
            {"rank": r["rank"], "resource": r["resource"], "category": r["category"], "path_ns": 0},
        )
        o["path_ns"] += r["path_ns"]
        total[r["rank"]] = total.get(r["rank"], 0) + r["path_ns"]
        steps.setdefault(r["rank"], set()).add(r["step_start_ns"])
    res = []
    for (rank, _res, _cat), o in out.items():
        o["per_step_ns"] = o["path_ns"] / len(steps[rank])
        o["share"] = o["path_ns"] / total[rank] if total[rank] else None
        res.append(o)
    res.sort(key=lambda o: (o["rank"] is None, o["rank"] or 0, -o["path_ns"], o["resource"]))
    return res


def _steps(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per step: rank, step, start, length, and the path's time per resource."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        key = (r["rank"], r["step_start_ns"])
        o = out.setdefault(
            key,
            {
                "rank": r["rank"],
                "step": r["step"],
                "step_start_ns": r["step_start_ns"],
                "step_ns": r["step_ns"],
                **{f"{x}_ns": 0 for x in outputs.PATH_RESOURCES},
            },
        )
        o[f"{r['resource']}_ns"] += r["path_ns"]
    return list(out.values())


_LABEL = {
    "cpu_op": "CPU op",
    "cpu_runtime": "runtime call",
    "cpu_idle": "CPU idle",
    "launch_delay": "launch delay",
    "gpu_kernel": "GPU kernel",
    "copy": "copy",
    "memset": "memset",
    "gpu_gap": "GPU gap",
    "sync_wait": "sync wait",
}


def _what(r: dict[str, Any]) -> str:
    label = _LABEL.get(r["resource"], r["resource"])
    return f"{label}: {r['category']}" if r.get("category") else label


def _render(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    if not data.get("included"):
        con.print(f"Critical path: not computed by default; {data['how']} adds it.")
        return
    if not data["steps"]:
        con.print("Critical path: no host ranges in the window; nothing to follow.")
        return
    t = Table(title=titled("Critical path by resource (steps' paths added up)", opts))
    for c in ("Rank", "Resource", "Time", "Per step", "Share"):
        t.add_column(c, justify="left" if c == "Resource" else "right")
    for r in data["resources"]:
        rank = "-" if r["rank"] is None else str(r["rank"])
        t.add_row(
            rank, _what(r), fmt_ns(r["path_ns"]), fmt_ns(r["per_step_ns"]), fmt_pct(r["share"])
        )
    con.print(t)
    s = Table(title=titled("Critical path per step", opts))
    cols = (
        "cpu_op",
        "cpu_runtime",
        "cpu_idle",
        "launch_delay",
        "gpu_kernel",
        "gpu_gap",
        "sync_wait",
    )
    for c in ("Rank", "Step", "Length", *(_LABEL[x] for x in cols), "copy+set"):
        s.add_column(c, justify="right")
    for r in data["steps"][: opts.top or None]:
        s.add_row(
            "-" if r["rank"] is None else str(r["rank"]),
            "-" if r["step"] is None else str(r["step"]),
            fmt_ns(r["step_ns"]),
            *(fmt_ns(r[f"{x}_ns"]) for x in cols),
            fmt_ns(r["copy_ns"] + r["memset_ns"]),
        )
    con.print(s)
    o = Table(title=titled("Top ops on the critical path", opts))
    for c in ("Time", "Share", "Steps", "Resource", "Name"):
        o.add_column(c, justify="left" if c in ("Resource", "Name") else "right")
    for r in data["top_ops"][: opts.top or None]:
        o.add_row(
            fmt_ns(r["path_ns"]),
            fmt_pct(r["share"]),
            str(r["steps"]),
            _what(r),
            clip(r["name"], 70),
        )
    con.print(o)


CRITICAL_PATH = Section("critical_path", critical_path_section, _render)
