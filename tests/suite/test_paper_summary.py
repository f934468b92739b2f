"""TBD's findings checked against hand-built rows whose answers are known."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tbdtrace.suite import BenchConfig, paper_summary
from tbdtrace.suite.paper_summary import NOT_MEASURABLE, NOT_SHOWN, PARTLY, SHOWN, trend
from tbdtrace.suite.rows import empty_row


def _row(model: str, fw: str, b: int, status: str = "ok", **cells: Any) -> dict[str, Any]:
    return empty_row(
        model=model,
        framework=fw,
        batch_size=b,
        size="tiny",
        nproc=1,
        precision="fp32",
        compiled="no",
        status=status,
        **cells,
    )


def _by_claim(rows: list[dict[str, Any]]) -> dict[str, paper_summary.Finding]:
    return {f.claim: f for f in paper_summary.findings(rows)}


def _find(rows: list[dict[str, Any]], start: str) -> paper_summary.Finding:
    (f,) = [f for c, f in _by_claim(rows).items() if c.startswith(start)]
    return f


def test_trend_tells_rising_flat_falling_and_saturation() -> None:
    rising = trend([(1, 10.0), (2, 20.0), (4, 40.0)])
    assert rising.kind == "rising" and rising.ratio == pytest.approx(4.0)
    assert rising.top_gain == pytest.approx(1.0)  # doubled over one doubling
    assert rising.saturated is False
    sat = trend([(1, 10.0), (2, 18.0), (4, 18.5)])
    assert sat.kind == "rising" and sat.top_gain == pytest.approx(18.5 / 18 - 1)
    assert sat.saturated is True
    # 96 -> 128 is log2(4/3) doublings: +10% over it is (1.1)^(1/0.415) - 1 per doubling
    odd = trend([(64, 5.0), (96, 10.0), (128, 11.0)])
    assert odd.top_gain == pytest.approx(1.1 ** (1 / math.log2(128 / 96)) - 1)
    assert trend([(1, 10.0), (8, 10.5)]).kind == "flat"
    assert trend([(1, 10.0), (8, 10.5)]).saturated is None  # two points: not decidable
    assert trend([(1, 10.0), (8, 8.0)]).kind == "falling"


def _sweep() -> list[dict[str, Any]]:
    """Three pytorch sweeps on a CPU (no GPU utilization): seq2seq still rising when it
    runs out of memory, resnet50 saturating, wgan flat."""
    return [
        _row("seq2seq", "pytorch", 1, throughput_samples_per_s=10.0),
        _row("seq2seq", "pytorch", 2, throughput_samples_per_s=20.0),
        _row("seq2seq", "pytorch", 4, throughput_samples_per_s=40.0),
        _row("seq2seq", "pytorch", 8, status="out_of_memory", error="out of memory"),
        _row("seq2seq", "pytorch", 16, status="skipped", error="not run"),
        _row("resnet50", "pytorch", 1, throughput_samples_per_s=10.0, cpu_utilization=0.5),
        _row("resnet50", "pytorch", 2, throughput_samples_per_s=18.0, cpu_utilization=0.5),
        _row("resnet50", "pytorch", 4, throughput_samples_per_s=18.5, cpu_utilization=0.5),
        _row("wgan", "pytorch", 1, throughput_samples_per_s=10.0),
        _row("wgan", "pytorch", 8, throughput_samples_per_s=10.2),
    ]


def test_throughput_rise_saturation_and_memory_limit() -> None:
    rows = _sweep()
    f = _find(rows, "Throughput rises")
    assert f.verdict == PARTLY
    assert "rises (x1.10 or more) for 2 of 3 pairs" in f.detail
    assert "seq2seq pytorch: rising, x4.00 over batch 1-4 (10 samples/s to 40 samples/s)" in (
        f.detail
    )
    assert "wgan pytorch: flat, x1.02 over batch 1-8" in f.detail
    assert "saturated at the top of the sweep (last step under +5% per doubling): " in f.detail
    assert "resnet50 pytorch; still rising" in f.detail
    assert "seq2seq pytorch (+100% per doubling)" in f.detail

    f = _find(rows, "For some models throughput has not saturated")
    assert f.verdict == SHOWN
    assert "1 of 1 sweeps that ran out of memory were still rising" in f.detail
    assert "seq2seq pytorch: memory ran out at batch 8, throughput +100% per doubling" in f.detail


def test_memory_limit_not_shown_when_the_sweep_had_saturated() -> None:
    rows = [r for r in _sweep() if r["model"] == "resnet50"]
    rows.append(_row("resnet50", "pytorch", 8, status="out_of_memory"))
    f = _find(rows, "For some models throughput has not saturated")
    assert f.verdict == NOT_SHOWN
    assert f"throughput {18.5 / 18 - 1:+.0%} per doubling over batch 2-4" in f.detail
    # every batch fit: nothing to say about memory capacity
    f = _find([r for r in _sweep() if r["model"] == "wgan"], "For some models")
    assert f.verdict == NOT_MEASURABLE and "every batch size run fit" in f.detail


def test_gpu_findings_are_not_measurable_without_gpu_kernels() -> None:
    rows = _sweep()
    for start in (
        "GPU compute utilization rises",
        "CNN image classifiers reach high",
        "CPU utilization is low",
        "A3C and WGAN",
    ):
        f = _find(rows, start)
        assert f.verdict == NOT_MEASURABLE, start
        assert "no row has GPU kernels" in f.detail
    for start, why in (
        ("FP32 efficiency stays", "no FLOP count"),
        ("LSTM/RNN models", "no framework has FP32 efficiency rows"),
        ("Feature maps", "no row has a memory breakdown"),
        ("No single framework", "fewer than two models"),
        ("Data-parallel training", "no CNN classifier row with several ranks"),
    ):
        f = _find(rows, start)
        assert f.verdict == NOT_MEASURABLE and why in f.detail, start


def test_one_batch_per_model_cannot_show_a_trend() -> None:
    rows = [_row("resnet50", "pytorch", 4, throughput_samples_per_s=3.0)]
    f = _find(rows, "Throughput rises")
    assert f.verdict == NOT_MEASURABLE and "two or more batch sizes" in f.detail


def _gpu_rows() -> list[dict[str, Any]]:
    def g(model: str, b: int, util: float, fp32: float, cpu: float) -> dict[str, Any]:
        return _row(
            model,
            "pytorch",
            b,
            throughput_samples_per_s=float(b),
            gpu_utilization=util,
            fp32_efficiency=fp32,
            cpu_utilization=cpu,
        )

    return [
        g("resnet50", 4, 0.50, 0.20, 0.10),
        g("resnet50", 16, 0.85, 0.30, 0.10),
        g("resnet50", 64, 0.92, 0.35, 0.12),
        g("inception_v3", 16, 0.60, 0.25, 0.10),
        g("inception_v3", 64, 0.82, 0.28, 0.30),
        g("seq2seq", 16, 0.40, 0.05, 0.10),
        g("seq2seq", 64, 0.55, 0.08, 0.10),
        g("a3c", 8, 0.10, 0.01, 0.90),
    ]


def test_gpu_rows_give_utilization_fp32_and_cpu_verdicts() -> None:
    rows = _gpu_rows()
    f = _find(rows, "GPU compute utilization rises")
    assert f.verdict == SHOWN and "for 3 of 3 pairs" in f.detail  # a3c: one batch
    f = _find(rows, "CNN image classifiers reach high")
    # resnet50 reaches 80% at 16; inception_v3 only at 64, beyond a moderate batch
    assert f.verdict == PARTLY
    assert "resnet50 pytorch: first at batch 16, highest 92.0% over batch 4-64" in f.detail
    assert "inception_v3 pytorch: first at batch 64, highest 82.0%" in f.detail
    f = _find(rows, "FP32 efficiency stays")
    assert f.verdict == SHOWN and "resnet50 pytorch: highest 35.0%" in f.detail
    assert "CPU's peak" not in f.detail
    f = _find(rows, "LSTM/RNN models")
    # medians: RNN (0.05, 0.08) -> 6.5%; CNN (0.20, 0.30, 0.35, 0.25, 0.28) -> 28%
    assert f.verdict == SHOWN
    assert "pytorch: median RNN 6.5% (2 rows) vs CNN 28.0% (5 rows)" in f.detail
    f = _find(rows, "CPU utilization is low")
    assert f.verdict == PARTLY  # inception_v3 b64 at 30% and a3c at 90%
    assert "6 of 8 GPU rows under 25%" in f.detail and "10.0% to 90.0%" in f.detail
    f = _find(rows, "A3C and WGAN")
    assert f.verdict == SHOWN
    # the others' utilizations, sorted: 0.40 0.50 0.55 0.60 0.82 0.85 0.92 -> median 0.60
    assert "a3c: median 10.0% (1 rows); the other models: median 60.0% (7 rows)" in f.detail


def test_activations_dominate_or_not() -> None:
    mib = 1 << 20

    def m(model: str, fw: str, **parts: int | None) -> dict[str, Any]:
        cells = {f"{c}_bytes": v for c, v in parts.items()}
        return _row(model, fw, 4, **cells)

    rows = [
        m("resnet50", "pytorch", weights=20 * mib, gradients=20 * mib, activations=60 * mib),
        m("a3c", "pytorch", weights=50 * mib, gradients=40 * mib, activations=10 * mib),
        m("resnet50", "tensorflow", weights=5 * mib, other=50 * mib, activations=None),
    ]
    f = _find(rows, "Feature maps")
    assert f.verdict == PARTLY
    assert "activations are the largest category in 1 of 2 rows" in f.detail
    assert "at the peak 10.0% to 60.0%; weights and gradients together 40.0% to 90.0%" in (f.detail)
    assert "largest category elsewhere: a3c pytorch b4: weights" in f.detail
    assert "1 rows without the split (tensorflow captures" in f.detail
    f = _find(rows[:1], "Feature maps")
    assert f.verdict == SHOWN
    f = _find(rows[2:], "Feature maps")
    assert f.verdict == NOT_MEASURABLE
    assert "the tensorflow captures here do not tell activations apart" in f.detail


def test_framework_winners_per_model() -> None:
    def t(model: str, fw: str, b: int, rate: float) -> dict[str, Any]:
        return _row(model, fw, b, throughput_samples_per_s=rate)

    rows = [
        t("resnet50", "pytorch", 8, 10.0),
        t("resnet50", "tensorflow", 8, 12.0),
        t("resnet50", "pytorch", 16, 20.0),  # tensorflow has no 16: not compared
        t("seq2seq", "pytorch", 8, 30.0),
        t("seq2seq", "tensorflow", 8, 20.0),
    ]
    f = _find(rows, "No single framework")
    assert f.verdict == SHOWN
    assert "resnet50: tensorflow (batch 8); seq2seq: pytorch (batch 8)" in f.detail
    rows[3]["throughput_samples_per_s"] = 10.0
    assert _find(rows, "No single framework").verdict == NOT_SHOWN


def test_summary_states_coverage_and_links_the_figures(tmp_path: Path) -> None:
    cfg = BenchConfig(out_dir=tmp_path, size="tiny", steps=3, warmup=1, device="cpu")
    figs = [tmp_path / "bench_throughput.png", tmp_path / "bench_findings.md"]
    path = paper_summary.write(_sweep(), cfg, "cpu", figs)
    assert path == tmp_path / "paper_summary.md"
    text = path.read_text()
    assert "10 runs (8 ok, 1 out of memory, 1 skipped); device `cpu` (no GPU kernels" in text
    assert "size `tiny`, 3 measured steps after 1 warm-up; frameworks: pytorch" in text
    assert "resnet50 (batch 1-4), seq2seq (batch 1-4), wgan (batch 1-8)" in text
    assert "![bench_throughput.png](bench_throughput.png)" in text
    assert "bench_findings.md)" not in text
    assert "measures the training itself.\n" in text  # each line ends a sentence
    bullets = [ln for ln in text.splitlines() if ln.startswith("- **")]
    assert len(bullets) == len(paper_summary.findings(_sweep()))
