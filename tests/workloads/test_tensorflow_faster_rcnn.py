"""Faster R-CNN on TensorFlow (workloads/tensorflow/faster_rcnn.py, detection.py): the
detector's building blocks against torchvision's definitions written out here (RoIAlign as
a NumPy loop, anchors and box coding by hand), its parameter count and its scenes.

The tiny training run (its loss falling by the stated factor, then one evaluation) is
test_train.py's, driven by the registry.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from workloads.tensorflow import detection as det
from workloads.tensorflow import faster_rcnn

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)


def _bilinear(f: np.ndarray, y: float, x: float) -> np.ndarray:
    """torchvision's roi_align bilinear_interpolate (CPU kernel), one point of ``f [H, W, C]``."""
    h, w = f.shape[:2]
    if y < -1 or y > h or x < -1 or x > w:
        return np.zeros(f.shape[2])
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    return (
        (1 - ly) * (1 - lx) * f[y0, x0]
        + (1 - ly) * lx * f[y0, x1]
        + ly * (1 - lx) * f[y1, x0]
        + ly * lx * f[y1, x1]
    )


def _roi_align_reference(f: np.ndarray, box: np.ndarray, scale: float) -> np.ndarray:
    """torchvision.ops.roi_align(output 7, sampling_ratio 2, aligned False), one box."""
    x0, y0, x1, y1 = box * scale
    bw, bh = max(x1 - x0, 1.0) / 7, max(y1 - y0, 1.0) / 7
    out = np.zeros((7, 7, f.shape[2]))
    for py in range(7):
        for px in range(7):
            pts = [
                _bilinear(f, y0 + py * bh + (iy + 0.5) * bh / 2, x0 + px * bw + (ix + 0.5) * bw / 2)
                for iy in range(2)
                for ix in range(2)
            ]
            out[py, px] = np.mean(pts, axis=0)
    return out


def test_roi_align_matches_torchvisions_on_the_fpn_papers_levels() -> None:
    rng = np.random.default_rng(0)
    scales = [1 / 4, 1 / 8, 1 / 16, 1 / 32]
    maps = [
        rng.standard_normal((2, int(512 * s), int(512 * s), 3)).astype(np.float32) for s in scales
    ]
    # sqrt(area) 56, 112, 224, 448 and 14: levels P2, P3, P4, P5 and (clamped) P2
    boxes = np.array(
        [
            [10, 20, 66, 76],
            [100, 50, 212, 162],
            [40, 60, 264, 284],
            [30, 30, 478, 478],
            [5, 5, 19, 19],
        ],
        np.float32,
    )
    image = np.array([0, 1, 1, 0, 1], np.int32)
    got = det.roi_align(
        [tf.constant(m) for m in maps], scales, tf.constant(boxes), tf.constant(image)
    )
    assert got.shape == (5, 7, 7, 3)
    for n, (box, img) in enumerate(zip(boxes, image, strict=True)):
        side = math.sqrt((box[2] - box[0]) * (box[3] - box[1]))
        k = min(max(math.floor(4 + math.log2(side / 224) + 1e-6), 2), 5) - 2
        expected = _roi_align_reference(maps[k][img], box, scales[k])
        np.testing.assert_allclose(got[n].numpy(), expected, atol=1e-5)


def test_anchors_are_torchvisions() -> None:
    # size 32, ratios 0.5, 1, 2: h = 32 sqrt(r), w = 32 / sqrt(r), halves rounded
    assert det.cell_anchors(32) == [[-23, -11, 23, 11], [-16, -16, 16, 16], [-11, -23, 11, 23]]
    a = det.grid_anchors(32, 2, 3, 4, 4).numpy()
    # row-major cells, 3 ratios innermost; the cell (row 1, column 2) is shifted by (8, 4)
    assert a.shape == (18, 4)
    np.testing.assert_array_equal(a[5 * 3 + 1], [8 - 16, 4 - 16, 8 + 16, 4 + 16])


