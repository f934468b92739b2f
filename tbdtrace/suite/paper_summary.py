"""``paper_summary.md``: TBD's published findings, each checked against the sweep's rows.

One :class:`Finding` per claim of the TBD paper as the reference sheet lists them
(/work/shared/reference/tbd.md, section 6b): a verdict computed from the rows (shown,
partly shown, not shown) with the numbers behind it, or "not measurable" with the reason
when the rows cannot say (no GPU kernels on a CPU machine, a single framework, one batch
size). The thresholds that turn numbers into verdicts are constants here, stated in the
summary and in docs/WORKLOADS.md.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from tbdtrace import schema
from tbdtrace.output_policy import replace
from tbdtrace.suite.paper import OUT_OF_MEMORY, SKIPPED, SUMMARY_MD
from tbdtrace.suite.plan import BenchConfig

Rows = Sequence[dict[str, Any]]

SHOWN, PARTLY, NOT_SHOWN, NOT_MEASURABLE = "shown", "partly shown", "not shown", "not measurable"

# A series rises when its value at the largest batch is at least RISE_RATIO times its value
# at the smallest; falls at 1 / RISE_RATIO or below; otherwise it is flat.
RISE_RATIO = 1.10
# A rising series has saturated when its last step (the two largest batches) gains less
# than this per doubling of the batch.
SATURATION_GAIN = 0.05
HIGH_UTILIZATION = 0.80  # "high" GPU compute utilization
MODERATE_BATCH = 32  # "moderate" mini-batch (TBD's CNN batch)
LOW_FP32 = 0.50  # "well below peak": under half the peak FP32 rate
LOW_CPU = 0.25  # "low" CPU utilization: a quarter of the machine's logical CPUs
GOOD_SCALING = 0.80  # data-parallel scaling efficiency that "scales well"

CNN_CLASSIFIERS = ("resnet50", "inception_v3")
RNN_MODELS = ("seq2seq", "deepspeech2")  # LSTM, GRU
LOW_UTIL_MODELS = ("a3c", "wgan")


@dataclass(frozen=True)
class Finding:
    claim: str  # TBD's finding
    verdict: str  # SHOWN | PARTLY | NOT_SHOWN | NOT_MEASURABLE
    detail: str  # the numbers behind the verdict and what they cover, or why not measurable


@dataclass(frozen=True)
class Trend:
    points: tuple[tuple[int, float], ...]  # (batch, value), ascending batch
    ratio: float  # value at the largest batch / at the smallest
    kind: str  # rising | flat | falling
    top_gain: float | None  # gain per doubling between the two largest batches (3+ points)
    saturated: bool | None  # rising and top_gain < SATURATION_GAIN; None: not decidable


def trend(points: Sequence[tuple[int, float]]) -> Trend:
    """Classify a series of (batch, value) with two or more distinct batches."""
    pts = tuple(sorted(points))
    first, last = pts[0][1], pts[-1][1]
    ratio = last / first if first > 0 else (math.inf if last > 0 else 1.0)
    kind = "rising" if ratio >= RISE_RATIO else "falling" if ratio <= 1 / RISE_RATIO else "flat"
    top_gain = saturated = None
    if len(pts) >= 3:
        (b1, y1), (b2, y2) = pts[-2], pts[-1]
        if y1 > 0 and y2 > 0:
            top_gain = (y2 / y1) ** (1 / math.log2(b2 / b1)) - 1
    if kind == "rising" and top_gain is not None:
        saturated = top_gain < SATURATION_GAIN
    return Trend(pts, ratio, kind, top_gain, saturated)


def label(r: dict[str, Any]) -> str:
    """``model framework`` plus the run's dimensions where they are not the default."""
    out = f"{r['model']} {r['framework']}"
    if r.get("nproc") not in (None, 1):
        out += f" n{r['nproc']}"
    if r.get("precision") not in (None, "fp32"):
        out += f" {r['precision']}"
    if r.get("compiled") == "yes":
        out += " compiled"
    return out


def _ok(rows: Rows) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status") == "ok" and r.get("batch_size") is not None]


def series(rows: Rows, col: str) -> dict[str, list[tuple[int, float]]]:
    """Per :func:`label`: (batch, ``col``) of its ok rows with the value known."""
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in _ok(rows):
        if r.get(col) is not None:
            out[label(r)].append((int(r["batch_size"]), float(r[col])))
    return {k: sorted(v) for k, v in sorted(out.items())}


