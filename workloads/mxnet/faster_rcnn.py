"""Faster R-CNN object detection on MXNet Gluon: torchvision's ``fasterrcnn_resnet50_fpn``
written out here (there is no GluonCV), random init, trained end to end.

The same detector as :mod:`workloads.pytorch.faster_rcnn` at every size of
``specs.FASTER_RCNN``: ResNet-50 body with plain, trainable batch-norm; FPN with 256
channels (P2-P5 from 1x1 laterals, nearest 2x top-down and 3x3 outputs, plus a stride-2
max-pool P6 for the RPN); RPN (shared 3x3 conv, objectness and box deltas for 3 aspect
ratios, one anchor size per level 32..512; per-level top-N before a 0.7 NMS per level, top-N
after, from the spec; 256 anchors sampled per image, half positive, IoU 0.7 / 0.3 with
torchvision's low-quality matches); multi-scale RoIAlign 7x7 (level by the FPN paper's
formula, k0 = 4 at 224 px; sampling ratio 2; ``mx.nd.contrib.ROIAlign`` with
``aligned=False``, as torchvision's ``MultiScaleRoIAlign``); TwoMLPHead 1024-1024; class and
box predictors for classes + background; RoI sampling (``roi_samples`` per image, 25%
positive, IoU 0.5, ground-truth boxes added to the proposals). Losses as torchvision's: RPN
binary cross-entropy + smooth-L1 (beta 1/9) over the sampled anchors, RoI cross-entropy +
smooth-L1 (beta 1/9) summed over the positives and divided by the sampled count. The
detector transform normalises with ImageNet's mean/std, resizes the shorter side to
``min_size`` (the longer at most ``max_size``) and pads the batch to a multiple of 32.
Evaluation: per-class box decoding, score threshold 0.05, NMS 0.5 per class
(``mx.nd.contrib.box_nms``), 100 detections per image, 1000 RPN proposals (torchvision's
test-time numbers). SGD momentum 0.9, weight decay 1e-4, global gradient norm clipped at 10,
learning rate from the spec (the PyTorch file's recipe).

Where it differs from torchvision:

- The ResNet-50 body is Gluon's model-zoo ``resnet50_v1`` (as ``workloads.mxnet.resnet50``):
  its bottlenecks stride in the first 1x1 convolution (torchvision: in the 3x3, "v1.5") and
  keep a bias on their two 1x1 convolutions (18,880 more weights, 0.05% of the detector).
- Initialisation is MXNet's: the body He-normal (fan out), FPN He-uniform (a = 1), RPN
  N(0, 0.01), the dense layers uniform(+-1/sqrt(fan_in)) with zero biases (torchvision also
  draws the dense biases uniformly).
- Resizing (when the spec's image size differs from ``min_size``; it does at no size here)
  uses ``BilinearResize2D`` with ``align_corners=False``.
- Matching and sampling run in NumPy on the host from the workload's seeded generator; IoU
  comes from ``mx.nd.contrib.box_iou``, NMS from ``box_nms`` (per level / per class by id).

The backbone (ResNet-50 + FPN) is hybridized; the RPN, proposal selection and RoI stages
run imperatively, as their shapes change with every batch.

Data: noisy backgrounds with 1-3 solid rectangles whose colour is their class, from NumPy
(:func:`scenes`, the PyTorch workload's scenes).
"""

from __future__ import annotations

import math
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn
from mxnet.gluon.model_zoo import vision

from workloads import harness, quality, specs
from workloads.mxnet import _common
from workloads.tensorflow import synthetic

MODEL = "faster_rcnn"

Config = specs.FasterRCNN
CONFIGS = specs.FASTER_RCNN.configs
BATCH = specs.FASTER_RCNN.batch

