"""The suite's run dimensions: ranks (``--nproc``, scaling columns), precision and
compilation; one real bench run of ResNet-50 (tiny, bf16, 1 and 2 DDP ranks on gloo)
beside MXNet rows that the MXNet environment cannot run (``unsupported``)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import tbdtrace
from tbdtrace.suite import plan, rows, runner
from tbdtrace.suite.plan import BenchConfig, Job
from tests.suite.conftest import run_bench
from workloads import dimensions, harness

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)


def _row(nproc: int, rate: float | None, precision: str = "fp32", status: str = "ok") -> dict:
    return rows.empty_row(
        model="resnet50",
        framework="pytorch",
        batch_size=4,
        size="tiny",
        precision=precision,
        compiled="no",
        nproc=nproc,
        status=status,
        throughput_samples_per_s=rate,
    )


def test_scaling_efficiency_against_the_one_rank_row() -> None:
    got = [_row(1, 100.0), _row(2, 150.0), _row(4, 360.0), _row(2, 90.0, "bf16")]
    rows.add_scaling(got)
    assert got[0]["scaling_efficiency"] == 1.0
    assert got[1]["scaling_efficiency"] == 0.75  # 150 / (2 x 100)
    assert got[2]["scaling_efficiency"] == 0.9  # 360 / (4 x 100)
    assert got[2]["throughput_per_rank_samples_per_s"] == 90.0
    # No one-rank bf16 row: no efficiency, but the per-rank throughput.
    assert got[3]["scaling_efficiency"] is None
    assert got[3]["throughput_per_rank_samples_per_s"] == 45.0


def test_failed_one_rank_row_gives_no_efficiency() -> None:
    got = [_row(1, None, status="failed"), _row(2, 150.0)]
    rows.add_scaling(got)
    assert got[1]["scaling_efficiency"] is None


def test_jobs_span_the_dimensions(tmp_path: Path) -> None:
    cfg = BenchConfig(
        out_dir=tmp_path,
        models=("resnet50",),
        frameworks=("pytorch",),
        nproc=(1, 2),
        precisions=("fp32", "bf16"),
        compile=(False, True),
    )
    jobs = plan.make_jobs(cfg)
    assert len(jobs) == 8
    assert len({j.name for j in jobs}) == 8
    j = next(j for j in jobs if j.nproc == 2 and j.precision == "bf16" and j.compile)
    assert j.name == "resnet50-pytorch-bdefault-n2-bf16-compiled"
    argv = plan.workload_argv(j, cfg)
    assert argv[argv.index("--nproc") + 1] == "2"
    assert argv[argv.index("--precision") + 1] == "bf16" and "--compile" in argv
    plain = next(j for j in jobs if j.nproc == 1 and j.precision == "fp32" and not j.compile)
    assert plain.name == "resnet50-pytorch-bdefault"  # names of plain runs unchanged
    argv = plan.workload_argv(plain, cfg)
    assert "--nproc" not in argv and "--precision" not in argv and "--compile" not in argv


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("tensorflow", "resnet50", 2, "fp32", False, "cpu"), "MultiWorkerMirroredStrategy"),
        (("mxnet", "resnet50", 2, "fp32", False, "cpu"), "dist_sync"),
        (("pytorch", "a3c", 2, "fp32", False, "cpu"), "A3C"),
        (("mxnet", "resnet50", 1, "bf16", False, "cuda"), "GPUs only"),
        (("pytorch", "resnet50", 1, "fp16", False, "cpu"), "float16 training runs on GPUs"),
        (("pytorch", "resnet50", 1, "tf32", False, "cpu"), "TF32"),
        (("tensorflow", "resnet50", 1, "fp16", False, "cuda"), "LossScaleOptimizer"),
        (("tensorflow", "resnet50", 1, "fp32", True, "cpu"), "jit_compile"),
    ],
)
def test_unsupported_combinations_say_why(args: tuple, why: str) -> None:
    assert why in (dimensions.unsupported(*args) or "")


@pytest.mark.parametrize(
    "args",
    [
        ("pytorch", "resnet50", 2, "bf16", True, "cpu"),
        ("pytorch", "resnet50", 1, "fp16", False, "cuda"),
        ("pytorch", "resnet50", 1, "tf32", False, "auto"),
        ("tensorflow", "resnet50", 1, "bf16", False, "cpu"),
        ("mxnet", "resnet50", 1, "fp32", False, "cpu"),
    ],
)
def test_supported_combinations(args: tuple) -> None:
    assert dimensions.unsupported(*args) is None


def test_bench_precisions_match_the_workloads() -> None:
    assert plan.PRECISIONS == dimensions.PRECISIONS


def test_workload_refuses_fp16_on_cpu_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        harness.parse_args(
            "resnet50", "pytorch", {"tiny": 4}, ["--device", "cpu", "--precision", "fp16"]
        )
    assert e.value.code == 2
    assert "float16 training runs on GPUs" in capsys.readouterr().err.strip().splitlines()[-1]


def test_harness_takes_precision_and_compile() -> None:
    args = harness.parse_args("resnet50", "pytorch", {"tiny": 4}, ["--precision", "bf16"])
    assert (args.precision, args.compile) == ("bf16", False)
    args = harness.parse_args("resnet50", "pytorch", {"tiny": 4}, ["--compile"])
    assert (args.precision, args.compile) == ("fp32", True)


def _measured_rate(tr: tbdtrace.Trace) -> float:
    """Throughput computed here from the trace's harness steps: per rank, total samples /
    total duration of the non-warm-up steps; summed over ranks."""
    st = tr.table("steps").to_pandas()
    st = st[(st.source.astype(str) == "harness") & ~st.warmup.astype(bool)]
    st = st.assign(sec=(st.end_ns - st.start_ns) / 1e9)
    per_rank = st.groupby(st["rank"].fillna(-1))[["samples", "sec"]].sum()
    return float((per_rank.samples / per_rank.sec).sum())


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scaling")
    # One intra-op thread (run_bench), as the two-rank runs get (a share of the cores
    # each): with two threads on a loaded 2-core machine, one bfloat16 ResNet-50 step
    # waits on the other thread's turn (8-35 s instead of 2 s).
    args = ["--models", "resnet50", "--frameworks", "pytorch,mxnet", "--nproc", "1,2"]
    args += ["--precision", "bf16", "--size", "tiny", "--steps", "1", "--warmup", "0"]
    args += ["--batch-sizes", "2", "--device", "cpu"]
    # No held-out evaluation: nothing here reads the quality columns, and a bfloat16
    # forward pass over the held-out images costs more CPU than the training step.
    args += ["--no-eval"]
    cp = run_bench(out, *args)
    assert cp.returncode == 0, cp.stderr[-3000:]
    return out


def test_bench_scaling_columns(bench_run: Path) -> None:
    doc = json.loads((bench_run / "bench.json").read_text())
    by = {(r["framework"], r["nproc"]): r for r in doc["rows"]}
    one, two = by[("pytorch", 1)], by[("pytorch", 2)]
    assert one["status"] == two["status"] == "ok", (one["error"], two["error"])
    # throughput comes from the unprofiled run of each job (the bench protocol)
    for r, path in ((one, "resnet50-pytorch-b2-bf16"), (two, "resnet50-pytorch-b2-n2-bf16")):
        tr = tbdtrace.open(bench_run / runner.UNPROFILED_DIR / path)
        assert r["throughput_samples_per_s"] == pytest.approx(_measured_rate(tr), rel=1e-9)
    rate1, rate2 = one["throughput_samples_per_s"], two["throughput_samples_per_s"]
    assert two["scaling_efficiency"] == pytest.approx(rate2 / (2 * rate1), rel=1e-12)
    assert two["throughput_per_rank_samples_per_s"] == pytest.approx(rate2 / 2, rel=1e-12)
    assert one["scaling_efficiency"] == pytest.approx(1.0)
    with (bench_run / "bench.csv").open() as f:
        csv_rows = list(csv.DictReader(f))
    assert {"nproc", "precision", "compiled", "scaling_efficiency"} <= set(csv_rows[0])
    md = (bench_run / "bench.md").read_text()
    assert "Scaling eff. (%)" in md and "| Ranks |" in md


def test_bench_two_ranks_in_the_trace(bench_run: Path) -> None:
    tr = tbdtrace.open(bench_run / "resnet50-pytorch-b2-n2-bf16")
    assert tr.meta["ranks"] == [0, 1]
    # One profiled Python process besides the ranks: the workload, which runs
    # torch.distributed.run's launcher itself (no second interpreter loading torch again).
    assert len(tr.meta["extra"]["distributed"]["not_ranks"]) == 1
    assert len(tr.meta["extra"]["parts"]) == 3
    co = tr.table("collectives", ["op", "rank"]).to_pandas()
    assert set(co[co.op.astype(str) == "all_reduce"]["rank"]) == {0, 1}


def test_bf16_run_has_bf16_ops_and_the_row_says_so(bench_run: Path) -> None:
    doc = json.loads((bench_run / "bench.json").read_text())
    row = next(r for r in doc["rows"] if r["framework"] == "pytorch" and r["nproc"] == 1)
    assert (row["precision"], row["compiled"]) == ("bf16", "no")
    ops = tbdtrace.open(bench_run / "resnet50-pytorch-b2-bf16").table(
        "ops", ["name", "input_dtypes"]
    )
    names = np.array(ops.column("name").to_pylist(), dtype=object)
    dtypes = np.array([d or "" for d in ops.column("input_dtypes").to_pylist()], dtype=object)
    bf16 = np.array(["BFloat16" in d for d in dtypes])
    # Autocast runs the convolutions in bfloat16 (weights cast from float32).
    convs = {n for n in names[bf16] if "conv" in n}
    assert "aten::convolution" in convs or "aten::conv2d" in convs, sorted(set(names[bf16]))[:20]


def test_mxnet_rows_unsupported_with_reason(bench_run: Path) -> None:
    doc = json.loads((bench_run / "bench.json").read_text())
    mx = [r for r in doc["rows"] if r["framework"] == "mxnet"]
    assert [r["nproc"] for r in mx] == [1, 2]
    assert all(r["status"] == "unsupported" for r in mx)
    assert "dist_sync" in mx[1]["error"] or "GPUs only" in mx[1]["error"]
    assert "GPUs only" in mx[0]["error"]
    assert not (bench_run / "resnet50-mxnet-b2-bf16").exists()  # never started


def test_job_defaults_are_one_rank_fp32_uncompiled() -> None:
    j = Job("m", "pytorch", "workloads.pytorch.m", sys.executable, None)
    assert (j.nproc, j.precision, j.compile) == (1, "fp32", False)


def test_tensorflow_bf16_is_keras_mixed_bfloat16() -> None:
    import keras

    from workloads.tensorflow import _common as tf_common

    args = harness.parse_args(
        "resnet50", "tensorflow", {"tiny": 4}, ["--device", "cpu", "--precision", "bf16"]
    )
    try:
        tf_common.setup(args)
        layer = keras.layers.Dense(4)
        layer.build((None, 8))
        assert (layer.compute_dtype, layer.variable_dtype) == ("bfloat16", "float32")
        tf_common.setup(harness.parse_args("resnet50", "tensorflow", {"tiny": 4}, []))
        assert keras.layers.Dense(4).compute_dtype == "float32"
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_pytorch_compile_wraps_the_model() -> None:
    """``--compile`` is torch.compile of the model (compilation itself is lazy, at the first
    step: minutes of C++ build on a loaded CPU, so not run here). In this process:
    torch._dynamo, which loads triton (a crash after TensorFlow), is loaded first by
    tests/conftest.py, before any TensorFlow test."""
    import torch

    from workloads.pytorch import _common

    net = torch.nn.Linear(8, 8)
    cpu = torch.device("cpu")
    on = harness.parse_args("resnet50", "pytorch", {"tiny": 4}, ["--compile"])
    off = harness.parse_args("resnet50", "pytorch", {"tiny": 4}, [])
    got = _common.distribute(net, cpu, on)
    assert type(got).__name__ == "OptimizedModule"
    assert got._orig_mod is net
    assert _common.distribute(net, cpu, off) is net


def test_more_ranks_than_gpus_is_unsupported_on_cuda() -> None:
    import torch

    job = Job("resnet50", "pytorch", "workloads.pytorch.resnet50", sys.executable, None, 2)
    why = plan.unsupported(job, "cuda")
    if torch.cuda.device_count() < 2:
        assert why is not None and "one rank per GPU" in why
    else:
        assert why is None
    assert plan.unsupported(job, "cpu") is None  # gloo: ranks share the CPU
