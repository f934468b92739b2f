"""Two-stage detector building blocks in TensorFlow ops, written after torchvision's
``models.detection`` (``_utils.BoxCoder``, ``Matcher``, ``BalancedPositiveNegativeSampler``,
``AnchorGenerator``, ``ops.MultiScaleRoIAlign``), for :mod:`workloads.tensorflow.faster_rcnn`.

Boxes are ``[x1, y1, x2, y2]`` in pixels of the (resized) image, as torchvision's. Every
function but :func:`roi_align` (which pools a batch's boxes) works on one image's tensors;
all run eagerly or inside a ``tf.function``.

Where TensorFlow differs: RoIAlign is ``tf.image.crop_and_resize`` at the 2 x 2 sampling
points of each of the 7 x 7 bins (torchvision's ``sampling_ratio=2``, ``aligned=False``,
roi sides clamped to at least 1), averaged per bin; a sampling point within one pixel
outside the feature map reads 0 here where torchvision clamps it to the border.
Per-level or per-class NMS is ``tf.image.non_max_suppression`` on boxes offset apart by
their group (torchvision's ``batched_nms`` trick).
"""

from __future__ import annotations

import math

import tensorflow as tf

BBOX_CLIP = math.log(1000.0 / 16)  # torchvision's bbox_xform_clip: exp(dw) at most 62.5


def box_area(b: tf.Tensor) -> tf.Tensor:
    return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])


def iou(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """``[len(a), len(b)]`` intersection over union."""
    lt = tf.maximum(a[:, None, :2], b[None, :, :2])
    rb = tf.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = tf.maximum(rb - lt, 0.0)
    inter = wh[..., 0] * wh[..., 1]
    union = box_area(a)[:, None] + box_area(b)[None, :] - inter
    return inter / union


def encode(gt: tf.Tensor, ref: tf.Tensor, w: tuple[float, ...]) -> tf.Tensor:
    """Regression targets of ``gt`` relative to ``ref`` (both ``[N, 4]``), weights ``w``."""
    rw, rh = ref[:, 2] - ref[:, 0], ref[:, 3] - ref[:, 1]
    rx, ry = ref[:, 0] + 0.5 * rw, ref[:, 1] + 0.5 * rh
    gw, gh = gt[:, 2] - gt[:, 0], gt[:, 3] - gt[:, 1]
    gx, gy = gt[:, 0] + 0.5 * gw, gt[:, 1] + 0.5 * gh
    return tf.stack(
        [
            w[0] * (gx - rx) / rw,
            w[1] * (gy - ry) / rh,
            w[2] * tf.math.log(gw / rw),
            w[3] * tf.math.log(gh / rh),
        ],
        axis=1,
    )


def decode(deltas: tf.Tensor, ref: tf.Tensor, w: tuple[float, ...]) -> tf.Tensor:
    """Boxes from ``deltas [N, K*4]`` applied to ``ref [N, 4]``: ``[N, K, 4]``."""
    deltas = tf.reshape(deltas, [tf.shape(deltas)[0], -1, 4])
    rw, rh = ref[:, 2] - ref[:, 0], ref[:, 3] - ref[:, 1]
    rx, ry = ref[:, 0] + 0.5 * rw, ref[:, 1] + 0.5 * rh
    dx, dy = deltas[..., 0] / w[0], deltas[..., 1] / w[1]
    dw = tf.minimum(deltas[..., 2] / w[2], BBOX_CLIP)
    dh = tf.minimum(deltas[..., 3] / w[3], BBOX_CLIP)
    cx, cy = dx * rw[:, None] + rx[:, None], dy * rh[:, None] + ry[:, None]
    pw, ph = tf.exp(dw) * rw[:, None], tf.exp(dh) * rh[:, None]
    return tf.stack([cx - 0.5 * pw, cy - 0.5 * ph, cx + 0.5 * pw, cy + 0.5 * ph], axis=-1)


def clip(boxes: tf.Tensor, height: float, width: float) -> tf.Tensor:
    x = tf.clip_by_value(boxes[..., 0::2], 0.0, width)
    y = tf.clip_by_value(boxes[..., 1::2], 0.0, height)
    return tf.stack([x[..., 0], y[..., 0], x[..., 1], y[..., 1]], axis=-1)


def cell_anchors(size: int, ratios: tuple[float, ...] = (0.5, 1.0, 2.0)) -> list[list[float]]:
    """torchvision's zero-centred anchors of one size, rounded: ``[len(ratios), 4]``."""
    out = []
    for r in ratios:
        h, w = math.sqrt(r) * size, size / math.sqrt(r)
        # torch.round rounds half to even, as Python's round does
        out.append([float(round(v)) for v in (-w / 2, -h / 2, w / 2, h / 2)])
    return out


def grid_anchors(size: int, feat_h: int, feat_w: int, stride_h: int, stride_w: int) -> tf.Tensor:
    """``[feat_h * feat_w * 3, 4]`` anchors in row-major cell order, ratios innermost."""
    xs = tf.range(feat_w, dtype=tf.float32) * stride_w
    ys = tf.range(feat_h, dtype=tf.float32) * stride_h
    sy, sx = tf.meshgrid(ys, xs, indexing="ij")
    shifts = tf.reshape(tf.stack([sx, sy, sx, sy], axis=-1), [-1, 1, 4])
    return tf.reshape(shifts + tf.constant(cell_anchors(size))[None], [-1, 4])


def match(quality: tf.Tensor, high: float, low: float, low_quality: bool) -> tf.Tensor:
    """torchvision's ``Matcher`` on ``quality [G, N]``: per column the matched gt index,
    -1 below ``low`` (background), -2 between ``low`` and ``high`` (ignored)."""
    best = tf.reduce_max(quality, axis=0)
    idx = tf.cast(tf.argmax(quality, axis=0), tf.int32)
    matches = tf.where(best < low, -1, tf.where(best < high, -2, idx))
    if low_quality:
        # each gt's best-matching predictions keep their match, however low
        best_per_gt = tf.reduce_max(quality, axis=1, keepdims=True)
        is_best = tf.reduce_any(tf.equal(quality, best_per_gt), axis=0)
        matches = tf.where(is_best, idx, matches)
    return matches


def sample(labels: tf.Tensor, batch: int, positive_fraction: float) -> tf.Tensor:
    """torchvision's ``BalancedPositiveNegativeSampler``: indices of at most
    ``batch * positive_fraction`` random positives (label >= 1) and background (0) to fill
    ``batch``. Ignored entries (label < 0) are never drawn."""
    pos = tf.random.shuffle(tf.cast(tf.where(labels >= 1)[:, 0], tf.int32))
    neg = tf.random.shuffle(tf.cast(tf.where(tf.equal(labels, 0))[:, 0], tf.int32))
    n_pos = tf.minimum(int(batch * positive_fraction), tf.size(pos))
    n_neg = tf.minimum(batch - n_pos, tf.size(neg))
    return tf.concat([pos[:n_pos], neg[:n_neg]], axis=0)


def smooth_l1(x: tf.Tensor, y: tf.Tensor, beta: float) -> tf.Tensor:
    """Summed smooth-L1 (Huber / beta), torchvision's ``F.smooth_l1_loss(reduction="sum")``."""
    d = tf.abs(x - y)
    return tf.reduce_sum(tf.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta))


