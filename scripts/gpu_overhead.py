"""The capture-overhead protocol (issue "capture that does not perturb training", item 6),
run by scripts/gpu_overhead.sh on a GPU machine in at most BUDGET_S seconds (default 300).

Stage M, micro (a fresh process per mode: plain, lite, full, torch.profiler): ns per kernel
launch (``torch.cuda._sleep(0)``) and per filtered API call (``torch.cuda.current_device()``,
one cudaGetDevice each, a call the lite set leaves off), each the median of 5 blocks.

Stage T, training: ResNet-50, batch 64, synthetic data on the GPU, cudnn.benchmark off.
Modes: plain (P, twice per round), lite (L: ``capture --api lite --no-torch-memory``), lite +
memory (LM: ``capture``, the default), torch.profiler (K: CPU + CUDA activities). A fresh
process per run; 15 warm-up steps with the tool already active, then 100 timed steps;
4 rounds (5 when the budget allows), the order of modes rotated each round. Throughput =
images / wall time of the timed window (periodic costs included). Overhead per round,
paired: 1 - thr(mode) / mean(thr(P), thr(P2)); the median over rounds with a bootstrap
90% interval (resampling rounds); P vs P2 is the noise floor.

Pass rule: for L and LM, median overhead <= 2% and the interval's upper end <= 3%, and the
paired difference to K (overhead(mode) - overhead(K)) has its interval's upper end below 0.

Results: OUT/overhead.json, and a table printed last that names the card.

    python scripts/gpu_overhead.py all --out DIR [--budget-s 300] [--rounds 4]
    python scripts/gpu_overhead.py micro|train --mode MODE --out FILE.json   (one child run)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NO_GPU = "no CUDA device (torch.cuda.is_available() is False); this stage needs a GPU"
CAPTURE = {  # mode -> capture options (None: no capture command)
    "plain": None,
    "plain2": None,
    "lite": ["--api", "lite", "--no-torch-memory"],
    "litemem": ["--api", "lite"],
    "full": ["--api", "full", "--no-torch-memory"],
    "torchprof": None,
}
MICRO_MODES = ("plain", "lite", "full", "torchprof")
TRAIN_MODES = ("plain", "lite", "litemem", "torchprof", "plain2")


def _torch_or_exit() -> Any:
    import torch

    if not torch.cuda.is_available():
        print(f"gpu_overhead: {NO_GPU}", file=sys.stderr)
        raise SystemExit(1)
    return torch


def _profiler(torch: Any, mode: str) -> Any:
    if mode != "torchprof":
        return None
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    prof = torch.profiler.profile(activities=acts)
    prof.__enter__()
    return prof


def _blocks(fn: Any, n: int, blocks: int, sync: Any) -> float:
    """Median over ``blocks`` of the ns per call of ``n`` calls of ``fn``."""
    out = []
    for _ in range(blocks):
        sync()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        sync()
        out.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(out)


def child_micro(mode: str, out: Path) -> None:
    torch = _torch_or_exit()
    prof = _profiler(torch, mode)
    sync = torch.cuda.synchronize
    for _ in range(2000):  # warm-up: module loading, first buffers
        torch.cuda._sleep(0)
    sync()
    launch = _blocks(lambda: torch.cuda._sleep(0), 4000, 5, sync)
    api = _blocks(torch.cuda.current_device, 40000, 5, lambda: None)
    if prof is not None:
        prof.__exit__(None, None, None)
    out.write_text(json.dumps({"mode": mode, "ns_per_launch": launch, "ns_per_api_call": api}))


def child_train(mode: str, out: Path, warmup: int, steps: int, batch: int) -> None:
    torch = _torch_or_exit()
    import torchvision

    torch.backends.cudnn.benchmark = False
    dev = torch.device("cuda")
    model = torchvision.models.resnet50().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (batch,), device=dev)
    lossf = torch.nn.CrossEntropyLoss()
    prof = _profiler(torch, mode)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        lossf(model(x), y).backward()
        opt.step()

    for _ in range(warmup):  # with the tool already active
        step()
    torch.cuda.synchronize()
    cpu0, t0 = time.thread_time_ns(), time.perf_counter_ns()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    wall, cpu = time.perf_counter_ns() - t0, time.thread_time_ns() - cpu0
    if prof is not None:
        prof.__exit__(None, None, None)
    res = {
        "mode": mode,
        "images_per_s": batch * steps / (wall / 1e9),
        "cpu_ms_per_step": cpu / 1e6 / steps,
        "steps": steps,
        "card": torch.cuda.get_device_name(0),
        "sm_clock_mhz": _sm_clock(),
    }
    out.write_text(json.dumps(res))


def _sm_clock() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
    except Exception:  # NVML is optional here: the figure is context, not a result
        return None


def _run(stage: str, mode: str, work: Path, i: int, timeout: float) -> dict[str, Any]:
    """One fresh process; ({...} or {"error": line})."""
    res = work / f"{stage}-{mode}-{i}.json"
    child = [
        sys.executable,
        str(Path(__file__).resolve()),
        stage,
        "--mode",
        mode,
        "--out",
        str(res),
    ]
    opts = CAPTURE[mode]
    if opts is not None:
        trace = work / f"trace-{stage}-{mode}-{i}"
        cmd = [sys.executable, "-m", "tbdtrace", "capture", "--backend", "cupti", "--force",
               "--out", str(trace), *opts, "--", *child]  # fmt: skip
    else:
        cmd = child
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"{stage} {mode}: over {timeout:.0f} s"}
    (work / f"{stage}-{mode}-{i}.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0 or not res.exists():
        lines = [ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()]
        last = lines[-1].removeprefix("gpu_overhead: ") if lines else f"exit {r.returncode}"
        return {"error": f"{mode}: {last}"}
    return dict(json.loads(res.read_text()))


def _bootstrap(xs: list[float], n: int = 10000, seed: int = 1) -> tuple[float, float, float]:
    """(median, 5th, 95th percentile of the median over resampled rounds)."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return statistics.median(xs), meds[int(0.05 * n)], meds[int(0.95 * n) - 1]


