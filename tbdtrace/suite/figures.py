"""TBD's figures from the bench table, as PNG beside it, and a short comparison with TBD's
findings (docs in /work/shared/reference: throughput and utilization rise with the
mini-batch; feature maps dominate memory; FP32 efficiency stays well below peak).

Drawn with the HTML report's plotting code (:mod:`tbdtrace.report.plots`: one
matplotlib ``Figure`` per plot, no pyplot, every data artist tagged ``tbd-data-...``).
Only rows with status ``ok`` are plotted; a figure with nothing to show is not written.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from tbdtrace import schema
from tbdtrace.output_policy import replace
from tbdtrace.report.plots import _data, _fig, color_of

Rows = Sequence[dict[str, Any]]
MIB = 1 << 20
THROUGHPUT_PNG = "bench_throughput.png"
MEMORY_PNG = "bench_memory.png"
UTILIZATION_PNG = "bench_utilization.png"
FINDINGS_MD = "bench_findings.md"


def utilization(row: dict[str, Any]) -> Any:
    """The row's GPU compute utilization, or without GPU kernels its workload's CPU
    utilization (the bench table keeps them in separate columns)."""
    gpu = row.get("gpu_utilization")
    return gpu if gpu is not None else row.get("cpu_utilization")


def series(
    rows: Rows, key: str | Callable[[dict[str, Any]], Any]
) -> dict[str, list[tuple[int, float]]]:
    """Per "model framework": (batch size, ``key``: a column, or a function of the row) of
    its ok rows with both known, by batch size."""
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in rows:
        b, v = r.get("batch_size"), (key(r) if callable(key) else r.get(key))
        if r.get("status") == "ok" and b is not None and v is not None:
            out[f"{r['model']} {r['framework']}"].append((int(b), float(v)))
    return {k: sorted(v) for k, v in sorted(out.items())}


def _lines(ax: Any, data: dict[str, list[tuple[int, float]]], scale: float, tag: str) -> None:
    names = list(data)
    for name in names:
        xs, ys = zip(*data[name], strict=True)
        (line,) = ax.plot(
            xs, [y * scale for y in ys], marker="o", label=name, color=color_of(name, names)
        )
        _data(line, f"{tag}-{name.replace(' ', '-')}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("mini-batch size (samples)")
    ax.legend(fontsize=7, ncols=2)


def throughput_vs_batch(rows: Rows) -> Figure | None:
    """Throughput (samples/s) against mini-batch size, one line per model and framework."""
    data = series(rows, "throughput_samples_per_s")
    if not data:
        return None
    fig, (ax,) = _fig(height=3.6)
    _lines(ax, data, 1.0, "throughput")
    ax.set_ylabel("samples/s")
    ax.set_title("Throughput vs mini-batch (median over measured steps)")
    return fig


def utilization_vs_batch(rows: Rows) -> Figure | None:
    """Utilization and FP32 efficiency (%) against mini-batch size."""
    util, fp32 = series(rows, utilization), series(rows, "fp32_efficiency")
    if not util and not fp32:
        return None
    fig, axes = _fig(rows=2, height=3.2)
    for ax, data, what, tag in (
        (axes[0], util, "utilization (%)", "utilization"),
        (axes[1], fp32, "FP32 efficiency (% of peak)", "fp32"),
    ):
        if data:
            _lines(ax, data, 100.0, tag)
        ax.set_ylabel(what)
    axes[0].set_title(
        "Utilization vs mini-batch (GPU compute, or the workload's CPU without kernels)"
    )
    axes[1].set_title("FP32 efficiency vs mini-batch (achieved FLOP/s over peak)")
    return fig


def memory_rows(rows: Rows) -> list[tuple[str, dict[str, int]]]:
    """(label, bytes per memory category) of each ok row with a breakdown."""
    out = []
    for r in rows:
        parts = {c: r.get(f"{c}_bytes") for c in schema.MEMORY_CATEGORIES}
        if r.get("status") != "ok" or all(v is None for v in parts.values()):
            continue
        b = r.get("batch_size")
        label = f"{r['model']} {r['framework']}" + (f" b{b}" if b is not None else "")
        out.append((label, {c: int(v or 0) for c, v in parts.items()}))
    return out


def memory_breakdown(rows: Rows) -> Figure | None:
    """Stacked bars per run: memory at the measured steps' peak by category (MiB)."""
    data = memory_rows(rows)
    if not data:
        return None
    fig, (ax,) = _fig(height=max(1.8, 0.32 * len(data) + 1.2))
    labels = [label for label, _ in data]
    left = [0.0] * len(data)
    for c in schema.MEMORY_CATEGORIES:
        vals = [parts[c] / MIB for _, parts in data]
        bars = ax.barh(
            labels, vals, left=left, label=c, color=color_of(c, schema.MEMORY_CATEGORIES)
        )
        _data(bars, f"memory-{c}")
        left = [a + v for a, v in zip(left, vals, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("MiB at the measured steps' memory peak")
    ax.set_title("Memory breakdown per model (allocated, by what the blocks hold)")
    ax.legend(fontsize=7, ncols=4, loc="lower right")
    return fig


def write(rows: Rows, out_dir: Path) -> list[Path]:
    """Write the figures that have data and the findings summary; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, make in (
        (THROUGHPUT_PNG, throughput_vs_batch),
        (UTILIZATION_PNG, utilization_vs_batch),
        (MEMORY_PNG, memory_breakdown),
    ):
        fig = make(rows)
        if fig is not None:
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=100)
            replace(out_dir / name, buf.getvalue())
            paths.append(out_dir / name)
    replace(out_dir / FINDINGS_MD, findings(rows).encode())
    return [*paths, out_dir / FINDINGS_MD]


def _rises(points: list[tuple[int, float]]) -> bool:
    ys = [y for _, y in points]
    return all(b >= a for a, b in zip(ys, ys[1:], strict=False))


def _trend(rows: Rows, key: str | Callable[[dict[str, Any]], Any], what: str, claim: str) -> str:
    swept = {k: v for k, v in series(rows, key).items() if len({b for b, _ in v}) > 1}
    if not swept:
        return f"- {claim}: not testable here (no model run at two or more mini-batch sizes)."
    up = [k for k, v in swept.items() if _rises(v)]
    others = [k for k in swept if k not in up]
    text = f"- {claim}: {what} rises with the mini-batch for {len(up)} of {len(swept)} pairs"
    return text + (f" (not for: {', '.join(others)})." if others else ".")


def findings(rows: Rows) -> str:
    """Markdown: this table's figures against TBD's published findings."""
    ok = [r for r in rows if r.get("status") == "ok"]
    lines = [
        "# TBD's findings against this run",
        "",
        f"{len(ok)} of {len(rows)} runs ok. TBD's claims (Zhu et al., IISWC 2018) against "
        "this table; figures: "
        f"{THROUGHPUT_PNG}, {UTILIZATION_PNG}, {MEMORY_PNG}.",
        "",
        _trend(rows, "throughput_samples_per_s", "throughput", "Throughput rises with batch"),
        _trend(rows, utilization, "utilization", "Utilization rises with batch"),
    ]
    mem = memory_rows(rows)
    if mem:
        top = [
            (label, max(parts, key=lambda c: parts[c]), parts)
            for label, parts in mem
            if any(parts.values())
        ]
        act = [label for label, c, _ in top if c == "activations"]
        share = [
            parts["activations"] / sum(parts.values()) for _, _, parts in top if sum(parts.values())
        ]
        lines.append(
            "- Feature maps dominate memory: activations are the largest category in "
            f"{len(act)} of {len(top)} runs"
            + (f" (share of the breakdown {min(share):.0%} to {max(share):.0%})." if share else ".")
        )
    else:
        lines.append("- Feature maps dominate memory: not testable here (no memory breakdown).")
    fp32 = [float(r["fp32_efficiency"]) for r in ok if r.get("fp32_efficiency") is not None]
    if fp32:
        lines.append(
            f"- FP32 efficiency stays well below peak: highest {max(fp32):.1%} of peak "
            f"over {len(fp32)} runs."
        )
    else:
        lines.append("- FP32 efficiency stays well below peak: not testable here (no FLOP count).")
    lines += _scaling(ok)
    return "\n".join(lines) + "\n"


def _scaling(ok: Rows) -> list[str]:
    """One line per multi-rank run's scaling efficiency, with the caveat an efficiency
    above 100% needs: data parallelism does not speed a rank up, so such a figure says
    that the one-rank run was slowed by something else (other load on the machine)."""
    runs = [r for r in ok if (r.get("nproc") or 1) > 1 and r.get("scaling_efficiency") is not None]
    if not runs:
        return []
    parts = [
        f"{r['model']} {r['framework']} batch {r['batch_size']} x {r['nproc']} ranks "
        f"{float(r['scaling_efficiency']):.1%}"
        for r in runs
    ]
    lines = [
        "- Data-parallel scaling (throughput with N ranks / (N x one rank's), on this "
        f"machine): {'; '.join(parts)}."
    ]
    over = [r for r in runs if float(r["scaling_efficiency"]) > 1.0]
    if over:
        lines.append(
            f"  Caveat: {len(over)} of {len(runs)} above 100%. More ranks do not make a rank "
            "faster, so the one-rank run was slowed by something the other was not (other "
            "load on the machine, a shared CPU); these efficiencies measure that, not the "
            "model. Rerun on an idle machine."
        )
    return lines
