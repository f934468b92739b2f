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
    # two passes: dgrad reads go and w and writes dx; wgrad reads go and x and writes dw
    assert bwd == 4 * ((numel(go) + numel(w) + numel(x)) + (numel(go) + numel(x) + numel(w)))
    assert _b("aten::add", [[4, 8], [8]], [h, h]) == 2 * (32 + 8 + 32)  # broadcast result
    assert _b("aten::add_", [[4, 8], [4, 8], []], [f, f, "Scalar"]) == 4 * (32 + 32 + 32)
    assert _b("aten::_softmax", [[4, 8], [], []], [f, "Scalar", "Scalar"]) == 4 * 64
    # x, weight, bias read; y written; mean and rstd (4 rows each, float) written
    assert _b("aten::native_layer_norm", [[4, 8], [], [8], [8], []], [f, "", f, f, "Scalar"]) == (
        4 * (32 + 8 + 8 + 32) + 4 * 2 * 4
    )
    assert _b("aten::sum", [[4, 8]], [f]) == 4 * 32
    assert _b("aten::conv_transpose2d", [[1, 2, 4, 4], [2, 2, 3, 3]], [f, f]) is None
    assert _b("aten::unknown_op", [[4]], [f]) is None


def test_bytes_elementwise_by_hand() -> None:
    f, h, d = "float", "c10::Half", "double"
    # copy_ and fill_/zero_ only write their destination; copy_ reads the source
    assert _b("aten::copy_", [[4, 8], [4, 8], []], [f, h, "Scalar"]) == 2 * 32 + 4 * 32
    assert _b("aten::fill_", [[4, 8], []], [f, "Scalar"]) == 4 * 32
    assert _b("aten::zero_", [[4, 8]], [f]) == 4 * 32
    # out= variants: the out tensor is written, not read
    assert _b("aten::neg", [[4, 8], [4, 8]], [f, f]) == 4 * (32 + 32)
    assert _b("aten::clamp_min", [[4, 8], [], [4, 8]], [f, "Scalar", f]) == 4 * (32 + 32)
    # result dtype: comparisons write bool, mixed floats promote, where's condition aside
    assert _b("aten::gt", [[4, 8], []], [f, "Scalar"]) == 4 * 32 + 1 * 32
    assert _b("aten::mul", [[4, 8], [4, 8]], [h, f]) == 2 * 32 + 4 * 32 + 4 * 32
    assert _b("aten::where", [[32], [32], [32]], ["bool", f, f]) == 32 + 4 * 32 * 3
    # a 0-dim tensor is one element; a Scalar argument is not memory traffic
    assert _b("aten::add_", [[1], [], []], [d, d, "Scalar"]) == 8 * 3
    # not countable: a shaped input of an unsized dtype, shapes that do not broadcast,
    # more tensors than any form of the op takes
    assert _b("aten::add", [[4], [4]], ["c10::complex<float>", f]) is None
    assert _b("aten::mul", [[4, 8], [5]], [f, f]) is None
    assert _b("aten::pow", [[4, 8], [4], [2, 2], [2, 2], []], [f, f, f, f, "Scalar"]) is None


def test_bytes_normalization_by_hand() -> None:
    f = "float"
    n, c, hw = 8, 16, 5 * 5
    x, ch = [n, c, 5, 5], [c]
    bn = [x, ch, ch, ch, ch, [], [], []]
    bn_t = [f, f, f, f, f, "Scalar", "Scalar", "Scalar"]
    # training: x, weight, bias, running mean/var read; y, save_mean, save_invstd and the
    # updated running statistics written
    train = _b("aten::native_batch_norm", bn, bn_t, ["", "", "", "", "", "True", "0.1", "1e-05"])
    assert train == 4 * (n * c * hw + 4 * c) + 4 * (n * c * hw + 2 * c + 2 * c)
    evaluation = _b("aten::native_batch_norm", bn, bn_t, ["", "", "", "", "", "False", "", ""])
    assert evaluation == 4 * (n * c * hw + 4 * c) + 4 * n * c * hw
    # backward: go, x, weight, running and saved statistics read; dx, dw, db written
    bwd = _b(
        "aten::native_batch_norm_backward",
        [x, x, ch, ch, ch, ch, ch, [], [], []],
        [f] * 7 + ["Scalar", "Scalar", ""],
        [""] * 7 + ["True", "1e-05", "[True, True, True]"],
    )
    assert bwd == 4 * (2 * n * c * hw + 5 * c) + 4 * (n * c * hw + 2 * c)
    # cuDNN (input, grad_output, weight, running_mean, running_var, save_mean, save_var,
    # eps, reserve): always dx, dw, db
    cudnn = _b(
        "aten::cudnn_batch_norm_backward",
        [x, x, ch, ch, ch, ch, ch, [], [0]],
        [f] * 7 + ["Double", "unsigned char"],
        None,
    )
    assert cudnn == 4 * (2 * n * c * hw + 5 * c) + 4 * (n * c * hw + 2 * c)
    # layer norm backward (go, x, normalized_shape, mean, rstd, weight, bias, mask): the
    # bias is not read; dx and dw written as the mask asks
    ln = _b(
        "aten::native_layer_norm_backward",
        [[4, 8], [4, 8], [], [4, 1], [4, 1], [8], [8], []],
        [f, f, "", f, f, f, f, ""],
        ["", "", "[8]", "", "", "", "", "[True, True, False]"],
    )
    assert ln == 4 * (32 + 32 + 4 + 4 + 8) + 4 * (32 + 8)


def test_bytes_conv_backward_masks() -> None:
    f = "float"
    go, x, w = [8, 16, 32, 32], [8, 3, 32, 32], [16, 3, 3, 3]
    ngo, nx, nw = 8 * 16 * 32 * 32, 8 * 3 * 32 * 32, 16 * 3 * 3 * 3
    concrete = ["", "", "", "[16]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    shapes = [go, x, w, [], [], [], [], [], [], [], []]
    types = [f, f, f] + [""] * 8

    def bwd(mask: str) -> int | None:
        return _b("aten::convolution_backward", shapes, types, [*concrete, mask])

    # first layer: only grad_weight (reads go and x, writes dw)
    assert bwd("[False, True, False]") == 4 * (ngo + nx + nw)
    # all three: dgrad, wgrad, and the bias reduction (reads go, writes Cout)
    assert bwd("[True, True, True]") == 4 * (2 * (ngo + nx + nw) + ngo + 16)
    # PyTorch < 2 cuDNN backward (input, grad_output, weight, ...), no mask recorded:
    # both gradients, no bias gradient
    old = _b("aten::cudnn_convolution_backward", [x, go, w], [f, f, f], None)
    assert old == 4 * 2 * (ngo + nx + nw)


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
