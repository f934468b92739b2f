"""Faster R-CNN object detection on TensorFlow/Keras: torchvision's ``fasterrcnn_resnet50_fpn``
written here in Keras layers and TensorFlow ops, no pretrained weights, trained end to end.

The same detector as :mod:`workloads.pytorch.faster_rcnn` at every size of
``specs.FASTER_RCNN``: the transform (shorter side resized to ``min_size``, longer at most
``max_size``, ImageNet mean/std, padded to a multiple of 32); a ResNet-50 body
(``keras.applications.ResNet50``, plain trainable batch-norm) with an FPN of 256 channels
(P2-P5, plus P6 = a stride-2 max-pool of P5 for the RPN); the RPN (3x3 conv, objectness and
box deltas for 3 aspect ratios, one anchor size per level 32..512; top-N per level before
NMS and per image after, 0.7 NMS; 256 anchors sampled per image, half positive); RoIAlign
7x7 on the FPN paper's level (:func:`workloads.tensorflow.detection.roi_align`); the
TwoMLPHead 1024-1024 and class + box predictors for classes + 1; RoI sampling
(``roi_samples`` per image, 25% positives, IoU 0.5, gt boxes added to the proposals).
Loss, as torchvision's: RPN binary cross-entropy + smooth-L1 (beta 1/9), RoI cross-entropy
+ smooth-L1 (beta 1/9) summed over positives / sampled count. SGD momentum 0.9, weight
decay 1e-4 (Keras's, applied with the update), gradient norm clipped at 10, lr from the spec.
Evaluation: the RPN's test-time 1000/1000 proposals, per-class boxes, score threshold 0.05,
NMS 0.5 per class, 100 detections per image, mAP@0.5 on 16 held-out scenes.

The training step is one ``tf.function`` (GradientTape forward and backward, clipping,
update), traced once: every image of a size has the same shape, and the per-image dynamic
parts (matched anchors, sampled RoIs, boxes per level) are dynamic tensors inside the
graph. Detection for evaluation is a second ``tf.function``.

Where this differs from torchvision: Keras's ResNet50 is v1 (stride 2 in the first 1x1
convolution of a downsampling block, torchvision's v1.5 has it in the 3x3) with a bias on
every convolution (26,560 more weights) and Keras's initialisers (Glorot uniform; the FPN,
RPN and MLP heads use torchvision's); its batch-norm is set to torchvision's momentum (0.1,
Keras 0.9) and epsilon 1e-5. RoIAlign is ``tf.image.crop_and_resize`` at the 2x2 sampling
points of each bin (zero outside the map where torchvision clamps within one pixel); NMS is
``tf.image.non_max_suppression``; random sampling draws from TensorFlow's seeded RNG.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from workloads import harness, quality, specs
from workloads.tensorflow import _common, synthetic
from workloads.tensorflow import detection as det

MODEL = "faster_rcnn"

Config = specs.FasterRCNN
CONFIGS = specs.FASTER_RCNN.configs
BATCH = specs.FASTER_RCNN.batch

HELD_OUT_IMAGES = 16
MAX_OBJECTS = 3  # a scene has 1 to 3 rectangles; targets are padded to this many
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
ANCHOR_SIZES = (32, 64, 128, 256, 512)  # P2..P6
RPN_TEST_TOP_N = 1000  # torchvision's rpn_pre/post_nms_top_n_test
RPN_BOX_W, ROI_BOX_W = (1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0)
_BODY_OUTPUTS = ("conv2_block3_out", "conv3_block4_out", "conv4_block6_out", "conv5_block3_out")


def scenes(
    cfg: Config, colours: np.ndarray, batch: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The PyTorch workload's scenes from NumPy's ``rng``: images ``[B, px, px, 3]`` float32
    in [0, 1] (noise around 0.5 and 1-3 solid rectangles coloured by class), boxes
    ``[B, MAX_OBJECTS, 4]`` in pixels and labels ``[B, MAX_OBJECTS]`` (1..classes; 0 pads)."""
    px = cfg.image_px
    images = 0.5 + 0.1 * rng.standard_normal((batch, px, px, 3))
    boxes = np.zeros((batch, MAX_OBJECTS, 4), np.float32)
    labels = np.zeros((batch, MAX_OBJECTS), np.int32)
    for i in range(batch):
        n = int(rng.integers(1, MAX_OBJECTS + 1))
        wh = rng.integers(px // 5, px // 2, (n, 2))
        xy = (rng.uniform(size=(n, 2)) * (px - wh)).astype(np.int64)
        boxes[i, :n] = np.concatenate([xy, xy + wh], axis=1)
        labels[i, :n] = rng.integers(1, cfg.classes + 1, n)
        for (x0, y0, x1, y1), c in zip(boxes[i, :n].astype(int), labels[i, :n], strict=True):
            images[i, y0:y1, x0:x1] = colours[c - 1]
    return np.clip(images, 0, 1).astype(np.float32), boxes, labels


def _resize_scale(cfg: Config, h: int, w: int) -> float:
    return min(cfg.min_size / min(h, w), cfg.max_size / max(h, w))


def _torch_linear(units: int, fan_in: int, activation: str | None = None) -> keras.layers.Dense:
    """A Dense layer initialised as torch.nn.Linear (uniform within 1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in)
    return keras.layers.Dense(
        units,
        activation=activation,
        kernel_initializer=keras.initializers.VarianceScaling(1 / 3, "fan_in", "uniform"),
        bias_initializer=keras.initializers.RandomUniform(-bound, bound),
    )


def resnet50_body() -> keras.Model:
    """keras.applications.ResNet50 without its head, returning C2..C5 (strides 4..32),
    batch-norm with torchvision's momentum and epsilon."""
    base = keras.applications.ResNet50(include_top=False, weights=None, input_shape=(None, None, 3))
    for layer in base.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum, layer.epsilon = 0.9, 1e-5
    return keras.Model(base.input, [base.get_layer(n).output for n in _BODY_OUTPUTS])


class FasterRCNN(keras.Model):  # type: ignore[misc]
    """fasterrcnn_resnet50_fpn: :meth:`losses_of` for training, :meth:`detect` for eval."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.body = resnet50_body()
        kaiming1 = keras.initializers.VarianceScaling(1.0, "fan_in", "uniform")  # a=1
        self.inner = [keras.layers.Conv2D(256, 1, kernel_initializer=kaiming1) for _ in range(4)]
        self.outer = [
            keras.layers.Conv2D(256, 3, padding="same", kernel_initializer=kaiming1)
            for _ in range(4)
        ]
        normal = keras.initializers.RandomNormal(stddev=0.01)
        self.rpn_conv = keras.layers.Conv2D(
            256, 3, padding="same", activation="relu", kernel_initializer=normal
        )
        self.rpn_cls = keras.layers.Conv2D(3, 1, kernel_initializer=normal)
        self.rpn_box = keras.layers.Conv2D(12, 1, kernel_initializer=normal)
        self.fc6 = _torch_linear(1024, 256 * 49, "relu")
        self.fc7 = _torch_linear(1024, 1024, "relu")
        self.cls_score = _torch_linear(cfg.classes + 1, 1024)
        self.bbox_pred = _torch_linear((cfg.classes + 1) * 4, 1024)

    def build_all(self) -> None:
        """Create every weight with one small forward pass (nothing is trained)."""
        feats = self.features(tf.zeros((1, 64, 64, 3)), training=False)
        self.rpn(feats)
        self.box_head(tf.zeros((1, 7, 7, 256)), training=False)

    # -- network ---------------------------------------------------------------------------
    def features(self, x: tf.Tensor, training: bool) -> list[tf.Tensor]:
        """FPN outputs P2..P6 (float32) of normalised, padded images ``x``."""
        cs = self.body(x, training=training)
        last = self.inner[3](cs[3])
        outs = [self.outer[3](last)]
        for k in (2, 1, 0):
            lateral = self.inner[k](cs[k])
            size = (lateral.shape[1], lateral.shape[2])
            last = lateral + tf.image.resize(last, size, method="nearest")
            outs.insert(0, self.outer[k](last))
        outs.append(outs[-1][:, ::2, ::2])  # max_pool2d(kernel 1, stride 2)
        return [tf.cast(p, tf.float32) for p in outs]

    def rpn(self, feats: list[tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        """Objectness logits ``[B, A]`` and box deltas ``[B, A, 4]`` over every level's
        anchors (row-major cells, 3 ratios innermost, P2 first)."""
        logits, deltas = [], []
        for p in feats:
            t = self.rpn_conv(p)
            logits.append(tf.reshape(tf.cast(self.rpn_cls(t), tf.float32), [tf.shape(p)[0], -1]))
            d = tf.cast(self.rpn_box(t), tf.float32)
            deltas.append(tf.reshape(d, [tf.shape(p)[0], -1, 4]))
        return tf.concat(logits, 1), tf.concat(deltas, 1)

    def box_head(self, rois: tf.Tensor, training: bool) -> tuple[tf.Tensor, tf.Tensor]:
        """Class logits ``[N, C+1]`` and per-class box deltas ``[N, (C+1)*4]`` of RoI features."""
        h = self.fc7(self.fc6(tf.reshape(rois, [tf.shape(rois)[0], 7 * 7 * 256])))
        return tf.cast(self.cls_score(h), tf.float32), tf.cast(self.bbox_pred(h), tf.float32)

    # -- shared steps ----------------------------------------------------------------------
    def transform(self, images: tf.Tensor) -> tuple[tf.Tensor, float, tuple[int, int]]:
        """Normalised images resized as torchvision's transform and padded to a multiple
        of 32; the scale and the resized (unpadded) size."""
        h, w = int(images.shape[1]), int(images.shape[2])
        scale = _resize_scale(self.cfg, h, w)
        size = (int(math.floor(h * scale)), int(math.floor(w * scale)))
        x = (images - tf.constant(MEAN)) / tf.constant(STD)
        if size != (h, w):
            x = tf.image.resize(x, size, method="bilinear")
        ph, pw = (-(-s // 32) * 32 for s in size)
        return tf.pad(x, [[0, 0], [0, ph - size[0]], [0, pw - size[1]], [0, 0]]), scale, size

    def anchors(self, feats: list[tf.Tensor], padded: tuple[int, int]) -> list[tf.Tensor]:
        return [
            det.grid_anchors(
                s, p.shape[1], p.shape[2], padded[0] // p.shape[1], padded[1] // p.shape[2]
            )
            for s, p in zip(ANCHOR_SIZES, feats, strict=True)
        ]

    def proposals(
        self,
        logits: tf.Tensor,
        deltas: tf.Tensor,
        anchors: list[tf.Tensor],
        size: tuple[int, int],
        pre_nms: int,
        post_nms: int,
    ) -> tf.Tensor:
        """One image's RPN proposals ``[P, 4]``: top ``pre_nms`` per level, decoded,
        clipped, small boxes dropped, NMS 0.7 per level, best ``post_nms``."""
        logits, deltas = tf.stop_gradient(logits), tf.stop_gradient(deltas)
        boxes, scores, levels, start = [], [], [], 0
        for k, a in enumerate(anchors):
            n = int(a.shape[0])
            top = tf.math.top_k(logits[start : start + n], min(pre_nms, n)).indices
            b = det.decode(tf.gather(deltas[start : start + n], top), tf.gather(a, top), RPN_BOX_W)
            boxes.append(b[:, 0])
            scores.append(tf.gather(logits[start : start + n], top))
            levels.append(tf.fill(tf.shape(top), k))
            start += n
        b = det.clip(tf.concat(boxes, 0), float(size[0]), float(size[1]))
        s, lv = tf.sigmoid(tf.concat(scores, 0)), tf.concat(levels, 0)
        ok = tf.logical_and(b[:, 2] - b[:, 0] >= 1e-3, b[:, 3] - b[:, 1] >= 1e-3)
        b, s, lv = tf.boolean_mask(b, ok), tf.boolean_mask(s, ok), tf.boolean_mask(lv, ok)
        return tf.gather(b, det.grouped_nms(b, s, lv, 0.7, post_nms))

    # -- training --------------------------------------------------------------------------
    def losses_of(
        self, images: tf.Tensor, boxes: tf.Tensor, labels: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        """torchvision's four training losses of a batch (targets padded with label 0)."""
        x, scale, size = self.transform(images)
        boxes = boxes * scale
        feats = self.features(x, training=True)
        anchors = self.anchors(feats, (x.shape[1], x.shape[2]))
        all_anchors = tf.concat(anchors, 0)
        logits, deltas = self.rpn(feats)
        rpn_logit, rpn_label, rpn_d, rpn_t, rpn_n = [], [], [], [], 0
        rois, roi_img, roi_label, roi_t = [], [], [], []
        for i in range(images.shape[0]):
            n_gt = tf.math.count_nonzero(labels[i] > 0, dtype=tf.int32)
            gt, gl = boxes[i, :n_gt], labels[i, :n_gt]
            # RPN targets: IoU >= 0.7 object, < 0.3 background, each gt's best anchors object
            m = det.match(det.iou(gt, all_anchors), 0.7, 0.3, low_quality=True)
            lab = tf.where(m >= 0, 1, tf.where(tf.equal(m, -1), 0, -1))
            pick = det.sample(lab, 256, 0.5)
            rpn_logit.append(tf.gather(logits[i], pick))
            rpn_label.append(tf.cast(tf.gather(lab, pick), tf.float32))
            pos = tf.boolean_mask(pick, tf.gather(lab, pick) > 0)
            pa = tf.gather(all_anchors, pos)
            rpn_d.append(tf.gather(deltas[i], pos))
            rpn_t.append(det.encode(tf.gather(gt, tf.gather(m, pos)), pa, RPN_BOX_W))
            rpn_n += tf.size(pick)
            # RoI sampling among the proposals and the gt boxes
            cfg = self.cfg
            props = tf.concat(
                [
                    self.proposals(
                        logits[i], deltas[i], anchors, size, cfg.rpn_pre_nms, cfg.rpn_post_nms
                    ),
                    gt,
                ],
                0,
            )
            m = det.match(det.iou(gt, props), 0.5, 0.5, low_quality=False)
            lab = tf.where(
                m >= 0, tf.gather(gl, tf.maximum(m, 0)), tf.where(tf.equal(m, -1), 0, -1)
            )
            pick = det.sample(lab, cfg.roi_samples, 0.25)
            p = tf.gather(props, pick)
            rois.append(p)
            roi_img.append(tf.fill(tf.shape(pick), i))
            roi_label.append(tf.gather(lab, pick))
            roi_t.append(det.encode(tf.gather(gt, tf.maximum(tf.gather(m, pick), 0)), p, ROI_BOX_W))
        rpn_n_f = tf.cast(rpn_n, tf.float32)
        obj = tf.nn.sigmoid_cross_entropy_with_logits(
            tf.concat(rpn_label, 0), tf.concat(rpn_logit, 0)
        )
        rpn_box = det.smooth_l1(tf.concat(rpn_d, 0), tf.concat(rpn_t, 0), 1 / 9) / rpn_n_f
        return {
            "loss_objectness": tf.reduce_mean(obj),
            "loss_rpn_box_reg": rpn_box,
            **self._roi_losses(feats, rois, roi_img, roi_label, roi_t),
        }

    def _roi_losses(
        self,
        feats: list[tf.Tensor],
        rois: list[tf.Tensor],
        roi_img: list[tf.Tensor],
        roi_label: list[tf.Tensor],
        roi_t: list[tf.Tensor],
    ) -> dict[str, tf.Tensor]:
        r, labels, targets = tf.concat(rois, 0), tf.concat(roi_label, 0), tf.concat(roi_t, 0)
        pooled = det.roi_align(feats[:4], [0.25, 0.125, 0.0625, 0.03125], r, tf.concat(roi_img, 0))
        cls, reg = self.box_head(pooled, training=True)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, cls)
        pos = tf.cast(tf.where(labels > 0)[:, 0], tf.int32)
        reg = tf.reshape(reg, [tf.shape(reg)[0], -1, 4])
        picked = tf.gather_nd(reg, tf.stack([pos, tf.gather(labels, pos)], 1))
        box = det.smooth_l1(picked, tf.gather(targets, pos), 1 / 9)
        return {
            "loss_classifier": tf.reduce_mean(ce),
            "loss_box_reg": box / tf.cast(tf.size(labels), tf.float32),
        }

    # -- inference -------------------------------------------------------------------------
    def detect(self, images: tf.Tensor) -> list[tuple[tf.Tensor, tf.Tensor, tf.Tensor]]:
        """Per image (boxes ``[D, 4]`` in input pixels, labels ``[D]``, scores ``[D]``):
        per-class boxes scoring > 0.05, NMS 0.5 per class, the best 100."""
        x, scale, size = self.transform(images)
        feats = self.features(x, training=False)
        anchors = self.anchors(feats, (x.shape[1], x.shape[2]))
        logits, deltas = self.rpn(feats)
        props = [
            self.proposals(logits[i], deltas[i], anchors, size, RPN_TEST_TOP_N, RPN_TEST_TOP_N)
            for i in range(images.shape[0])
        ]
        idx = tf.concat([tf.fill([tf.shape(p)[0]], i) for i, p in enumerate(props)], 0)
        allp = tf.concat(props, 0)
        pooled = det.roi_align(feats[:4], [0.25, 0.125, 0.0625, 0.03125], allp, idx)
        cls, reg = self.box_head(pooled, training=False)
        boxes = det.clip(det.decode(reg, allp, ROI_BOX_W), float(size[0]), float(size[1]))
        scores = tf.nn.softmax(cls)
        out = []
        for i in range(images.shape[0]):
            mine = tf.equal(idx, i)
            b = tf.reshape(tf.boolean_mask(boxes, mine)[:, 1:], [-1, 4])
            s = tf.reshape(tf.boolean_mask(scores, mine)[:, 1:], [-1])
            c = tf.tile(tf.range(1, self.cfg.classes + 1), [tf.shape(s)[0] // self.cfg.classes])
            ok = tf.logical_and(s > 0.05, (b[:, 2] - b[:, 0] >= 1e-2) & (b[:, 3] - b[:, 1] >= 1e-2))
            b, s, c = tf.boolean_mask(b, ok), tf.boolean_mask(s, ok), tf.boolean_mask(c, ok)
            keep = det.grouped_nms(b, s, c, 0.5, 100)
            out.append((tf.gather(b, keep) / scale, tf.gather(c, keep), tf.gather(s, keep)))
        return out


def build_model(cfg: Config) -> FasterRCNN:
    """The detector with every weight created (randomly initialised)."""
    net = FasterRCNN(cfg)
    net.build_all()
    return net


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, rng = _common.setup(args)
    with tf.device(device):
        net = build_model(cfg)
        params = net.trainable_variables
        opt = keras.optimizers.SGD(learning_rate=cfg.lr, momentum=0.9, weight_decay=1e-4)
        _common.build_optimizer(opt, params)
        colours = rng.uniform(size=(cfg.classes, 3)).astype(np.float32)

        @tf.function
        def train_step(x: tf.Tensor, boxes: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.add_n(list(net.losses_of(x, boxes, labels).values()))
            grads, _ = tf.clip_by_global_norm(tape.gradient(loss, params), 10.0)
            opt.apply_gradients(zip(grads, params, strict=True))
            return loss

        data = _common.batches(
            lambda r: scenes(cfg, colours, args.batch_size, r), args, device, rng
        )

        def step(_: int) -> tf.Tensor:
            return train_step(*next(data))

        held = scenes(cfg, colours, HELD_OUT_IMAGES, synthetic.held_out_rng(args.seed))
        detect = tf.function(net.detect)

        def evaluate() -> float:
            preds, truths = [], []
            for lo in range(0, HELD_OUT_IMAGES, args.batch_size):
                x, boxes, labels = (a[lo : lo + args.batch_size] for a in held)
                for (b, c, s), gb, gl in zip(detect(tf.constant(x)), boxes, labels, strict=True):
                    preds.append(quality.Detections(b.numpy(), c.numpy(), s.numpy()))
                    truths.append(quality.Detections(gb[gl > 0], gl[gl > 0]))
            return quality.map50(preds, truths)

        _common.run(MODEL, args, step, evaluate=evaluate, target=quality.target(MODEL, args.size))


if __name__ == "__main__":
    main()