def grouped_nms(
    boxes: tf.Tensor, scores: tf.Tensor, groups: tf.Tensor, iou_threshold: float, keep: int
) -> tf.Tensor:
    """Indices kept by NMS run separately per group, by descending score, at most ``keep``."""
    offset = tf.cast(groups, boxes.dtype) * (tf.reduce_max(boxes) + 1.0)
    return tf.image.non_max_suppression(boxes + offset[:, None], scores, keep, iou_threshold)


def roi_align(
    levels: list[tf.Tensor],
    scales: list[float],
    boxes: tf.Tensor,
    image_index: tf.Tensor,
    out: int = 7,
    ratio: int = 2,
) -> tf.Tensor:
    """Multi-scale RoIAlign: ``[N, out, out, C]`` features of ``boxes [N, 4]`` from the
    feature maps ``levels`` (``[B, H, W, C]``, P2.. with ``scales`` 1/4..), each box on the
    level of the FPN paper's formula ``floor(4 + log2(sqrt(area) / 224))`` clamped to the
    levels there are (torchvision's ``LevelMapper``)."""
    k_min = round(-math.log2(scales[0]))
    lvl = tf.floor(4.0 + tf.math.log(tf.sqrt(box_area(boxes)) / 224.0) / math.log(2.0) + 1e-6)
    lvl = tf.cast(tf.clip_by_value(lvl, k_min, k_min + len(levels) - 1), tf.int32) - k_min
    parts, where = [], []
    for k, (fmap, scale) in enumerate(zip(levels, scales, strict=True)):
        idx = tf.cast(tf.where(tf.equal(lvl, k))[:, 0], tf.int32)
        b = tf.gather(boxes, idx) * scale
        # bin sampling points: start + (i + 0.5) * side / (out * ratio), i = 0..out*ratio-1
        side = tf.maximum(b[:, 2:] - b[:, :2], 1.0)
        step = side / (out * ratio)
        first = b[:, :2] + 0.5 * step
        last = first + (out * ratio - 1) * step
        h = tf.cast(tf.shape(fmap)[1] - 1, tf.float32)
        w = tf.cast(tf.shape(fmap)[2] - 1, tf.float32)
        norm = tf.stack([first[:, 1] / h, first[:, 0] / w, last[:, 1] / h, last[:, 0] / w], 1)
        crops = tf.image.crop_and_resize(
            fmap, norm, tf.gather(image_index, idx), (out * ratio, out * ratio)
        )
        parts.append(tf.nn.avg_pool2d(crops, ratio, ratio, "VALID"))
        where.append(idx)
    return tf.dynamic_stitch(where, parts)