def _batches(pts: Sequence[tuple[int, float]]) -> str:
    lo, hi = pts[0][0], pts[-1][0]
    return f"batch {lo}" if lo == hi else f"batch {lo}-{hi}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _share(n: int, of: int) -> str:
    return SHOWN if n == of else PARTLY if n else NOT_SHOWN


def _rise_finding(
    rows: Rows, col: str, claim: str, fmt: Callable[[float], str], none_why: str
) -> Finding:
    data = series(rows, col)
    swept = {k: v for k, v in data.items() if len({b for b, _ in v}) > 1}
    if not data:
        return Finding(claim, NOT_MEASURABLE, none_why)
    if not swept:
        return Finding(claim, NOT_MEASURABLE, "no model ran at two or more batch sizes")
    trends = {k: trend(v) for k, v in swept.items()}
    up = [k for k, t in trends.items() if t.kind == "rising"]
    parts = [
        f"{k}: {t.kind}, x{t.ratio:.2f} over {_batches(t.points)} "
        f"({fmt(t.points[0][1])} to {fmt(t.points[-1][1])})"
        for k, t in trends.items()
    ]
    sat = [k for k, t in trends.items() if t.saturated]
    going = [k for k, t in trends.items() if t.saturated is False]
    tail = ""
    if sat or going:
        tail = "; saturated at the top of the sweep (last step under "
        tail += f"+{SATURATION_GAIN:.0%} per doubling): {', '.join(sat) or 'none'}"
        tail += "; still rising at the largest batch run: "
        tail += ", ".join(f"{k} (+{trends[k].top_gain:.0%} per doubling)" for k in going) or "none"
    text = f"rises (x{RISE_RATIO:.2f} or more) for {len(up)} of {len(trends)} pairs. "
    return Finding(claim, _share(len(up), len(trends)), text + "; ".join(parts) + tail + ".")


def _ended_by_memory(rows: Rows) -> dict[str, int]:
    """Per label: the smallest batch of the sweep that ran out of memory or was skipped
    as not fitting."""
    out: dict[str, int] = {}
    for r in rows:
        if r.get("status") in (OUT_OF_MEMORY, SKIPPED) and r.get("batch_size") is not None:
            k, b = label(r), int(r["batch_size"])
            out[k] = min(out.get(k, b), b)
    return out


def memory_limits(rows: Rows) -> Finding:
    claim = (
        "For some models throughput has not saturated when GPU memory runs out, so memory "
        "capacity limits performance"
    )
    ended = _ended_by_memory(rows)
    if not ended:
        return Finding(
            claim,
            NOT_MEASURABLE,
            "no sweep ran out of memory: every batch size run fit the device",
        )
    data = series(rows, "throughput_samples_per_s")
    trends = {k: trend(data[k]) for k in ended if len({b for b, _ in data.get(k, [])}) > 1}
    decided = {k: t for k, t in trends.items() if t.top_gain is not None}
    if not decided:
        return Finding(
            claim,
            NOT_MEASURABLE,
            "the sweeps that ran out of memory ("
            + ", ".join(f"{k} at batch {b}" for k, b in ended.items())
            + ") have fewer than three batch sizes with a throughput before it",
        )
    going = [k for k, t in decided.items() if t.top_gain >= SATURATION_GAIN]  # type: ignore[operator]
    parts = [
        f"{k}: memory ran out at batch {ended[k]}, throughput "
        f"{t.top_gain:+.0%} per doubling over {_batches(t.points[-2:])}"
        for k, t in decided.items()
    ]
    verdict = SHOWN if going else NOT_SHOWN
    return Finding(
        claim,
        verdict,
        f"{len(going)} of {len(decided)} sweeps that ran out of memory were still rising "
        f"(+{SATURATION_GAIN:.0%} or more per doubling) at their largest batch. "
        + "; ".join(parts)
        + ".",
    )


def _no_gpu(rows: Rows) -> str:
    return (
        "no row has GPU kernels (the rows trained on the CPU), so there is no GPU compute "
        "utilization; the CPU utilization column measures the training itself"
        if _ok(rows)
        else "no run succeeded"
    )


