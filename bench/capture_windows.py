"""A capture window against a full capture: bytes written, and the same steps' report.

Runs a small ResNet-like PyTorch CNN through the workload harness for ``--steps`` steps (200) under
``tbdtrace capture --backend torch`` twice per round, alternating: the whole run, and a
window of ``--window`` (``100:103``: 4 steps). Goals (issue 31): the window's trace is at
most 1/20 of the bytes of the full one, and the report of the window equals the report of
the same steps cut from the full capture (``report --steps A:B``): per step, the kernels and
ops by name and count (read from the tables here, independently of the report), the
report's kernel and op tables by name and count, and the kernel time within the spread of
the full captures' runs. Prints a table and the verdicts; ``--json FILE`` writes them.

    .venv/bin/python bench/capture_windows.py [--rounds 3] [--steps 200] [--window 100:103]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tbdtrace  # noqa: E402

# A ResNet-like CNN (conv-BN-ReLU blocks with skips) on small images: a step of a few hundred
# ops, as a real training step has (a two-layer toy would measure Parquet's fixed cost).
PROGRAM = """
import sys, torch
from workloads import harness
torch.manual_seed(0)
class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(c)
    def forward(self, x):
        return torch.relu(x + self.bn(self.conv(x)))
net = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), *[Block(16) for _ in range(8)],
    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10),
)
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
def step(i):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
    return float(loss)
args = harness.HarnessArgs(batch_size=8, steps=int(sys.argv[1]), warmup=0, device="cpu",
                           size="tiny", seed=0, no_eval=True)
harness.train("cnn", "pytorch", args, step)
"""


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def capture(tmp: Path, name: str, steps: int, window: str | None) -> tuple[Path, float]:
    out = tmp / name
    cmd = [sys.executable, "-m", "tbdtrace", "capture", "--force", "--backend", "torch"]
    cmd += ["--out", str(out)] + (["--steps", window] if window else [])
    cmd += ["--", sys.executable, str(tmp / "prog.py"), str(steps)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    t0 = time.monotonic()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return out, time.monotonic() - t0


def per_step(path: Path, first: int, last: int) -> dict[int, dict[str, Any]]:
    """Per step: kernel and op names with counts, from the tables (rows starting inside)."""
    tr = tbdtrace.open(path)
    spans = [s for s in tr.table("steps").to_pylist() if first <= s["step"] <= last]
    out: dict[int, dict[str, Any]] = {}
    tables = {t: tr.table(t, ["name", "start_ns"]).to_pylist() for t in ("kernels", "ops")}
    for s in spans:
        out[s["step"]] = {
            t: dict(
                collections.Counter(
                    r["name"] for r in rows if s["start_ns"] <= r["start_ns"] < s["end_ns"]
                )
            )
            for t, rows in tables.items()
        }
    return out


def report(path: Path, window: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "tbdtrace", "report", str(path), "--steps", window]
    r = subprocess.run([*cmd, "--format", "json"], check=True, capture_output=True, text=True)
    d = json.loads(r.stdout)
    return {
        "kernels": {k["name"]: k["count"] for k in d["kernels"]},
        "ops": {o["op"]: o["kernel_count"] for o in d["hotspots"]["ops"]},
        "kernel_time_ns": d["summary"]["kernel_time_ns"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--window", default="100:103")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    first, last = (int(v) for v in a.window.split(":"))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tbdtrace-bench-windows-") as d:
        tmp = Path(d)
        (tmp / "prog.py").write_text(PROGRAM)
        for r in range(a.rounds):
            for kind in ("full", "window"):
                path, wall = capture(
                    tmp, f"{kind}{r}", a.steps, a.window if kind == "window" else None
                )
                rows.append(
                    {
                        "kind": kind,
                        "round": r,
                        "bytes": dir_bytes(path),
                        "wall_s": wall,
                        "per_step": per_step(path, first, last),
                        "report": report(path, a.window),
                    }
                )
    full = [x for x in rows if x["kind"] == "full"]
    win = [x for x in rows if x["kind"] == "window"]
    ratio = statistics.median(x["bytes"] for x in win) / statistics.median(x["bytes"] for x in full)
    same_steps = all(w["per_step"] == full[0]["per_step"] for w in win) and all(
        f["per_step"] == full[0]["per_step"] for f in full
    )
    same_report = all(
        (w["report"]["kernels"], w["report"]["ops"])
        == (full[0]["report"]["kernels"], full[0]["report"]["ops"])
        for w in win
    )
    kt_full = [f["report"]["kernel_time_ns"] for f in full]
    kt_win = [w["report"]["kernel_time_ns"] for w in win]
    spread = (max(kt_full) - min(kt_full)) / statistics.median(kt_full)
    diff = abs(statistics.median(kt_win) - statistics.median(kt_full)) / statistics.median(kt_full)
    print(f"{a.steps}-step run, window {a.window} ({last - first + 1} steps), {a.rounds} rounds")
    print("| run | round | trace bytes | capture wall (s) | kernel time in the steps (us) |")
    print("|---|---|---|---|---|")
    for x in rows:
        print(
            f"| {x['kind']} | {x['round']} | {x['bytes']:,} | {x['wall_s']:.1f} | "
            f"{x['report']['kernel_time_ns'] / 1e3:,.0f} |"
        )
    steps_seen = sorted(full[0]["per_step"])
    print(f"bytes, window / full (medians): 1/{1 / ratio:.0f} (goal <= 1/20): {ratio <= 1 / 20}")
    print(f"per-step kernels and ops by name and count equal (steps {steps_seen}): {same_steps}")
    print(f"report kernels and ops by name and count equal: {same_report}")
    print(
        f"kernel time: window vs full median {diff:.1%}, full runs' spread {spread:.1%}: "
        f"{diff <= max(spread, 0.0)}"
    )
    if a.json:
        a.json.write_text(
            json.dumps({"rows": rows, "ratio": ratio, "spread": spread, "diff": diff})
        )
    ok = ratio <= 1 / 20 and same_steps and same_report
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