def analyse(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Paired per-round overheads against the round's plain runs, and the pass rule."""
    per: dict[str, list[float]] = {m: [] for m in ("lite", "litemem", "torchprof")}
    noise: list[float] = []
    for rd in rounds:
        p = [rd[m]["images_per_s"] for m in ("plain", "plain2") if "images_per_s" in rd.get(m, {})]
        if len(p) < 2:
            continue
        noise.append(1 - p[1] / p[0])
        base = statistics.mean(p)
        for m in per:
            if "images_per_s" in rd.get(m, {}):
                per[m].append(1 - rd[m]["images_per_s"] / base)
    out: dict[str, Any] = {"rounds_used": len(noise)}
    if len(noise) < 3:
        out["verdict"] = "not enough complete rounds (need 3)"
        return out
    out["noise_floor"] = dict(zip(("median", "lo90", "hi90"), _bootstrap(noise), strict=True))
    ok = True
    for m, xs in per.items():
        med, lo, hi = _bootstrap(xs)
        out[m] = {"overhead_median": med, "lo90": lo, "hi90": hi, "rounds": xs}
        if m != "torchprof" and len(xs) == len(per["torchprof"]):
            d = [a - b for a, b in zip(xs, per["torchprof"], strict=True)]
            dm, dlo, dhi = _bootstrap(d)
            out[m]["minus_torchprof"] = {"median": dm, "lo90": dlo, "hi90": dhi}
            passed = med <= 0.02 and hi <= 0.03 and dhi < 0
            out[m]["pass"] = passed
            ok &= passed
    out["verdict"] = "pass" if ok else "fail"
    return out


def main_all(args: argparse.Namespace) -> int:
    out = Path(args.out)
    work = out / "overhead"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    left = lambda: args.budget_s - (time.monotonic() - t0)  # noqa: E731
    doc: dict[str, Any] = {"micro": {}, "train": {"rounds": []}, "errors": []}
    for mode in MICRO_MODES:  # stage M
        r = _run("micro", mode, work, 0, min(90.0, max(left(), 1)))
        if "error" in r:
            doc["errors"].append(f"micro: {r['error']}")
            print(f"gpu_overhead: stage micro: {r['error']}", file=sys.stderr)
            break
        doc["micro"][mode] = r
    card = None
    for rnd in range(args.rounds):  # stage T
        order = TRAIN_MODES[rnd % len(TRAIN_MODES) :] + TRAIN_MODES[: rnd % len(TRAIN_MODES)]
        if left() < 5 * 15 and rnd >= 3:
            doc["errors"].append(f"train: round {rnd + 1} skipped (budget)")
            break
        rd: dict[str, Any] = {}
        for mode in order:
            r = _run("train", mode, work, rnd, min(120.0, max(left(), 1)))
            rd[mode] = r
            card = card or r.get("card")
            if "error" in r:
                break
        doc["train"]["rounds"].append({"order": list(order), **rd})
        err = next((v["error"] for v in rd.values() if "error" in v), None)
        if err:
            doc["errors"].append(f"train: {err}")
            print(f"gpu_overhead: stage train: {err}", file=sys.stderr)
            break
    doc["card"] = card
    doc["train"]["analysis"] = analyse(doc["train"]["rounds"])
    if doc["micro"].get("plain"):
        pl = doc["micro"]["plain"]
        doc["micro"]["added_ns"] = {
            m: {
                "per_launch": v["ns_per_launch"] - pl["ns_per_launch"],
                "per_api_call": v["ns_per_api_call"] - pl["ns_per_api_call"],
            }
            for m, v in doc["micro"].items()
            if m not in ("plain", "added_ns")
        }
    doc["seconds"] = round(time.monotonic() - t0, 1)
    (out / "overhead.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(table(doc))
    return 0 if doc["train"]["analysis"].get("verdict") == "pass" else 1


def table(doc: dict[str, Any]) -> str:
    card = doc.get("card") or "no GPU"
    lines = [f"capture overhead on {card} (ResNet-50 b64, synthetic data; {doc['seconds']} s)"]
    for m, v in (doc["micro"].get("added_ns") or {}).items():
        lines.append(f"  micro {m:<10} +{v['per_launch']:8.0f} ns/launch  "
                     f"+{v['per_api_call']:8.0f} ns/filtered call  [{card}]")  # fmt: skip
    an = doc["train"]["analysis"]
    if "noise_floor" in an:
        nf = an["noise_floor"]
        lines.append(f"  train plain vs plain {nf['median']:+.2%} [{nf['lo90']:+.2%}, "
                     f"{nf['hi90']:+.2%}]  [{card}]")  # fmt: skip
        for m in ("lite", "litemem", "torchprof"):
            v = an[m]
            tail = f"  pass={v['pass']}" if "pass" in v else ""
            lines.append(f"  train {m:<10} overhead {v['overhead_median']:+.2%} 90% "
                         f"[{v['lo90']:+.2%}, {v['hi90']:+.2%}]{tail}  [{card}]")  # fmt: skip
    lines.append(f"  verdict: {an.get('verdict')}  rounds: {an.get('rounds_used', 0)}")
    lines += [f"  error: {e}" for e in doc["errors"]]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("all")
    a.add_argument("--out", required=True)
    a.add_argument("--budget-s", type=float, default=300)
    a.add_argument("--rounds", type=int, default=4)
    for name in ("micro", "train"):
        c = sub.add_parser(name)
        c.add_argument("--mode", required=True, choices=sorted(CAPTURE))
        c.add_argument("--out", required=True)
        c.add_argument("--warmup", type=int, default=15)
        c.add_argument("--steps", type=int, default=100)
        c.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    if args.cmd == "all":
        raise SystemExit(main_all(args))
    if args.cmd == "micro":
        child_micro(args.mode, Path(args.out))
    else:
        child_train(args.mode, Path(args.out), args.warmup, args.steps, args.batch)


if __name__ == "__main__":
    main()