def cnn_high_utilization(rows: Rows) -> Finding:
    claim = (
        f"CNN image classifiers reach high GPU compute utilization (>= "
        f"{HIGH_UTILIZATION:.0%}) at a moderate batch (<= {MODERATE_BATCH})"
    )
    data = {
        k: v
        for k, v in series(rows, "gpu_utilization").items()
        if k.split(" ")[0] in CNN_CLASSIFIERS
    }
    if not data:
        why = (
            _no_gpu(rows)
            if not series(rows, "gpu_utilization")
            else "no ResNet-50 or Inception-v3 row with GPU utilization"
        )
        return Finding(claim, NOT_MEASURABLE, why)
    parts, hit = [], 0
    for k, pts in data.items():
        first = next((b for b, u in pts if u >= HIGH_UTILIZATION), None)
        if first is not None and first <= MODERATE_BATCH:
            hit += 1
        top = max(u for _, u in pts)
        parts.append(
            f"{k}: {'first at batch ' + str(first) if first is not None else 'not reached'}, "
            f"highest {_pct(top)} over {_batches(pts)}"
        )
    return Finding(claim, _share(hit, len(data)), "; ".join(parts) + ".")


def fp32_low(rows: Rows) -> Finding:
    claim = f"FP32 efficiency stays well below peak (under {LOW_FP32:.0%})"
    data = series(rows, "fp32_efficiency")
    if not data:
        return Finding(claim, NOT_MEASURABLE, "no row has an FP32 efficiency (no FLOP count)")
    low = [k for k, v in data.items() if max(x for _, x in v) < LOW_FP32]
    parts = [
        f"{k}: highest {_pct(max(x for _, x in v))} over {_batches(v)}" for k, v in data.items()
    ]
    note = "" if series(rows, "gpu_utilization") else " (of the CPU's peak: CPU training)"
    return Finding(claim, _share(len(low), len(data)), "; ".join(parts) + note + ".")


def rnn_below_cnn(rows: Rows) -> Finding:
    claim = "LSTM/RNN models (Seq2Seq, Deep Speech 2) have lower FP32 efficiency than CNNs"
    by_fw: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in _ok(rows):
        if r.get("fp32_efficiency") is None:
            continue
        group = (
            "rnn" if r["model"] in RNN_MODELS else "cnn" if r["model"] in CNN_CLASSIFIERS else None
        )
        if group:
            by_fw[r["framework"]][group].append(float(r["fp32_efficiency"]))
    both = {fw: g for fw, g in sorted(by_fw.items()) if g["rnn"] and g["cnn"]}
    if not both:
        return Finding(
            claim,
            NOT_MEASURABLE,
            "no framework has FP32 efficiency rows of both an RNN model (seq2seq, "
            "deepspeech2) and a CNN classifier (resnet50, inception_v3)",
        )
    lower = [fw for fw, g in both.items() if median(g["rnn"]) < median(g["cnn"])]
    parts = [
        f"{fw}: median RNN {_pct(median(g['rnn']))} ({len(g['rnn'])} rows) vs CNN "
        f"{_pct(median(g['cnn']))} ({len(g['cnn'])} rows)"
        for fw, g in both.items()
    ]
    return Finding(claim, _share(len(lower), len(both)), "; ".join(parts) + ".")


def cpu_low(rows: Rows) -> Finding:
    claim = f"CPU utilization is low during GPU training (under {LOW_CPU:.0%} of the CPUs)"
    gpu = [
        r
        for r in _ok(rows)
        if r.get("gpu_utilization") is not None and r.get("cpu_utilization") is not None
    ]
    if not gpu:
        return Finding(claim, NOT_MEASURABLE, _no_gpu(rows))
    low = [r for r in gpu if r["cpu_utilization"] < LOW_CPU]
    vals = [float(r["cpu_utilization"]) for r in gpu]
    return Finding(
        claim,
        _share(len(low), len(gpu)),
        f"{len(low)} of {len(gpu)} GPU rows under {LOW_CPU:.0%}; the workload's process "
        f"tree used {_pct(min(vals))} to {_pct(max(vals))} of the machine's logical CPUs.",
    )