def test_box_coding_of_a_known_pair() -> None:
    ref = tf.constant([[0.0, 0.0, 10.0, 20.0]])
    gt = tf.constant([[5.0, 5.0, 25.0, 25.0]])
    # centres (5, 10) -> (15, 15), sizes (10, 20) -> (20, 20), weights 10, 10, 5, 5
    expected = [10 * 10 / 10, 10 * 5 / 20, 5 * math.log(2.0), 5 * math.log(1.0)]
    t = det.encode(gt, ref, (10.0, 10.0, 5.0, 5.0))
    np.testing.assert_allclose(t.numpy()[0], expected, rtol=1e-6)
    np.testing.assert_allclose(
        det.decode(t, ref, (10.0, 10.0, 5.0, 5.0)).numpy()[0, 0], gt[0], atol=1e-5
    )


def test_matcher_thresholds_and_low_quality_matches() -> None:
    # 2 gts x 4 predictions
    q = tf.constant([[0.8, 0.5, 0.1, 0.2], [0.1, 0.6, 0.2, 0.25]])
    # >= 0.7 matched, < 0.3 background (-1), between ignored (-2)
    np.testing.assert_array_equal(det.match(q, 0.7, 0.3, False).numpy(), [0, -2, -1, -1])
    # each gt's best prediction is matched however low: gt 1's best is column 1 (0.6)
    np.testing.assert_array_equal(det.match(q, 0.7, 0.3, True).numpy(), [0, 1, -1, -1])


def test_sampler_draws_the_balanced_counts() -> None:
    labels = tf.constant([1] * 10 + [0] * 100 + [-1] * 50)
    picked = det.sample(labels, 16, 0.25).numpy()
    lab = labels.numpy()[picked]
    assert len(set(picked)) == 16 and (lab == 1).sum() == 4 and (lab == 0).sum() == 12
    few = det.sample(tf.constant([1, 0, 0, -1]), 16, 0.5).numpy()
    assert sorted(few) == [0, 1, 2]  # all there are, never an ignored one


def test_scenes_are_the_pytorch_workloads_task() -> None:
    cfg = faster_rcnn.CONFIGS["small"]
    colours = np.random.default_rng(1).uniform(size=(cfg.classes, 3)).astype(np.float32)
    x, boxes, labels = faster_rcnn.scenes(cfg, colours, 8, np.random.default_rng(0))
    px = cfg.image_px
    assert x.shape == (8, px, px, 3) and x.min() >= 0 and x.max() <= 1
    for img, bs, ls in zip(x, boxes, labels, strict=True):
        n = int((ls > 0).sum())
        assert (
            1 <= n <= 3 and (ls[:n] > 0).all() and (ls[n:] == 0).all() and ls.max() <= cfg.classes
        )
        x0, y0, x1, y1 = bs[n - 1].astype(int)  # drawn last: nothing covers it
        assert px // 5 <= x1 - x0 < px // 2 and x0 >= 0 and x1 <= px
        np.testing.assert_allclose(
            img[y0:y1, x0:x1], np.broadcast_to(colours[ls[n - 1] - 1], (y1 - y0, x1 - x0, 3))
        )


def test_paper_size_is_torchvisions_count_plus_keras_conv_biases() -> None:
    net = faster_rcnn.build_model(faster_rcnn.CONFIGS["paper"])
    # torchvision's documented 41,755,286 (COCO's 91 classes, frozen batch-norm), less 70
    # classes' scores and boxes, plus trainable batch-norm (2 x 26,560); Keras's ResNet50
    # has a bias on each convolution: one per output channel, 26,560 in all.
    torchvision = 41_755_286 - 70 * 1025 - 280 * 1025 + 2 * 26_560
    assert sum(int(np.prod(v.shape)) for v in net.trainable_variables) == torchvision + 26_560


def test_transform_resizes_normalises_and_pads_as_torchvision() -> None:
    net = faster_rcnn.FasterRCNN(faster_rcnn.CONFIGS["tiny"])  # min_size 64, max_size 96
    x, scale, size = net.transform(tf.fill((1, 50, 80, 3), 0.5))
    # shorter side to 64 would make the longer 102.4 > 96: scale = min(64/50, 96/80) = 1.2
    assert scale == 1.2 and size == (60, 96)
    assert x.shape == (1, 64, 96, 3)  # padded to multiples of 32 with zeros
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    np.testing.assert_allclose(
        x[0, :60].numpy(), np.broadcast_to((0.5 - mean) / std, (60, 96, 3)), rtol=1e-5
    )
    assert not x[0, 60:].numpy().any()