HELD_OUT_IMAGES = 16
EVAL_CHUNK = 4  # held-out images per forward pass (eval mode: chunking changes nothing)

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
SIZE_DIVISIBLE = 32
FPN_CHANNELS = 256
ANCHOR_SIZES = (32, 64, 128, 256, 512)  # one per level, P2..P6
ASPECT_RATIOS = (0.5, 1.0, 2.0)
RPN_FG_IOU, RPN_BG_IOU, RPN_NMS = 0.7, 0.3, 0.7
RPN_BATCH, RPN_POSITIVE = 256, 0.5
RPN_TEST_PRE_NMS, RPN_TEST_POST_NMS = 1000, 1000
ROI_IOU, ROI_POSITIVE = 0.5, 0.25
ROI_WEIGHTS = (10.0, 10.0, 5.0, 5.0)
BOX_SCORE, BOX_NMS, DETECTIONS = 0.05, 0.5, 100
BOX_CLIP = math.log(1000.0 / 16)
SMOOTH_L1_SIGMA = 3.0  # MXNet's smooth_l1 with sigma 3 is torchvision's beta 1/9
MIN_PROPOSAL, MIN_DETECTION = 1e-3, 1e-2


def scenes(
    cfg: Config, colours: np.ndarray, batch: int, rng: np.random.Generator
) -> tuple[list[np.ndarray], list[dict[str, np.ndarray]]]:
    """Images ``[3, px, px]`` in [0, 1] and their targets (boxes in pixels, labels 1..classes)."""
    px = cfg.image_px
    images: list[np.ndarray] = []
    targets: list[dict[str, np.ndarray]] = []
    for _ in range(batch):
        img = (0.5 + 0.1 * rng.standard_normal((3, px, px))).astype(np.float32)
        n = int(rng.integers(1, 4))
        wh = rng.integers(px // 5, px // 2, (n, 2))
        xy = (rng.random((n, 2)) * (px - wh)).astype(np.int64)
        boxes = np.concatenate([xy, xy + wh], axis=1)
        labels = rng.integers(1, cfg.classes + 1, n)
        for (x0, y0, x1, y1), c in zip(boxes.tolist(), labels.tolist(), strict=True):
            img[:, y0:y1, x0:x1] = colours[c - 1][:, None, None]
        images.append(np.clip(img, 0, 1))
        targets.append({"boxes": boxes.astype(np.float32), "labels": labels.astype(np.int64)})
    return images, targets


MAX_OBJECTS = 3  # a scene has 1 to 3 rectangles


def padded(
    images: list[np.ndarray], targets: list[dict[str, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A batch of :func:`scenes` as three arrays, the form the input pipeline carries:
    images ``[B, 3, px, px]``, boxes ``[B, MAX_OBJECTS, 4]`` and labels ``[B, MAX_OBJECTS]``
    (0 pads)."""
    boxes = np.zeros((len(images), MAX_OBJECTS, 4), np.float32)
    labels = np.zeros((len(images), MAX_OBJECTS), np.int64)
    for i, t in enumerate(targets):
        n = len(t["labels"])
        boxes[i, :n], labels[i, :n] = t["boxes"], t["labels"]
    return np.stack(images), boxes, labels


def unpadded(
    images: mx.nd.NDArray, boxes: mx.nd.NDArray, labels: mx.nd.NDArray
) -> tuple[list[np.ndarray], list[dict[str, np.ndarray]]]:
    """The pipeline's batch back in :func:`scenes`' form. The detector's transform and its
    anchor matching run in NumPy on the host, so the batch returns there (on a CPU, no copy;
    with ``--data device`` on a GPU this is a copy back to the host each step)."""
    lab = labels.asnumpy()
    targets = [
        {"boxes": b[m], "labels": c[m]}
        for b, c, m in zip(boxes.asnumpy(), lab, lab > 0, strict=True)
    ]
    return list(images.asnumpy()), targets


# ----------------------------------------------------------------------------- boxes


def encode(gt: np.ndarray, ref: np.ndarray, weights: tuple[float, ...]) -> np.ndarray:
    """Regression targets of ``gt`` boxes relative to ``ref`` boxes (torchvision's BoxCoder)."""
    wx, wy, ww, wh = weights
    rw, rh = ref[:, 2] - ref[:, 0], ref[:, 3] - ref[:, 1]
    rx, ry = ref[:, 0] + 0.5 * rw, ref[:, 1] + 0.5 * rh
    gw, gh = gt[:, 2] - gt[:, 0], gt[:, 3] - gt[:, 1]
    gx, gy = gt[:, 0] + 0.5 * gw, gt[:, 1] + 0.5 * gh
    out = [wx * (gx - rx) / rw, wy * (gy - ry) / rh, ww * np.log(gw / rw), wh * np.log(gh / rh)]
    return np.stack(out, axis=1).astype(np.float32)


def decode(deltas: mx.nd.NDArray, ref: mx.nd.NDArray, weights: tuple[float, ...]) -> mx.nd.NDArray:
    """Boxes ``[R, K, 4]`` from deltas ``[R, K, 4]`` relative to ``ref`` ``[R, 4]``."""
    wx, wy, ww, wh = weights
    w = (ref[:, 2] - ref[:, 0]).reshape((-1, 1))
    h = (ref[:, 3] - ref[:, 1]).reshape((-1, 1))
    cx = ref[:, 0].reshape((-1, 1)) + 0.5 * w
    cy = ref[:, 1].reshape((-1, 1)) + 0.5 * h
    px = deltas[:, :, 0] / wx * w + cx
    py = deltas[:, :, 1] / wy * h + cy
    pw = mx.nd.exp(mx.nd.minimum(deltas[:, :, 2] / ww, BOX_CLIP)) * w
    ph = mx.nd.exp(mx.nd.minimum(deltas[:, :, 3] / wh, BOX_CLIP)) * h
    return mx.nd.stack(px - 0.5 * pw, py - 0.5 * ph, px + 0.5 * pw, py + 0.5 * ph, axis=2)


def clip_boxes(boxes: mx.nd.NDArray, height: int, width: int) -> mx.nd.NDArray:
    """Boxes ``[..., 4]`` clipped to the image."""
    x = mx.nd.clip(boxes[..., 0::2], 0, width)
    y = mx.nd.clip(boxes[..., 1::2], 0, height)
    return mx.nd.stack(x[..., 0], y[..., 0], x[..., 1], y[..., 1], axis=-1)


def match(iou: np.ndarray, high: float, low: float, low_quality: bool) -> np.ndarray:
    """torchvision's Matcher on an ``[gt, boxes]`` IoU matrix: the matched gt per box, -1
    below ``low``, -2 between ``low`` and ``high``; with ``low_quality`` each gt's best
    boxes (ties included) keep their match."""
    best = iou.max(axis=0)
    matches = iou.argmax(axis=0)
    all_matches = matches.copy()
    matches[best < low] = -1
    matches[(best >= low) & (best < high)] = -2
    if low_quality:
        _, boxes = np.nonzero(iou == iou.max(axis=1, keepdims=True))
        matches[boxes] = all_matches[boxes]
    return matches


def sample(
    labels: np.ndarray, total: int, positive: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """torchvision's BalancedPositiveNegativeSampler: positive (>= 1) and negative (0)
    indices, at most ``total`` of them and a ``positive`` fraction of positives."""
    pos, neg = np.flatnonzero(labels >= 1), np.flatnonzero(labels == 0)
    n_pos = min(int(total * positive), pos.size)
    n_neg = min(total - n_pos, neg.size)
    return rng.permutation(pos)[:n_pos], rng.permutation(neg)[:n_neg]


def grid_anchors(feat_h: int, feat_w: int, stride_h: int, stride_w: int, size: int) -> np.ndarray:
    """One level's anchors ``[feat_h * feat_w * 3, 4]``, location-major (torchvision's order)."""
    ratios = np.array(ASPECT_RATIOS, np.float32)
    hr = np.sqrt(ratios)
    ws, hs = (1 / hr) * size, hr * size
    base = np.round(np.stack([-ws, -hs, ws, hs], axis=1) / 2)
    yy, xx = np.meshgrid(
        np.arange(feat_h, dtype=np.float32) * stride_h,
        np.arange(feat_w, dtype=np.float32) * stride_w,
        indexing="ij",
    )
    shifts = np.stack([xx.ravel(), yy.ravel(), xx.ravel(), yy.ravel()], axis=1)
    return (shifts[:, None, :] + base[None]).reshape(-1, 4).astype(np.float32)


def roi_levels(boxes: np.ndarray) -> np.ndarray:
    """FPN level (2..5) of each box ``[R, 4]``: floor(4 + log2(sqrt(area) / 224) + 1e-6),
    clamped (torchvision's LevelMapper)."""
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    with np.errstate(divide="ignore"):  # an empty box maps to -inf, then level 2
        lvl = np.floor(4 + np.log2(np.sqrt(area) / 224) + 1e-6)
    return np.clip(lvl, 2, 5).astype(np.int64)


def smooth_l1(diff: mx.nd.NDArray) -> mx.nd.NDArray:
    """Summed smooth-L1 with torchvision's beta 1/9."""
    return mx.nd.smooth_l1(diff, scalar=SMOOTH_L1_SIGMA).sum()


# ----------------------------------------------------------------------------- network


class BackboneFPN(gluon.HybridBlock):
    """Gluon's ResNet-50 v1 body (stages C2..C5) and the FPN: P2..P5 and the max-pool P6."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        features = vision.resnet50_v1().features  # stem (4 blocks), 4 stages, global pool
        fpn_init = mx.init.Xavier(rnd_type="uniform", factor_type="in", magnitude=3)
        with self.name_scope():
            self.stem = nn.HybridSequential(prefix="")
            for i in range(4):
                self.stem.add(features[i])
            self.stages = nn.HybridSequential(prefix="")
            for i in range(4, 8):
                self.stages.add(features[i])
            self.inner = nn.HybridSequential(prefix="inner_")
            self.layer = nn.HybridSequential(prefix="layer_")
            for c in (256, 512, 1024, 2048):
                self.inner.add(
                    nn.Conv2D(FPN_CHANNELS, 1, in_channels=c, weight_initializer=fpn_init)
                )
                self.layer.add(
                    nn.Conv2D(
                        FPN_CHANNELS,
                        3,
                        padding=1,
                        in_channels=FPN_CHANNELS,
                        weight_initializer=fpn_init,
                    )
                )

    def hybrid_forward(self, F: Any, x: Any) -> tuple[Any, ...]:
        x = self.stem(x)
        cs = []
        for stage in self.stages:
            x = stage(x)
            cs.append(x)
        last = self.inner[3](cs[3])
        outs = [self.layer[3](last)]
        for i in (2, 1, 0):  # the batch is padded to a multiple of 32: each level is 2x
            last = self.inner[i](cs[i]) + F.UpSampling(last, scale=2, sample_type="nearest")
            outs.insert(0, self.layer[i](last))
        outs.append(F.Pooling(outs[-1], kernel=(1, 1), stride=(2, 2), pool_type="max"))
        return tuple(outs)


class RPNHead(gluon.Block):
    """Shared 3x3 conv + ReLU, objectness and box deltas for 3 anchors per location."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        a = len(ASPECT_RATIOS)
        init = mx.init.Normal(0.01)
        with self.name_scope():
            self.conv = nn.Conv2D(
                FPN_CHANNELS, 3, padding=1, in_channels=FPN_CHANNELS, weight_initializer=init
            )
            self.cls = nn.Conv2D(a, 1, in_channels=FPN_CHANNELS, weight_initializer=init)
            self.bbox = nn.Conv2D(4 * a, 1, in_channels=FPN_CHANNELS, weight_initializer=init)

    def forward(self, feat: mx.nd.NDArray) -> tuple[mx.nd.NDArray, mx.nd.NDArray]:
        """Objectness ``[N, H*W*A]`` and deltas ``[N, H*W*A, 4]``, location-major."""
        t = mx.nd.relu(self.conv(feat))
        n, _, h, w = feat.shape
        a = len(ASPECT_RATIOS)
        obj = self.cls(t).transpose((0, 2, 3, 1)).reshape((n, -1))
        deltas = self.bbox(t).reshape((n, a, 4, h, w)).transpose((0, 3, 4, 1, 2))
        return obj, deltas.reshape((n, -1, 4))


class FasterRCNN(gluon.Block):
    """The detector: ``losses`` for training, ``detect`` for evaluation."""

    def __init__(self, cfg: Config, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cfg = cfg
        classes = cfg.classes + 1
        dense_init = mx.init.Xavier(rnd_type="uniform", factor_type="in", magnitude=1)
        with self.name_scope():
            self.backbone = BackboneFPN(prefix="backbone_")
            self.rpn = RPNHead(prefix="rpn_")
            self.fc6 = nn.Dense(
                1024, "relu", in_units=FPN_CHANNELS * 49, weight_initializer=dense_init
            )
            self.fc7 = nn.Dense(1024, "relu", in_units=1024, weight_initializer=dense_init)
            self.cls_score = nn.Dense(classes, in_units=1024, weight_initializer=dense_init)
            self.bbox_pred = nn.Dense(4 * classes, in_units=1024, weight_initializer=dense_init)
        self._anchors: dict[tuple[int, ...], list[np.ndarray]] = {}

    # -- transform

    def transform(
        self, images: list[np.ndarray], ctx: mx.Context
    ) -> tuple[mx.nd.NDArray, list[tuple[int, int]], list[tuple[float, float]]]:
        """Normalised, resized images padded into one batch; each image's resized (h, w)
        and its (y, x) scale from the original."""
        cfg = self.cfg
        sized, sizes, scales = [], [], []
        for img in images:
            h, w = img.shape[1:]
            scale = min(cfg.min_size / min(h, w), cfg.max_size / max(h, w))
            x = mx.nd.array((img - MEAN[:, None, None]) / STD[:, None, None], ctx=ctx)
            if scale != 1.0:  # torchvision: output size floor(side * scale)
                oh, ow = int(math.floor(h * scale)), int(math.floor(w * scale))
                x = mx.nd.contrib.BilinearResize2D(
                    x.expand_dims(0), height=oh, width=ow, align_corners=False
                )[0]
            sized.append(x)
            sizes.append((x.shape[1], x.shape[2]))
            scales.append((x.shape[1] / h, x.shape[2] / w))
        ph = int(math.ceil(max(s[0] for s in sizes) / SIZE_DIVISIBLE) * SIZE_DIVISIBLE)
        pw = int(math.ceil(max(s[1] for s in sizes) / SIZE_DIVISIBLE) * SIZE_DIVISIBLE)
        batch = mx.nd.zeros((len(images), 3, ph, pw), ctx=ctx)
        for i, x in enumerate(sized):
            batch[i, :, : x.shape[1], : x.shape[2]] = x
        return batch, sizes, scales

    def anchors(self, batch_shape: tuple[int, ...], feats: list[mx.nd.NDArray]) -> list[np.ndarray]:
        key = tuple(batch_shape[2:]) + tuple(s for f in feats for s in f.shape[2:])
        if key not in self._anchors:
            h, w = batch_shape[2:]
            self._anchors[key] = [
                grid_anchors(f.shape[2], f.shape[3], h // f.shape[2], w // f.shape[3], size)
                for f, size in zip(feats, ANCHOR_SIZES, strict=True)
            ]
        return self._anchors[key]

    # -- RPN

    def proposals(
        self,
        objs: list[mx.nd.NDArray],
        deltas: list[mx.nd.NDArray],
        anchors: list[np.ndarray],
        sizes: list[tuple[int, int]],
        pre_nms: int,
        post_nms: int,
    ) -> list[np.ndarray]:
        """Each image's proposals ``[P, 4]``: per-level top ``pre_nms`` by objectness,
        decoded, clipped, tiny boxes dropped, NMS 0.7 per level, best ``post_nms`` kept."""
        ctx = objs[0].context
        out = []
        for i, (h, w) in enumerate(sizes):
            rows = []
            for lvl, (o, d, a) in enumerate(zip(objs, deltas, anchors, strict=True)):
                o, d = o[i].detach(), d[i].detach()
                k = min(pre_nms, o.shape[0])
                top = mx.nd.topk(o, k=k, ret_typ="indices")
                scores = mx.nd.sigmoid(o.take(top))
                ref = mx.nd.array(a, ctx=ctx).take(top)
                boxes = clip_boxes(
                    decode(d.take(top).expand_dims(1), ref, (1, 1, 1, 1))[:, 0], h, w
                )
                small = mx.nd.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
                scores = mx.nd.where(small >= MIN_PROPOSAL, scores, -mx.nd.ones_like(scores))
                ids = mx.nd.full((k, 1), lvl, ctx=ctx)
                rows.append(mx.nd.concat(ids, scores.expand_dims(1), boxes, dim=1))
            kept = mx.nd.contrib.box_nms(
                mx.nd.concat(*rows, dim=0),
                overlap_thresh=RPN_NMS,
                valid_thresh=0.0,
                coord_start=2,
                score_index=1,
                id_index=0,
                force_suppress=False,
            ).asnumpy()
            kept = kept[kept[:, 1] >= 0][:post_nms]  # sorted by score; suppressed rows are -1
            out.append(kept[:, 2:6])
        return out

    def rpn_loss(
        self,
        objs: list[mx.nd.NDArray],
        deltas: list[mx.nd.NDArray],
        anchors: list[np.ndarray],
        targets: list[dict[str, np.ndarray]],
        rng: np.random.Generator,
    ) -> tuple[mx.nd.NDArray, mx.nd.NDArray]:
        """Objectness BCE (mean over the sampled anchors) and box smooth-L1 (summed over the
        positives / sampled count), 256 anchors per image, half positive."""
        ctx = objs[0].context
        obj = mx.nd.concat(*objs, dim=1)  # [N, M]
        delta = mx.nd.concat(*deltas, dim=1)  # [N, M, 4]
        n, m = obj.shape
        all_anchors = np.concatenate(anchors)
        anchors_nd = mx.nd.array(all_anchors, ctx=ctx)
        idx, labels, pos_idx, pos_targets = [], [], [], []
        for i, t in enumerate(targets):
            gt = t["boxes"]
            iou = mx.nd.contrib.box_iou(mx.nd.array(gt, ctx=ctx), anchors_nd).asnumpy()
            matches = match(iou, RPN_FG_IOU, RPN_BG_IOU, low_quality=True)
            lab = np.where(matches >= 0, 1, np.where(matches == -1, 0, -1))
            pos, neg = sample(lab, RPN_BATCH, RPN_POSITIVE, rng)
            idx += [i * m + pos, i * m + neg]
            labels += [np.ones(pos.size), np.zeros(neg.size)]
            pos_idx.append(i * m + pos)
            pos_targets.append(encode(gt[matches[pos]], all_anchors[pos], (1, 1, 1, 1)))
        sampled = np.concatenate(idx)
        logits = obj.reshape((-1,)).take(mx.nd.array(sampled, ctx=ctx))
        z = mx.nd.array(np.concatenate(labels), ctx=ctx)
        # binary cross-entropy with logits, written stably
        bce = mx.nd.relu(logits) - logits * z + mx.nd.log1p(mx.nd.exp(-mx.nd.abs(logits)))
        pred = delta.reshape((-1, 4)).take(mx.nd.array(np.concatenate(pos_idx), ctx=ctx))
        box = smooth_l1(pred - mx.nd.array(np.concatenate(pos_targets), ctx=ctx)) / sampled.size
        return bce.mean(), box

    # -- RoI heads

    def roi_features(
        self, feats: list[mx.nd.NDArray], rois: np.ndarray, batch_shape: tuple[int, ...]
    ) -> mx.nd.NDArray:
        """Multi-scale RoIAlign 7x7 over P2..P5 (``rois``: ``[R, 5]`` = image, x0, y0, x1, y1):
        level floor(4 + log2(sqrt(area) / 224) + 1e-6) clamped to 2..5, sampling ratio 2."""
        ctx = feats[0].context
        lvl = roi_levels(rois[:, 1:]) - 2
        pooled, order = [], []
        for k in range(4):
            sel = np.flatnonzero(lvl == k)
            if sel.size == 0:
                continue
            scale = feats[k].shape[2] / batch_shape[2]
            pooled.append(
                mx.nd.contrib.ROIAlign(
                    feats[k],
                    mx.nd.array(rois[sel], ctx=ctx),
                    pooled_size=(7, 7),
                    spatial_scale=2.0 ** round(math.log2(scale)),
                    sample_ratio=2,
                    aligned=False,
                )
            )
            order.append(sel)
        inverse = np.empty(len(rois), np.int64)
        inverse[np.concatenate(order)] = np.arange(len(rois))
        out = mx.nd.concat(*pooled, dim=0) if len(pooled) > 1 else pooled[0]
        return out.take(mx.nd.array(inverse, ctx=ctx))

    def box_head(self, pooled: mx.nd.NDArray) -> tuple[mx.nd.NDArray, mx.nd.NDArray]:
        x = self.fc7(self.fc6(pooled.reshape((pooled.shape[0], -1))))
        return self.cls_score(x), self.bbox_pred(x)

    def roi_loss(
        self,
        feats: list[mx.nd.NDArray],
        props: list[np.ndarray],
        targets: list[dict[str, np.ndarray]],
        batch_shape: tuple[int, ...],
        rng: np.random.Generator,
    ) -> tuple[mx.nd.NDArray, mx.nd.NDArray]:
        """RoI cross-entropy (mean) and box smooth-L1 of the positives' own class (summed /
        sampled count), ``roi_samples`` per image, 25% positive, IoU 0.5."""
        ctx = feats[0].context
        rois, labels, reg = [], [], []
        for i, (p, t) in enumerate(zip(props, targets, strict=True)):
            gt = t["boxes"]
            boxes = np.concatenate([p, gt]).astype(np.float32)
            iou = mx.nd.contrib.box_iou(mx.nd.array(gt, ctx=ctx), mx.nd.array(boxes, ctx=ctx))
            matches = match(iou.asnumpy(), ROI_IOU, ROI_IOU, low_quality=False)
            lab = np.where(matches >= 0, t["labels"][np.maximum(matches, 0)], 0)
            pos, neg = sample(lab, self.cfg.roi_samples, ROI_POSITIVE, rng)
            keep = np.concatenate([pos, neg])
            rois.append(np.concatenate([np.full((keep.size, 1), i, np.float32), boxes[keep]], 1))
            labels.append(lab[keep])
            reg.append(encode(gt[np.maximum(matches[keep], 0)], boxes[keep], ROI_WEIGHTS))
        all_rois = np.concatenate(rois)
        lab = np.concatenate(labels)
        targets_reg = np.concatenate(reg)
        logits, box = self.box_head(self.roi_features(feats, all_rois, batch_shape))
        cls_loss = -mx.nd.pick(mx.nd.log_softmax(logits), mx.nd.array(lab, ctx=ctx)).mean()
        pos = np.flatnonzero(lab > 0)
        classes = self.cfg.classes + 1
        if pos.size == 0:
            return cls_loss, box.sum() * 0
        pred = box.reshape((-1, 4)).take(mx.nd.array(pos * classes + lab[pos], ctx=ctx))
        return cls_loss, smooth_l1(pred - mx.nd.array(targets_reg[pos], ctx=ctx)) / lab.size

    # -- entry points

    def losses(
        self,
        images: list[np.ndarray],
        targets: list[dict[str, np.ndarray]],
        ctx: mx.Context,
        rng: np.random.Generator,
    ) -> dict[str, mx.nd.NDArray]:
        """The four training losses (call inside ``autograd.record``)."""
        batch, sizes, scales = self.transform(images, ctx)
        targets = [
            {"boxes": t["boxes"] * np.array([sx, sy, sx, sy], np.float32), "labels": t["labels"]}
            for t, (sy, sx) in zip(targets, scales, strict=True)
        ]
        feats = list(self.backbone(batch))
        heads = [self.rpn(f) for f in feats]
        objs, deltas = [h[0] for h in heads], [h[1] for h in heads]
        anchors = self.anchors(batch.shape, feats)
        cfg = self.cfg
        props = self.proposals(objs, deltas, anchors, sizes, cfg.rpn_pre_nms, cfg.rpn_post_nms)
        rpn_obj, rpn_box = self.rpn_loss(objs, deltas, anchors, targets, rng)
        roi_cls, roi_box = self.roi_loss(feats[:4], props, targets, batch.shape, rng)
        return {
            "loss_objectness": rpn_obj,
            "loss_rpn_box_reg": rpn_box,
            "loss_classifier": roi_cls,
            "loss_box_reg": roi_box,
        }

    def detect(self, images: list[np.ndarray], ctx: mx.Context) -> list[quality.Detections]:
        """Detections per image in original pixels (call outside ``autograd.record``)."""
        batch, sizes, scales = self.transform(images, ctx)
        feats = list(self.backbone(batch))
        heads = [self.rpn(f) for f in feats]
        anchors = self.anchors(batch.shape, feats)
        props = self.proposals(
            [h[0] for h in heads],
            [h[1] for h in heads],
            anchors,
            sizes,
            RPN_TEST_PRE_NMS,
            RPN_TEST_POST_NMS,
        )
        rois = np.concatenate(
            [
                np.concatenate([np.full((len(p), 1), i, np.float32), p], 1)
                for i, p in enumerate(props)
            ]
        )
        logits, box = self.box_head(self.roi_features(feats[:4], rois, batch.shape))
        classes = self.cfg.classes + 1
        scores = mx.nd.softmax(logits)
        ref = mx.nd.array(rois[:, 1:], ctx=ctx)
        boxes = decode(box.reshape((-1, classes, 4)), ref, ROI_WEIGHTS)
        out = []
        start = 0
        for i, ((h, w), (sy, sx)) in enumerate(zip(sizes, scales, strict=True)):
            n = len(props[i])
            b = clip_boxes(boxes[start : start + n, 1:], h, w).reshape((-1, 4))
            s = scores[start : start + n, 1:].reshape((-1,))
            start += n
            ids = mx.nd.tile(mx.nd.arange(1, classes, ctx=ctx), (n,))
            small = mx.nd.minimum(b[:, 2] - b[:, 0], b[:, 3] - b[:, 1])
            s = mx.nd.where((small >= MIN_DETECTION) * (s > BOX_SCORE), s, -mx.nd.ones_like(s))
            kept = mx.nd.contrib.box_nms(
                mx.nd.concat(ids.expand_dims(1), s.expand_dims(1), b, dim=1),
                overlap_thresh=BOX_NMS,
                valid_thresh=0.0,
                coord_start=2,
                score_index=1,
                id_index=0,
                force_suppress=False,
            ).asnumpy()
            kept = kept[kept[:, 1] >= 0][:DETECTIONS]
            boxes_px = kept[:, 2:6] / np.array([sx, sy, sx, sy], np.float32)
            out.append(quality.Detections(boxes_px, kept[:, 0].astype(np.int64), kept[:, 1]))
        return out


def build_model(cfg: Config, ctx: mx.Context) -> FasterRCNN:
    """The detector, initialised on ``ctx`` (the body He-normal, fan out, as torchvision's
    ResNet); its backbone hybridized."""
    net = FasterRCNN(cfg)
    net.initialize(mx.init.MSRAPrelu(factor_type="out", slope=0.0), ctx=ctx)
    net.backbone.hybridize(static_alloc=True)
    return net


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    ctx, rng = _common.setup(args)
    net = build_model(cfg, ctx)
    params = [p for p in net.collect_params().values() if p.grad_req != "null"]
    trainer = gluon.Trainer(
        net.collect_params(), "sgd", {"learning_rate": cfg.lr, "momentum": 0.9, "wd": 1e-4}
    )
    colours = rng.random((cfg.classes, 3)).astype(np.float32)

    data = _common.batches(
        lambda r: padded(*scenes(cfg, colours, args.batch_size, r)), args, ctx, rng
    )

    def step(_: int) -> float:
        images, targets = unpadded(*next(data))
        with autograd.record():
            loss = mx.nd.add_n(*net.losses(images, targets, ctx, rng).values())
        loss.backward()
        gluon.utils.clip_global_norm([p.grad(ctx) for p in params], 10.0)
        trainer.step(1)
        return float(loss.asscalar())

    held_images, held_targets = scenes(
        cfg, colours, HELD_OUT_IMAGES, synthetic.held_out_rng(args.seed)
    )

    def evaluate() -> float:  # outside autograd.record: batch-norm uses its running statistics
        preds = []
        for i in range(0, HELD_OUT_IMAGES, EVAL_CHUNK):
            preds += net.detect(held_images[i : i + EVAL_CHUNK], ctx)
        truths = [quality.Detections(t["boxes"], t["labels"]) for t in held_targets]
        return quality.map50(preds, truths)

    _common.run(
        MODEL,
        args,
        step,
        nets=[net],
        trainers=[trainer],
        evaluate=evaluate,
        target=quality.target(MODEL, args.size),
    )


if __name__ == "__main__":
    main()
