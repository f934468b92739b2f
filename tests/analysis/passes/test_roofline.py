"""Roofline per op: bytes by formulas written here, FLOPs by the textbook count, on the
committed H200 capture (ResNet-50, CUPTI with op shapes) and on hand-made shapes; the
report's JSON, CSV and text agree with the pass."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pytest

import tbdtrace
from tbdtrace.analysis.engine import byte_formulas, outputs
from tbdtrace.analysis.passes import roofline
from tbdtrace.cli import main

H200 = Path(__file__).resolve().parents[2] / "data" / "gpu" / "h200_demo_resnet50_small"


def _b(name: str, shapes: list[list[int]], dtypes: list[str], concrete: list[str] | None = None):
    return byte_formulas.op_bytes(
        name, json.dumps(shapes), json.dumps(dtypes), json.dumps(concrete) if concrete else None
    )


def test_bytes_by_hand() -> None:
    f, h = "float", "c10::Half"
    M, K, N, B = 64, 128, 32, 3
    assert _b("aten::mm", [[M, K], [K, N]], [f, f]) == 4 * (M * K + K * N + M * N)
    assert _b("aten::addmm", [[N], [M, K], [K, N]], [f, f, f]) == 4 * (N + M * K + K * N + M * N)
    assert _b("aten::bmm", [[B, M, K], [B, K, N]], [h, h]) == 2 * B * (M * K + K * N + M * N)
    assert _b("aten::linear", [[8, M, K], [N, K], [N]], [f, f, f]) == 4 * (
        8 * M * K + N * K + N + 8 * M * N
    )
    # conv2d 3x3, stride 1, pad 1: output 8 x 16 x 32 x 32
    conv = _b(
        "aten::conv2d",
        [[8, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []],
        [f, f, f, "", "", "", ""],
        ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"],
    )
    assert conv == 4 * (8 * 3 * 32 * 32 + 16 * 3 * 3 * 3 + 16 + 8 * 16 * 32 * 32)
    # backward with output_mask [True, True, False]: reads go, x, w; writes dx, dw
    go, x, w = [8, 16, 32, 32], [8, 3, 32, 32], [16, 3, 3, 3]
    bwd = _b(
        "aten::convolution_backward",
        [go, x, w, [], [], [], [], [], [], [], []],
        [f, f, f, "", "", "", "", "", "", "", ""],
        [
            "",
            "",
            "",
            "[16]",
            "[1, 1]",
            "[1, 1]",
            "[1, 1]",
            "False",
            "[0, 0]",
            "1",
            "[True, True, False]",
        ],
    )
    numel = lambda s: s[0] * s[1] * s[2] * s[3]  # noqa: E731
    assert bwd == 4 * (numel(go) + 2 * numel(x) + 2 * numel(w))
    assert _b("aten::add", [[4, 8], [8]], [h, h]) == 2 * (32 + 8 + 32)  # broadcast result
    assert _b("aten::add_", [[4, 8], [4, 8], []], [f, f, "Scalar"]) == 4 * (32 + 32 + 32)
    assert _b("aten::_softmax", [[4, 8], [], []], [f, "Scalar", "Scalar"]) == 4 * 64
    assert _b("aten::native_layer_norm", [[4, 8], [], [8], [8], []], [f, "", f, f, "Scalar"]) == (
        4 * (32 + 8 + 8 + 32)
    )
    assert _b("aten::sum", [[4, 8]], [f]) == 4 * 32
    assert _b("aten::conv_transpose2d", [[1, 2, 4, 4], [2, 2, 3, 3]], [f, f]) is None
    assert _b("aten::unknown_op", [[4]], [f]) is None


def _conv_expected(shapes: str, concrete: str) -> tuple[int, int]:
    """FLOPs and bytes of one aten::convolution (not transposed, groups 1), by hand."""
    (n, c, h, wd), (co, ci, kh, kw) = json.loads(shapes)[:2]
    cv = json.loads(concrete)
    stride, pad, dil = (json.loads(cv[i]) for i in (3, 4, 5))
    ho = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    flops = 2 * n * ho * wo * co * ci * kh * kw
    nbytes = 4 * (n * c * h * wd + co * ci * kh * kw + n * co * ho * wo)
    return flops, nbytes


def test_h200_conv_rows_against_formulas() -> None:
    tr = tbdtrace.analyze(H200, window="measured")
    rows = roofline.run(tr.ctx)
    assert rows.schema.equals(outputs.ROOFLINE.arrow_schema())
    ops = tr.ctx.table("ops", ["name", "input_shapes", "concrete_inputs"]).to_pylist()
    concrete = {(o["name"], o["input_shapes"]): o["concrete_inputs"] for o in ops}
    fwd = [r for r in rows.to_pylist() if r["op"] == "aten::convolution"]
    assert fwd
    dev = tr.ctx.table("devices").to_pylist()[0]
    for r in fwd:
        f1, b1 = _conv_expected(r["input_shapes"], concrete[(r["op"], r["input_shapes"])])
        assert (r["flops"], r["bytes"]) == (f1 * r["count"], b1 * r["count"])
        s = r["kernel_ns"] / 1e9
        assert r["achieved_flops_per_s"] == pytest.approx(r["flops"] / s)
        assert r["achieved_bytes_per_s"] == pytest.approx(r["bytes"] / s)
        # cudnn ran fp32 convolutions as TF32 (meta allow_tf32.cudnn)
        assert r["precision"] == "tf32"
        assert r["peak_bytes_per_s"] == dev["memory_bandwidth_bytes_per_s"]
        ridge = r["peak_flops_per_s"] / r["peak_bytes_per_s"]
        assert r["ridge_flop_per_byte"] == pytest.approx(ridge)
        inten = r["flops"] / r["bytes"]
        assert r["bound"] == ("compute" if inten >= ridge else "memory")
        roof = r["achieved_flops_per_s"] / r["peak_flops_per_s"]
        if r["bound"] == "memory":
            roof = r["achieved_bytes_per_s"] / r["peak_bytes_per_s"]
        assert r["roof_share"] == pytest.approx(roof)
    # Every kernel counted at most once: the rows' time is within the kernels' time.
    total = sum(tr.kernels().column("total_ns").to_pylist())
    assert 0 < sum(rows.column("kernel_ns").to_pylist()) <= total


def test_families_sum_the_rows() -> None:
    tr = tbdtrace.analyze(H200, window="measured")
    rows = tr.roofline().to_pylist()
    fams = tr.roofline(roofline.RooflineConfig(by="family")).to_pylist()
    assert pa.Table.from_pylist(fams).num_rows == len(fams)
    for f in fams:
        mine = [r for r in rows if (r["family"], r["precision"]) == (f["family"], f["precision"])]
        assert f["kernel_ns"] == sum(r["kernel_ns"] for r in mine)
        assert f["flops"] == sum(r["flops"] for r in mine)
        assert f["bytes"] == sum(r["bytes"] for r in mine)


def test_report_section_is_opt_in_and_its_views_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(H200), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["roofline"] == {"included": False, "how": doc["roofline"]["how"]}
    assert "--roofline" in doc["roofline"]["how"]
    assert main(["report", str(H200), "--roofline", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    api = tbdtrace.analyze(H200, window="measured").roofline().to_pylist()
    assert doc["roofline"]["ops"] == api
    out = tmp_path / "csv"
    assert main(["report", str(H200), "--roofline", "--format", "csv", "-o", str(out)]) == 0
    capsys.readouterr()
    with (out / "roofline.ops.csv").open() as fh:
        first = next(csv.DictReader(fh))
    assert int(first["kernel_ns"]) == api[0]["kernel_ns"]
    assert int(first["bytes"]) == api[0]["bytes"]
    assert main(["report", str(H200), "--roofline"]) == 0
    text = capsys.readouterr().out
    assert "Roofline by op family" in text and "aten::convolution_backward" in text
    page = tmp_path / "r.html"
    assert main(["report", str(H200), "--roofline", "--format", "html", "-o", str(page)]) == 0
    assert 'data-plot="roofline"' in page.read_text()