def activations_dominate(rows: Rows) -> Finding:
    claim = (
        "Feature maps (activations) are the largest memory consumer; weights and "
        "gradients are a small share"
    )
    split: list[tuple[dict[str, Any], dict[str, Any]]] = []
    unsplit: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for r in _ok(rows):
        parts = {c: r.get(f"{c}_bytes") for c in schema.MEMORY_CATEGORIES}
        if all(v is None for v in parts.values()):
            continue
        (unsplit if parts["activations"] is None else split).append((r, parts))
    if not split:
        why = "no row has a memory breakdown"
        if unsplit:
            fws = sorted({r["framework"] for r, _ in unsplit})
            why = f"the {', '.join(fws)} captures here do not tell activations apart"
        return Finding(claim, NOT_MEASURABLE, why)
    top: list[str] = []
    shares: list[float] = []
    wg: list[float] = []
    others: list[str] = []
    for r, parts in split:
        vals = {c: int(v or 0) for c, v in parts.items()}
        total = sum(vals.values())
        if not total:
            continue
        largest = max(vals, key=lambda c: vals[c])
        (top if largest == "activations" else others).append(
            f"{label(r)} b{r['batch_size']}" + ("" if largest == "activations" else f": {largest}")
        )
        shares.append(vals["activations"] / total)
        wg.append((vals["weights"] + vals["gradients"]) / total)
    n = len(top) + len(others)
    if not n:
        return Finding(claim, NOT_MEASURABLE, "every breakdown is empty")
    text = (
        f"activations are the largest category in {len(top)} of {n} rows (share of the "
        f"breakdown at the peak {_pct(min(shares))} to {_pct(max(shares))}; weights and "
        f"gradients together {_pct(min(wg))} to {_pct(max(wg))})"
    )
    if others:
        text += "; largest category elsewhere: " + ", ".join(others)
    if unsplit:
        text += (
            f"; {len(unsplit)} rows without the split ("
            + ", ".join(sorted({r["framework"] for r, _ in unsplit}))
            + " captures count activations in other)"
        )
    return Finding(claim, _share(len(top), n), text + ".")


def no_single_winner(rows: Rows) -> Finding:
    claim = "No single framework is fastest on every model"
    by_model: dict[str, dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in _ok(rows):
        if r.get("throughput_samples_per_s") is None:
            continue
        dims = label(r).split(" ", 2)[2:]  # same nproc, precision, compilation only
        by_model[" ".join([r["model"], *dims])][int(r["batch_size"])][r["framework"]] = float(
            r["throughput_samples_per_s"]
        )
    winners: dict[str, tuple[str, int]] = {}
    for model, at in sorted(by_model.items()):
        fws = set().union(*(set(v) for v in at.values()))
        common = [b for b, v in at.items() if len(fws) > 1 and set(v) == fws]
        if common:
            b = max(common)
            winners[model] = (max(at[b], key=lambda fw: at[b][fw]), b)
    if len(winners) < 2:
        return Finding(
            claim,
            NOT_MEASURABLE,
            "fewer than two models ran on two or more frameworks at a common batch size",
        )
    parts = [f"{m}: {fw} (batch {b})" for m, (fw, b) in winners.items()]
    distinct = {fw for fw, _ in winners.values()}
    verdict = SHOWN if len(distinct) > 1 else NOT_SHOWN
    return Finding(
        claim,
        verdict,
        "fastest at the largest batch all its frameworks ran: " + "; ".join(parts) + ".",
    )


def scaling_good(rows: Rows) -> Finding:
    claim = (
        f"Data-parallel training on several GPUs of one machine scales well for CNNs "
        f"(efficiency >= {GOOD_SCALING:.0%})"
    )
    multi = [
        r
        for r in _ok(rows)
        if (r.get("nproc") or 1) > 1
        and r.get("scaling_efficiency") is not None
        and r["model"] in CNN_CLASSIFIERS
    ]
    if not multi:
        return Finding(
            claim,
            NOT_MEASURABLE,
            "no CNN classifier row with several ranks and a one-rank row to compare "
            "(run the sweep with --nproc 1,2 on a machine with GPUs)",
        )
    if not any(r.get("gpu_utilization") is not None for r in multi):
        return Finding(
            claim, NOT_MEASURABLE, "the ranks were CPU processes, not GPUs (no GPU kernels)"
        )
    good = [r for r in multi if r["scaling_efficiency"] >= GOOD_SCALING]
    parts = [
        f"{label(r)} b{r['batch_size']}: {_pct(float(r['scaling_efficiency']))}" for r in multi
    ]
    return Finding(claim, _share(len(good), len(multi)), "; ".join(parts) + ".")


def rl_gan_low_utilization(rows: Rows) -> Finding:
    claim = "A3C and WGAN have low GPU utilization (below the other models')"
    util = [r for r in _ok(rows) if r.get("gpu_utilization") is not None]
    if not util:
        return Finding(claim, NOT_MEASURABLE, _no_gpu(rows))
    mine = {
        m: [float(r["gpu_utilization"]) for r in util if r["model"] == m] for m in LOW_UTIL_MODELS
    }
    mine = {m: v for m, v in mine.items() if v}
    rest = [float(r["gpu_utilization"]) for r in util if r["model"] not in LOW_UTIL_MODELS]
    if not mine or not rest:
        return Finding(
            claim,
            NOT_MEASURABLE,
            "the GPU rows need both A3C or WGAN and another model to compare",
        )
    below = [m for m, v in mine.items() if median(v) < median(rest)]
    parts = [f"{m}: median {_pct(median(v))} ({len(v)} rows)" for m, v in mine.items()]
    return Finding(
        claim,
        _share(len(below), len(mine)),
        "; ".join(parts) + f"; the other models: median {_pct(median(rest))} ({len(rest)} rows).",
    )


def findings(rows: Rows) -> list[Finding]:
    """Every finding, in the order of the reference sheet."""
    return [
        _rise_finding(
            rows,
            "throughput_samples_per_s",
            "Throughput rises with the mini-batch",
            lambda x: f"{x:.4g} samples/s",
            "no row has a throughput",
        ),
        memory_limits(rows),
        _rise_finding(
            rows,
            "gpu_utilization",
            "GPU compute utilization rises with the mini-batch",
            _pct,
            _no_gpu(rows),
        ),
        cnn_high_utilization(rows),
        fp32_low(rows),
        rnn_below_cnn(rows),
        cpu_low(rows),
        activations_dominate(rows),
        no_single_winner(rows),
        scaling_good(rows),
        rl_gan_low_utilization(rows),
    ]


def coverage(rows: Rows, cfg: BenchConfig, device: str) -> str:
    """What the rows cover: run counts, device, size, frameworks, models and batches."""
    status: dict[str, int] = defaultdict(int)
    for r in rows:
        status[str(r.get("status"))] += 1
    counts = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in sorted(status.items()))
    gpu = any(r.get("gpu_utilization") is not None for r in rows)
    batches: dict[str, list[int]] = defaultdict(list)
    for r in _ok(rows):
        batches[r["model"]].append(int(r["batch_size"]))
    models = ", ".join(
        f"{m} (batch {min(b)}-{max(b)})" if min(b) != max(b) else f"{m} (batch {b[0]})"
        for m, b in sorted(batches.items())
    )
    fws = ", ".join(sorted({str(r["framework"]) for r in _ok(rows)})) or "none"
    steps = (
        "trained to quality"
        if cfg.to_quality
        else f"{cfg.steps} measured steps after {cfg.warmup} warm-up"
    )
    return (
        f"{len(rows)} runs ({counts}); device `{device}`"
        + ("" if gpu else " (no GPU kernels in the rows)")
        + f", size `{cfg.size}`, {steps}; frameworks: {fws}; ok rows by model: "
        + (models or "none")
        + "."
    )


