"""``tbdtrace diff A B``: two traces side by side."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tbdtrace.commands import _output, _rankset, _window
from tbdtrace.commands._open import open_or_import
from tbdtrace.passes import diff, window
from tbdtrace.report.fmt import clip, fmt_ns
from tbdtrace.report.textui import Console, Table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "diff",
        help="compare two traces",
        description="Compare two traces (frameworks, batch sizes, versions): "
        "throughput, utilization, per-category and per-kernel deltas (B - A).",
    )
    p.add_argument(
        "a",
        metavar="A",
        help="baseline trace directory or profiler file (or a folder or quoted glob of "
        "per-rank files, with --rank)",
    )
    p.add_argument(
        "b",
        metavar="B",
        nargs="?",
        help="trace compared with A; leave it out to compare two ranks of A (--rank R1 --rank R2)",
    )
    p.add_argument(
        "--rank",
        type=int,
        action="append",
        metavar="R",
        help="compare ranks, not whole traces: A --rank R1 --rank R2 compares two ranks of "
        "A; A B --rank R compares rank R of both runs (A B --rank R1 --rank R2: R1 of A "
        "with R2 of B)",
    )
    p.add_argument(
        "--top",
        type=int,
        default=20,
        metavar="N",
        help="kernels listed, largest |delta| first (default 20)",
    )
    _output.add_arguments(p)
    _window.add_options(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.top < 1:
        print("tbdtrace diff: --top must be >= 1", file=sys.stderr)
        return 2
    usage = _output.check(args, "diff")
    if usage:
        print(usage, file=sys.stderr)
        return 2
    spec = _window.spec(args, "diff")
    if spec is None:
        return 2
    usage = _rank_usage(args)
    if usage:
        print(usage, file=sys.stderr)
        return 2
    a, b = _sides(args)
    wa, wb = window.resolve(a, spec), window.resolve(b, spec)
    doc = diff.compare(window.view(a, wa), window.view(b, wb), top=args.top)
    doc["window"] = {"a": wa.to_json(), "b": wb.to_json()}
    if args.format == "json" and not args.section:
        return _output.write_text(json.dumps(doc, indent=2) + "\n", args, "diff")
    if args.format in ("json", "csv"):
        # Tables: the headline as one row per figure, beside categories and kernels.
        flat = {
            "headline": [{"figure": k, **v} for k, v in doc["headline"].items()],
            "categories": doc["categories"],
            "kernels": doc["kernels"],
            "traces": {"a": doc["a"], "b": doc["b"]},
        }
        return _output.emit_tables(flat, args, "diff")
    _render(doc)
    return 0


def _rank_usage(args: argparse.Namespace) -> str | None:
    n = len(args.rank or [])
    if args.b is None and n != 2:
        return "tbdtrace diff: give B, or two ranks of A (--rank R1 --rank R2)"
    if n > 2:
        return "tbdtrace diff: --rank at most twice (one rank per side)"
    return None


def _sides(args: argparse.Namespace) -> tuple[Any, Any]:
    """The two traces compared: whole traces, or the ranks --rank picks."""
    ranks = args.rank or []
    a = _open(args.a) if ranks else open_or_import(args.a)
    if args.b is None:
        return _rankset.one_rank(a, ranks[0]), _rankset.one_rank(a, ranks[1])
    b = _open(args.b) if ranks else open_or_import(args.b)
    if not ranks:
        return a, b
    return _rankset.one_rank(a, ranks[0]), _rankset.one_rank(b, ranks[-1])


def _open(arg: str) -> Any:
    """A trace, a profiler file, or a set of per-rank files (imported as one trace)."""
    if not _rankset.is_rank_set([arg]):
        return open_or_import(arg)
    tr, problems = _rankset.open_ranks(_rankset.expand([arg]))
    for line in problems:
        print(f"tbdtrace diff: warning: {line}", file=sys.stderr)
    return tr


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if key.endswith("_ns"):
        return fmt_ns(v)
    if "utilization" in key:
        return f"{100 * v:.1f}%"
    if isinstance(v, float):
        return f"{v:,.2f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _render(doc: dict[str, Any]) -> None:
    con = Console(width=None if sys.stdout.isatty() else 160)
    con.print(f"A: {doc['a']}\nB: {doc['b']}")
    la, lb = doc["window"]["a"]["label"], doc["window"]["b"]["label"]
    covers = la if la == lb else f"A: {la}, B: {lb}"
    con.print(f"Window: {covers}. Every table below covers it.")
    t = Table(title=f"Headline ({covers})", title_justify="left")
    for c in ("Figure", "A", "B", "B - A", "B / A"):
        t.add_column(c, justify="left" if c == "Figure" else "right", no_wrap=True)
    for k, v in doc["headline"].items():
        t.add_row(
            k,
            _fmt(k, v["a"]),
            _fmt(k, v["b"]),
            _fmt(k, v["delta"]),
            "-" if v["ratio"] is None else f"{v['ratio']:.3f}",
        )
    con.print(t)
    ct = Table(title=f"Device time by category ({covers})", title_justify="left")
    for col in ("Category", "A", "B", "B - A", "A %", "B %"):
        ct.add_column(col, justify="left" if col == "Category" else "right", no_wrap=True)
    for r in doc["categories"]:
        ct.add_row(
            r["category"],
            fmt_ns(r["a_total_ns"]),
            fmt_ns(r["b_total_ns"]),
            fmt_ns(r["delta_ns"]),
            f"{100 * r['a_share']:.1f}",
            f"{100 * r['b_share']:.1f}",
        )
    con.print(ct)
    k = Table(title=f"Kernels, largest change first ({covers})", title_justify="left")
    for col in ("B - A", "A", "B", "A n", "B n", "Category", "Name"):
        k.add_column(col, justify="left" if col in ("Category", "Name") else "right", no_wrap=True)
    for r in doc["kernels"]:
        name = clip(r["name"], 70, blank="")
        k.add_row(
            fmt_ns(r["delta_ns"]),
            fmt_ns(r["a_total_ns"]),
            fmt_ns(r["b_total_ns"]),
            f"{r['a_count']:,}",
            f"{r['b_count']:,}",
            r["category"],
            name,
        )
    con.print(k)
