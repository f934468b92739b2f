"""HTA's side of the cross-rank benchmark: ``TraceAnalysis`` on a folder of per-rank
Kineto files, then its per-rank analyses. Runs in the benchmark venv (``make
bench-venv``), not the project's. Prints one JSON line per stage as it ends (seconds
since start, this process's peak RSS), so a run stopped at a memory or time cap still
says how far it got; the last line holds the per-rank results.

``.venv-bench/bin/python bench/hta_ranks.py DIR``
"""

import json
import resource
import sys
import time

T0 = time.perf_counter()


def stage(name: str, **extra: object) -> None:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    line = {"stage": name, "t_s": round(time.perf_counter() - T0, 3), "peak_rss_bytes": rss}
    line["children_peak_rss_bytes"] = kids
    print(json.dumps({**line, **extra}), flush=True)


stage("start")
from hta.trace_analysis import TraceAnalysis  # noqa: E402

stage("imported")
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
stage("loaded", ranks=len(analyzer.t.traces))
ov = analyzer.get_comm_comp_overlap(visualize=False)
stage("comm_comp_overlap")
tb = analyzer.get_temporal_breakdown(visualize=False)
stage("temporal_breakdown")
try:
    strag = [int(r) for r in analyzer.get_potential_stragglers(num_candidates=1)]
    strag_error = None
except Exception as e:  # HTA's own failure is a result here, reported as such
    strag, strag_error = None, f"{type(e).__name__}: {e}"
stage("potential_stragglers")
per_rank = {}
for _, row in ov.iterrows():
    per_rank[int(row["rank"])] = {"overlap": float(row["comp_comm_overlap_pctg"]) / 100}
for _, row in tb.iterrows():
    per_rank[int(row["rank"])].update(
        idle_us=float(row["idle_time(us)"]),
        compute_us=float(row["compute_time(us)"]),
        non_compute_us=float(row["non_compute_time(us)"]),
        kernel_time_us=float(row["kernel_time(us)"]),
    )
for rank, df in analyzer.t.traces.items():  # GPU kernels HTA kept (its stream >= 0)
    per_rank[int(rank)]["kernels"] = int(df["stream"].ge(0).sum())
stage("done", per_rank=per_rank, stragglers=strag, stragglers_error=strag_error)