def markdown(rows: Rows, cfg: BenchConfig, device: str, figure_names: Sequence[str]) -> str:
    """The summary document."""
    lines = [
        "# TBD's findings in this sweep",
        "",
        "Rows: " + coverage(rows, cfg, device),
        "",
        "TBD (Zhu et al., IISWC 2018) trained at its paper sizes on a Quadro P4000 (8 GB); "
        "its findings are recalled from the paper (reference sheet, not re-verified against "
        "the PDF). Each line below is computed from this sweep's rows (bench.csv) and says "
        "what they show at this size and on this device, not whether TBD's numbers are "
        f"reproduced. Thresholds: rises = x{RISE_RATIO:.2f} or more from the smallest to the "
        f"largest batch; saturated = under +{SATURATION_GAIN:.0%} per doubling between the two "
        f"largest batches; high utilization >= {HIGH_UTILIZATION:.0%}; moderate batch <= "
        f"{MODERATE_BATCH}; well below peak < {LOW_FP32:.0%}; low CPU < {LOW_CPU:.0%}; "
        f"scales well >= {GOOD_SCALING:.0%}.",
        "",
    ]
    for f in findings(rows):
        detail = f.detail if f.detail.endswith(".") else f.detail + "."  # names stay lower case
        lines.append(f"- **{f.claim}**: {f.verdict}. {detail}")
    lines += ["", "## Figures", ""]
    if figure_names:
        lines += [f"![{n}]({n})" for n in figure_names]
    else:
        lines.append("No figure: no run succeeded.")
    return "\n".join(lines) + "\n"


def write(rows: Rows, cfg: BenchConfig, device: str, figure_paths: Sequence[Path] = ()) -> Path:
    """Write ``paper_summary.md`` in ``cfg.out_dir``, linking the PNG figures among
    ``figure_paths`` (relative names: they lie beside it)."""
    out = Path(cfg.out_dir) / SUMMARY_MD
    out.parent.mkdir(parents=True, exist_ok=True)
    names = [p.name for p in figure_paths if p.suffix == ".png"]
    replace(out, markdown(rows, cfg, device, names).encode())
    return out
