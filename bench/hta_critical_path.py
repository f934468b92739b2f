"""HTA's side of the critical-path benchmark: ``TraceAnalysis.critical_path_analysis`` on
one Kineto file. Runs in the benchmark venv (``make bench-venv``), not the project's.

``.venv-bench/bin/python bench/hta_critical_path.py FILE ANNOTATION INSTANCE``

ANNOTATION is HTA's (``ProfilerStep``, or ``""`` for the whole trace), INSTANCE its index.
Prints one JSON line: the window HTA analysed, its path's total weight, the weight by
``bound_by`` and by edge type, the events its weighted edges are attributed to (name,
start and duration in us from ``min_ts_us``, weight), the seconds it took; or the error HTA raised.
"""

import json
import logging
import sys
import tempfile
import time
import warnings
from pathlib import Path

logging.disable(logging.WARNING)
warnings.filterwarnings("ignore", category=FutureWarning)  # pandas on HTA's code


def main() -> None:
    path, annotation, instance = Path(sys.argv[1]).resolve(), sys.argv[2], int(sys.argv[3])
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / path.name).symlink_to(path)
        analyzer = TraceAnalysis(trace_dir=d)
        t1 = time.perf_counter()
        rank = next(iter(analyzer.t.traces))
        try:
            got = analyzer.critical_path_analysis(
                rank=rank, annotation=annotation, instance_id=instance
            )
        except Exception as e:  # HTA's failure is a result here, reported as such
            print(json.dumps({"error": f"{type(e).__name__}: {e}", "load_s": t1 - t0}))
            return
        t2 = time.perf_counter()
        if got is None or not got[1]:
            print(json.dumps({"error": "critical_path_analysis returned no path"}))
            return
        g = got[0]
        edf = g.get_critical_path_breakdown()
        df = g.trace_df
        by_bound = edf.groupby("bound_by").duration.sum().to_dict()
        by_type = edf.groupby("type").duration.sum().to_dict()
        events = []
        for r in edf[edf.duration > 0].itertuples(index=False):
            ev = int(r.event_idx) if r.event_idx == r.event_idx else -1
            ts = int(df.ts.loc[ev]) if ev >= 0 else None
            dur = int(df.dur.loc[ev]) if ev >= 0 else None
            events.append([r.s_name, ts, dur, int(r.duration), r.type, r.bound_by])
        nodes = [g.node_list[n].ts for n in g.critical_path_nodes]
        print(
            json.dumps(
                {
                    "rank": int(rank),
                    "min_ts_us": int(analyzer.t.min_ts),  # HTA's times are relative to it
                    "path_us": int(edf.duration.sum()),
                    "first_us": int(min(nodes)),
                    "last_us": int(max(nodes)),
                    "by_bound_us": {k: int(v) for k, v in by_bound.items()},
                    "by_type_us": {k: int(v) for k, v in by_type.items()},
                    "edges": len(edf),
                    "graph_nodes": g.number_of_nodes(),
                    "events": events,
                    "load_s": round(t1 - t0, 3),
                    "analysis_s": round(t2 - t1, 3),
                }
            )
        )


if __name__ == "__main__":
    main()
