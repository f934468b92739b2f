"""``tbdtrace hotspots TRACE``: top kernels, ops or categories with who launched them."""

from __future__ import annotations

import argparse
import json
import sys

from tbdtrace.commands import _window
from tbdtrace.commands._open import begin_open
from tbdtrace.report.fmt import clip
from tbdtrace.report.textui import Console, Table

BY = ("kernel", "op", "category")  # tbdtrace.passes.hotspots.BY, without loading the pass


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "hotspots",
        help="top kernels, ops or categories by device time",
        description="List the top kernels (with their launch configuration "
        "and launching op, module and annotation range), ops or categories.",
    )
    p.add_argument(
        "trace", metavar="TRACE", help="trace directory, or a profiler file to import in memory"
    )
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows to show (default 20)")
    p.add_argument("--by", choices=BY, default="kernel")
    p.add_argument("--format", choices=("text", "json", "csv"), default="text")
    _window.add_options(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.top < 1:
        print("tbdtrace hotspots: --top must be >= 1", file=sys.stderr)
        return 2
    spec = _window.spec(args, "hotspots")
    if spec is None:
        return 2
    pending = begin_open(args.trace)  # a profiler file parses while the passes load
    from tbdtrace.passes import hotspots, window
    from tbdtrace.report.build import table_records
    from tbdtrace.report.fmt import fmt_ns

    tr = pending.trace()
    win = window.resolve(tr, spec)
    rows = table_records(
        hotspots.run(window.view(tr, win), hotspots.HotspotsConfig(args.top, args.by))
    )
    if args.format == "json":
        json.dump({"window": win.to_json(), "rows": rows}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if args.format == "csv":
        from tbdtrace.report import csvout, tabular

        csvout.write(tabular.tables("hotspots", rows)[0], sys.stdout)
        return 0
    con = Console(width=None if sys.stdout.isatty() else 200)
    if not rows:
        con.print(f"{args.trace}: no kernels in this trace.")
        return 0
    name_col = {"kernel": "name", "op": "op", "category": "category"}[args.by]
    pooled = f", {len(win.ranks)} ranks pooled" if len(win.ranks) > 1 else ""
    title = f"Hotspots by {args.by} (top {len(rows)}, {win.label()}{pooled})"
    t = Table(title=title, title_justify="left")
    extra = {
        "kernel": ("Instances", "Category", "Grid x block", "Op", "Marker"),
        "op": ("Kernels", "Distinct", "Top kernel"),
        "category": ("Count",),
    }[args.by]
    for c in ("Time %", "Total", *extra, name_col.capitalize()):
        t.add_column(
            c,
            justify="right"
            if c in ("Time %", "Total", "Instances", "Kernels", "Distinct", "Count")
            else "left",
            no_wrap=True,
        )
    for r in rows:
        t.add_row(
            f"{100 * r['share']:.1f}",
            fmt_ns(r["total_ns"]),
            *_extra(args.by, r),
            clip(r[name_col], 48 if args.by == "kernel" else 70),
        )
    con.print(t)
    return 0


def _extra(by: str, r: dict) -> list[str]:  # type: ignore[type-arg]
    if by == "kernel":
        launch = (r["launch"] or "-").replace("grid=", "").replace(" block=", "x")
        return [
            f"{r['count']:,}",
            r["category"],
            launch,
            clip(r["op"], 24),
            clip(r["marker"], 24),
        ]
    if by == "op":
        return [f"{r['kernel_count']:,}", str(r["distinct_kernels"]), clip(r["top_kernel"], 50)]
    return [f"{r['count']:,}"]
