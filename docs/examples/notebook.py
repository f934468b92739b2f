"""tbdtrace from a notebook (or a script): open a trace, read its report document, draw
its plots. Each block is what a notebook cell would hold; in Jupyter, the last line of a
cell showing a trace or a Figure draws it inline.

    python docs/examples/notebook.py TRACE_DIR [OUT_DIR]

TRACE_DIR is a trace directory (``tbdtrace import profile.json.gz --out TRACE_DIR`` makes
one from a PyTorch-profiler file). The plots are saved as PNG into OUT_DIR (default
``out/notebook-example``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import tbdtrace
from tbdtrace.report import notebook


def main(trace_dir: str, out_dir: str = "out/notebook-example") -> None:
    # Cell 1: open the trace. In Jupyter, `a` alone shows its source and tables.
    a = tbdtrace.analyze(trace_dir)
    summary_html = a._repr_html_()
    print(f"{a!r}: {len(summary_html)} characters of HTML summary")

    # Cell 2: the report document: the same dict as `tbdtrace report --format json`.
    doc = a.report()
    s = doc["summary"]
    print(
        f"{s['kernel_count']:,} kernels, {s['kernel_time_ns'] / 1e6:.1f} ms of kernel time, "
        f"utilization {100 * s['gpu_utilization']:.1f}%"
    )
    for c in doc["categories"][:5]:
        print(f"  {c['category']:<18} {100 * c['share']:5.1f}%")

    # Cell 3: its plots, as matplotlib Figures (in Jupyter: `figs["categories"]` draws it).
    figs = notebook.plots(doc)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for key, fig in figs.items():
        fig.savefig(out / f"{key}.png", dpi=80)
    print(f"plots: {', '.join(figs)} -> {out}/")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        sys.exit(2)
    main(*sys.argv[1:])
