"""Checks for the GPU check (scripts/gpu_check.sh): reads what the runs left in OUT and
writes OUT/results.json. Every check is independent: one that cannot run records why.

    python scripts/gpu_check.py OUT STEPS
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
import sys
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

OUT = Path(sys.argv[1])
STEPS = int(sys.argv[2])
res: dict[str, Any] = {"checks": {}, "errors": {}}


def check(name: str, cond: Any, detail: Any = None) -> None:
    res["checks"][name] = {"ok": bool(cond), "detail": detail}


def check_equal(name: str, got: Any, want: Any) -> None:
    check(name, got == want, [got, want])


def section(fn: Any) -> Any:
    try:
        fn()
    except Exception:  # recorded; the other sections still run
        res["errors"][fn.__name__] = traceback.format_exc(limit=6)
    return fn


def load(name: str) -> dict[str, Any] | None:
    try:
        return json.loads((OUT / name).read_text())
    except (OSError, ValueError):
        return None


runs = {m: load(f"{m}.json") for m in ("plain", "capture", "nomem", "profile", "plain2", "inproc")}


@section
def throughput() -> None:
    tp: dict[str, Any] = {}
    for m, r in runs.items():
        if r:
            tp[m] = {
                "images_per_s": r["images_per_s"],
                "median_images_per_s": r["median_images_per_s"],
                "median_step_ms": 1e3 * r["median_step_s"],
            }
    base = [runs[m]["median_images_per_s"] for m in ("plain", "plain2") if runs.get(m)]
    if base:
        ref = statistics.mean(base)
        tp["plain_reference_images_per_s"] = ref
        tp["plain_spread_pct"] = 100 * (max(base) - min(base)) / ref if len(base) > 1 else None
        for m in ("capture", "nomem", "profile", "inproc"):
            if runs.get(m):
                tp[f"{m}_overhead_pct"] = 100 * (1 - runs[m]["median_images_per_s"] / ref)
    res["throughput"] = tp


def open_trace(path: Path) -> Any:
    import tbdtrace

    return tbdtrace.open(path)


@section
def collector() -> None:
    import numpy as np

    t = open_trace(OUT / "trace")
    res["meta"] = {
        k: t.meta.get(k) for k in ("clock", "clock_offset_ns", "dropped_records", "devices")
    }
    procs = (t.meta.get("extra") or {}).get("collector_processes") or []
    res["collector_processes"] = [
        {
            k: p.get(k)
            for k in (
                "pid",
                "records",
                "denied_buffer_requests",
                "foreign_buffers",
                "buffers_completed",
                "failed_activities",
                "unknown_kind_records",
                "unmatched_marker_ends",
                "clean_stop",
                "truncated_bytes",
                "cupti_version",
                "cupti_minus_host_ns_at_start",
                "spool_errors",
                "spool_lost_rows",
            )
        }
        for p in procs
    ]
    tabs = {
        n: t.df(n)
        for n in (
            "kernels",
            "memcpy",
            "memset",
            "runtime",
            "markers",
            "memory",
            "devices",
            "sync",
            "overhead",
        )
    }
    res["rows"] = {n: int(len(v)) for n, v in tabs.items()}
    for n in ("kernels", "memcpy", "runtime", "markers", "memory", "devices"):
        check(f"{n}_present", res["rows"][n] > 0, res["rows"][n])
    k, rt, m = tabs["kernels"], tabs["runtime"], tabs["markers"]
    check(
        "no_dropped_records",
        not t.meta.get("dropped_records")
        and all(not p.get("denied_buffer_requests") for p in procs),
        t.meta.get("dropped_records"),
    )
    check(
        "no_spool_errors",
        not (t.meta.get("extra") or {}).get("spool_errors"),
        (t.meta.get("extra") or {}).get("spool_errors"),
    )
    launched = set(rt["correlation_id"].tolist())
    missing = int((~k["correlation_id"].isin(launched)).sum())
    check("every_kernel_has_runtime_launch", missing == 0, f"{missing} of {len(k)} without")
    check("kernel_durations_positive", bool(((k["end_ns"] - k["start_ns"]) > 0).all()))
    check("runtime_durations_nonnegative", bool(((rt["end_ns"] - rt["start_ns"]) >= 0).all()))
    dup = rt.groupby("correlation_id")["api"].nunique()
    res["runtime"] = {
        "by_api": rt["api"].value_counts().to_dict(),
        "top_names": rt["name"].value_counts().head(25).to_dict(),
        "correlation_ids_in_both_runtime_and_driver": int((dup > 1).sum()),
        "kernels_launched_by": rt[rt["correlation_id"].isin(set(k["correlation_id"]))]
        .groupby(["api", "name"])
        .size()
        .sort_values(ascending=False)
        .head(10)
        .rename(lambda i: f"{i[0]}:{i[1]}")
        .to_dict(),
    }
    res["kernels_top"] = (
        k.assign(d=k["end_ns"] - k["start_ns"])
        .groupby("name")["d"]
        .sum()
        .sort_values(ascending=False)
        .head(10)
        .to_dict()
    )
    res["memcpy_kinds"] = tabs["memcpy"]["copy_kind"].value_counts().to_dict()
    steps = m[m["name"].astype(str).str.fullmatch(r"step -?\d+")].copy()
    steps["n"] = steps["name"].astype(str).str.split().str[1].astype(int)
    meas = steps[steps["n"] >= 0]
    check(
        "nvtx_step_ranges", len(meas) == STEPS and len(steps) == STEPS + 3, [len(meas), len(steps)]
    )
    lo, hi = int(meas["start_ns"].min()), int(meas["end_ns"].max())
    launch = rt.drop_duplicates("correlation_id").set_index("correlation_id")["start_ns"]
    kl = k.assign(launch=k["correlation_id"].map(launch))
    ks = kl[kl["launch"].between(lo, hi)]
    res["ours"] = {
        "kernels": int(len(ks)),
        "kernel_time_ns": int((ks["end_ns"] - ks["start_ns"]).sum()),
        "nvtx_steps": int(len(meas)),
        "window_ns": hi - lo,
    }
    # Each step ends with loss.item() inside its range: its kernels end before the range does
    # (GPU and CPU timestamps on one clock).
    starts, ends = meas["start_ns"].to_numpy(), meas["end_ns"].to_numpy()
    idx = np.searchsorted(np.sort(starts), ks["launch"].to_numpy(), side="right") - 1
    order = np.argsort(starts)
    step_end = ends[order][np.clip(idx, 0, len(order) - 1)]
    late = ks["end_ns"].to_numpy() > step_end
    check(
        "kernels_end_inside_their_step_range",
        late.mean() < 0.001,
        {
            "late": int(late.sum()),
            "of": int(len(ks)),
            "max_late_ns": int((ks["end_ns"].to_numpy() - step_end).max()),
        },
    )
    devs = tabs["devices"]
    check(
        "devices_listed",
        len(devs) > 0 and set(k["device_id"]) <= set(devs["device_id"]),
        devs.to_dict("records"),
    )
    tp = OUT / "profile.json.torch_trace.json"
    if tp.exists():
        ev = json.loads(tp.read_text())["traceEvents"]
        corr = {
            e["args"]["correlation"]: e["ts"]
            for e in ev
            if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
        }
        corr.update(
            {
                e["args"]["correlation"]: e["ts"]
                for e in ev
                if e.get("cat") == "cuda_driver" and "correlation" in e.get("args", {})
            }
        )
        sr = [
            e
            for e in ev
            if e.get("cat") == "user_annotation" and re.fullmatch(r"step \d+", str(e.get("name")))
        ]
        kk = [e for e in ev if e.get("cat") == "kernel"]
        theirs = {
            "kernels": len(kk),
            "kernel_time_ns": int(sum(e["dur"] for e in kk) * 1000),
            "annotations": len(sr),
        }
        res["torch_profiler"] = theirs
        o = res["ours"]
        check(
            "kernel_count_within_10pct",
            abs(o["kernels"] - theirs["kernels"]) <= 0.1 * theirs["kernels"],
            [o["kernels"], theirs["kernels"]],
        )
        check(
            "kernel_time_within_10pct",
            abs(o["kernel_time_ns"] - theirs["kernel_time_ns"]) <= 0.1 * theirs["kernel_time_ns"],
            [o["kernel_time_ns"], theirs["kernel_time_ns"]],
        )
        ours_names = Counter(ks["name"])
        theirs_names = Counter(e["name"] for e in kk)
        res["kernel_name_count_diffs"] = {
            n: [ours_names.get(n, 0), theirs_names.get(n, 0)]
            for n in set(ours_names) | set(theirs_names)
            if ours_names.get(n, 0) != theirs_names.get(n, 0)
        }


@section
def overhead_goals() -> None:
    # Issue 18's goals: capture costs at most 2% of throughput and less than torch.profiler.
    tp = res.get("throughput") or {}
    cap, prof = tp.get("capture_overhead_pct"), tp.get("profile_overhead_pct")
    check("capture_overhead_at_most_2pct", cap is not None and cap <= 2.0, cap)
    check(
        "capture_overhead_below_torch_profiler",
        cap is not None and prof is not None and cap < prof,
        [cap, prof],
    )


@section
def gpu_samples() -> None:
    # NVML through the host sampler (tbdtrace/collector/gpu_sampler.py) on real hardware.
    t = open_trace(OUT / "trace")
    hs = t.df("host_samples")
    g = hs[hs["metric"].astype(str).str.startswith("gpu_")]
    by = g.groupby(["metric", "index"])["value"]
    res["gpu_samples"] = {
        "nvml": (t.meta.get("extra") or {}).get("host_sampler"),
        "stats": {
            f"{m}[{i}]": {"n": int(n), "mean": float(v), "max": float(x)}
            for (m, i), n, v, x in zip(by.size().index, by.size(), by.mean(), by.max(), strict=True)
        },
    }
    d0 = g[g["index"] == 0]
    names = set(d0["metric"].astype(str))
    base = {"gpu_util", "gpu_memory_util", "gpu_power_watts", "gpu_sm_clock_hz"}
    check("nvml_samples_present", base | {"gpu_memory_used_bytes"} <= names, sorted(names))
    util = d0[d0["metric"].astype(str).str.endswith("_util")]["value"]
    check("nvml_util_in_0_1", bool(((util >= 0) & (util <= 1)).all()), [util.min(), util.max()])
    watts = d0[d0["metric"] == "gpu_power_watts"]["value"]
    check("nvml_power_plausible", bool(((watts > 10) & (watts < 1500)).all()), watts.describe())
    busy = d0[d0["metric"] == "gpu_util"]["value"]
    check("nvml_gpu_busy_while_training", busy.max() > 0.5, busy.max())
    gpm = {"gpu_sm_util", "gpu_sm_occupancy", "gpu_fp32_util", "gpu_tensor_util"}
    check("nvml_gpm_on_hopper", gpm <= names, sorted(gpm - names))


@section
def flops_counters() -> None:
    # Hardware FLOP counters (capture --counters flops; device side unverified until this
    # runs): every FP32 GEMM kernel of scripts/gpu_gemm.py counts 2*M*N*K within 1%.
    from tbdtrace.collector import flops

    p = flops.plan("GH100")  # H100/H200: the host side for this machine's chip
    res["flops_plan"] = {"chip": "GH100", "metrics": list(p.metrics), "passes": p.passes}
    check("flops_config_image", len(p.config_image) > 0 and p.passes >= 1, p.passes)
    g = load("gemm.json")
    t = open_trace(OUT / "flops")
    res["flops_counters"] = (t.meta.get("extra") or {}).get("counters")
    procs = (t.meta.get("extra") or {}).get("collector_processes") or []
    res["flops_counter_errors"] = [e for pr in procs for e in pr.get("counter_errors") or []]
    k = t.df("kernels")
    gemm = k[k["name"].astype(str).str.contains("gemm", case=False)]
    assert g is not None, "gemm.json missing: the GEMM run did not finish"
    want = 2 * g["M"] * g["N"] * g["K"]
    got = gemm["flops"].dropna().astype(float)
    res["flops_gemm"] = {
        "want_per_kernel": want,
        "kernels": int(len(gemm)),
        "with_flops": int(len(got)),
        "min": float(got.min()) if len(got) else None,
        "max": float(got.max()) if len(got) else None,
    }
    check(
        "gemm_flops_within_1pct",
        len(got) >= g["iters"] and bool(((got - want).abs() <= 0.01 * want).all()),
        res["flops_gemm"],
    )


@section
def memory() -> None:
    from tbdtrace.analysis.passes import memory as mp

    t = open_trace(OUT / "trace")
    mem = t.df("memory")
    res["memory_rows"] = (
        mem.groupby(["level", "category"], dropna=False)
        .size()
        .rename(lambda i: f"{i[0]}:{i[1]}")
        .to_dict()
    )
    extra = t.meta.get("extra") or {}
    res["torch_cuda_history"] = extra.get("torch_cuda_history")
    check("memory_reserved_level_present", (mem["level"] == "reserved").any())
    check("memory_allocated_level_present", (mem["level"] == "allocated").any())
    doc = mp.summarize(t)
    res["memory_summary"] = {
        k: doc.get(k)
        for k in (
            "level",
            "peak_bytes",
            "peak_ts_ns",
            "breakdown_at_peak",
            "levels",
            "unmatched_frees",
            "allocator_peak_bytes",
            "allocator_reserved_peak_bytes",
            "event_count",
        )
    }
    tl = mp.timeline(t).to_pandas()
    cap = runs.get("capture") or {}
    al = tl[tl["level"] == "allocated"]
    rs = tl[tl["level"] == "reserved"]
    last = al.iloc[-1] if len(al) else None
    if last is not None and cap:
        got = {
            "weights": int(last["weights_bytes"]),
            "optimizer_state": int(last["optimizer_state_bytes"]),
            "gradients_max": int(al["gradients_bytes"].max()),
            "total_at_end": int(last["total_bytes"]),
            "activations_max": int(al["activations_bytes"].max()),
            "other_at_end": int(last["other_bytes"]),
        }
        want = {
            "weights": cap["weights_bytes"][1],
            "optimizer_state": cap["momentum_bytes"][1],
            "gradients_max": cap["param_bytes"][1],
            "memory_allocated_at_end": cap["memory_allocated_bytes"],
            "weights_exact": cap["weights_bytes"][0],
            "param_exact": cap["param_bytes"][0],
        }
        res["memory_known_answers"] = {"got": got, "want": want}
        check_equal("memory_weights_rounded_exact", got["weights"], want["weights"])
        check_equal(
            "memory_momentum_rounded_exact", got["optimizer_state"], want["optimizer_state"]
        )
        check_equal(
            "memory_gradients_max_rounded_exact", got["gradients_max"], want["gradients_max"]
        )
        check_equal(
            "memory_allocated_total_matches_torch",
            got["total_at_end"],
            want["memory_allocated_at_end"],
        )
        check(
            "memory_history_on_unix_clock",
            abs(int(al["ts_ns"].max()) - cap["time_ns_at_end"]) < 30_000_000_000,
            [int(al["ts_ns"].max()), cap["time_ns_at_end"]],
        )
    if len(rs) and cap:
        res["memory_reserved"] = {
            "cupti_total_at_end": int(rs.iloc[-1]["total_bytes"]),
            "cupti_peak": int(rs["total_bytes"].max()),
            "torch_memory_reserved": cap["memory_reserved_bytes"],
        }


@section
def history_raw() -> None:
    import pickle

    from tbdtrace.collector.memory.torch_cuda import history_rows

    p = OUT / "capture.json.history.pkl"
    snap = pickle.loads(p.read_bytes())
    cols, stats = history_rows(snap["device_traces"], 0)
    total = cols["total_allocated_bytes"][-1] if cols["ts_ns"] else 0
    check(
        "history_total_matches_memory_allocated",
        total == snap["memory_allocated_bytes"],
        [total, snap["memory_allocated_bytes"]],
    )
    res["history_raw"] = {
        "actions": stats["actions"],
        "entries": stats["entries"],
        "reserved_at_end": cols["total_reserved_bytes"][-1] if cols["ts_ns"] else 0,
        "memory_reserved_bytes": snap["memory_reserved_bytes"],
    }


@section
def reports() -> None:
    for name in ("report", "report_demo", "report_torchcap", "report_kineto", "report_inproc"):
        doc = load(f"{name}.json")
        check(
            f"{name}_json",
            doc is not None and "summary" in doc,
            sorted(doc) if isinstance(doc, dict) else None,
        )
        if doc:
            res[f"{name}_summary"] = doc.get("summary")
            if "memory" in doc:
                mem = doc["memory"]
                res[f"{name}_memory"] = {
                    k: mem.get(k) for k in ("level", "peak_bytes", "breakdown_at_peak", "levels")
                }
    # The capture has no steps file: its steps come from the NVTX "step N" ranges (N < 0
    # warm-up), so the default window is the STEPS measured steps.
    win = ((load("report.json") or {}).get("window") or {}).get("ranks") or [{}]
    got = {k: win[0].get(k) for k in ("first_step", "last_step", "step_count")}
    got["warmup_steps_excluded"] = win[0].get("warmup_steps_excluded")
    check(
        "report_window_is_the_nvtx_measured_steps",
        got
        == {"first_step": 0, "last_step": STEPS - 1, "step_count": STEPS}
        | {"warmup_steps_excluded": 3},
        got,
    )


@section
def kineto_import() -> None:
    t = open_trace(OUT / "kineto")
    raw = json.loads((OUT / "profile.json.torch_trace.json").read_text())["traceEvents"]
    n = sum(1 for e in raw if e.get("cat") == "kernel")
    check("kineto_import_kernel_count", len(t.df("kernels")) == n, [len(t.df("kernels")), n])


@section
def inproc() -> None:
    t = open_trace(OUT / "inproc.json.trace")
    rows = {n: len(t.df(n)) for n in ("kernels", "runtime", "markers", "devices", "memory")}
    res["inproc_rows"] = rows
    check("inproc_kernels_and_runtime", rows["kernels"] > 0 and rows["runtime"] > 0, rows)
    check("inproc_markers", rows["markers"] >= STEPS, rows["markers"])


@section
def demo() -> None:
    t = open_trace(OUT / "demo")
    rows = {n: len(t.df(n)) for n in ("kernels", "steps", "markers", "memory")}
    res["demo_rows"] = rows
    res["demo_backend"] = t.meta.get("backend")
    check("demo_cupti_with_steps", t.meta.get("backend") == "cupti" and rows["steps"] > 0, rows)


@section
def torchcap() -> None:
    t = open_trace(OUT / "torchcap")
    k = t.df("kernels")
    rows = {
        "kernels_cuda": int((k["device_type"] == "cuda").sum()),
        "kernels_cpu": int((k["device_type"] == "cpu").sum()),
        "memory": len(t.df("memory")),
    }
    res["torchcap_rows"] = rows
    check("torchcap_cuda_kernels", rows["kernels_cuda"] > 0, rows)


@section
def artifacts() -> None:
    tp = OUT / "profile.json.torch_trace.json"
    if tp.exists():
        with (
            tp.open("rb") as src,
            gzip.open(OUT / "h200_resnet50_torch_profiler.json.gz", "wb", 6) as dst,
        ):
            dst.write(src.read())


res["ok"] = all(c["ok"] for c in res["checks"].values()) and not res["errors"]


def _json_keys(v: object) -> object:
    """JSON wants string keys: a figure keyed by (rank, device) becomes "rank,device"."""
    if isinstance(v, dict):
        return {
            (",".join(map(str, k)) if isinstance(k, tuple) else k): _json_keys(x)
            for k, x in v.items()
        }
    if isinstance(v, list):
        return [_json_keys(x) for x in v]
    return v


res = _json_keys(res)
(OUT / "results.json").write_text(json.dumps(res, indent=1, default=str))
print(
    json.dumps(
        {k: v for k, v in res.items() if k in ("checks", "throughput", "errors")},
        indent=1,
        default=str,
    )
)
sys.exit(0 if res["ok"] else 1)
