"""Faster R-CNN on MXNet computes torchvision's stages: the MXNet workload's anchors, RoI
levels, box coding, IoU, matching, RoIAlign and smooth-L1 against torchvision's own
functions on the same inputs (torchvision, in ``.venv``, is the reference; the MXNet code
runs in ``.venv-mxnet``).
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F
from torchvision.models.detection import _utils as det_utils
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.ops import box_iou, roi_align
from torchvision.ops.poolers import LevelMapper

from tests.workloads.runner import REPO, mxnet_python

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

_MXNET = """
import sys
import mxnet as mx, numpy as np
from workloads.mxnet import faster_rcnn as m
d = np.load(sys.argv[1])
nd = mx.nd.array
gt, props, deltas = d["gt"], d["props"], d["deltas"]
iou = mx.nd.contrib.box_iou(nd(gt), nd(props)).asnumpy()
matches = m.match(iou, 0.7, 0.3, low_quality=True)
np.savez(
    sys.argv[2],
    anchors=np.concatenate([m.grid_anchors(16, 16, 4, 4, 32), m.grid_anchors(8, 8, 8, 8, 64)]),
    levels=m.roi_levels(props),
    pooled=mx.nd.contrib.ROIAlign(nd(d["feats"]), nd(d["rois"]), pooled_size=(7, 7),
        spatial_scale=0.25, sample_ratio=2, aligned=False).asnumpy(),
    iou=iou,
    matches=matches,
    encoded=m.encode(gt[np.maximum(matches, 0)], props, m.ROI_WEIGHTS),
    decoded=m.decode(nd(deltas).expand_dims(1), nd(props), m.ROI_WEIGHTS)[:, 0].asnumpy(),
    smooth_l1=m.smooth_l1(nd(deltas)).asnumpy(),
)
"""


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    gt = np.array([[4, 6, 30, 40], [20, 20, 60, 50], [40, 2, 62, 18]], np.float32)
    # proposals: jittered copies of the ground truth (high IoU), and random boxes
    jitter = np.repeat(gt, 4, axis=0) + rng.normal(0, 3, (12, 4)).astype(np.float32)
    xy = rng.uniform(0, 50, (28, 2))
    rand = np.concatenate([xy, xy + rng.uniform(2, 300, (28, 2))], axis=1).astype(np.float32)
    props = np.concatenate([jitter, rand])
    props[:, 2:] = np.maximum(props[:, 2:], props[:, :2] + 1)
    return {
        "gt": gt,
        "props": props,
        "deltas": rng.normal(0, 0.7, (len(props), 4)).astype(np.float32),
        "feats": rng.standard_normal((2, 8, 16, 16)).astype(np.float32),
        "rois": np.array(
            [
                [0, 3.2, 4.1, 40.7, 30.2],
                [1, 0, 0, 63, 63],
                [0, 10, 10, 12, 11],
                [1, 20.5, 7, 50, 60],
            ],
            np.float32,
        ),
    }


def test_mxnet_stages_are_torchvisions(tmp_path: Path) -> None:
    d = _inputs()
    np.savez(tmp_path / "in.npz", **d)  # type: ignore[arg-type]  # numpy's stub: allow_pickle
    out = subprocess.run(
        [mxnet_python(), "-c", _MXNET, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = np.load(tmp_path / "out.npz")
    t = {k: torch.from_numpy(v) for k, v in d.items()}

    gen = AnchorGenerator(((32,), (64,)), ((0.5, 1.0, 2.0),) * 2)
    feats = [torch.zeros(1, 1, 16, 16), torch.zeros(1, 1, 8, 8)]
    anchors = gen(ImageList(torch.zeros(1, 3, 64, 64), [(64, 64)]), feats)[0]
    np.testing.assert_array_equal(got["anchors"], anchors.numpy())

    levels = LevelMapper(2, 5)([t["props"]]) + 2
    np.testing.assert_array_equal(got["levels"], levels.numpy())

    pooled = roi_align(t["feats"], t["rois"], (7, 7), 0.25, sampling_ratio=2, aligned=False)
    np.testing.assert_allclose(got["pooled"], pooled.numpy(), atol=1e-5)

    iou = box_iou(t["gt"], t["props"])
    np.testing.assert_allclose(got["iou"], iou.numpy(), atol=1e-5)
    matches = det_utils.Matcher(0.7, 0.3, allow_low_quality_matches=True)(iou)
    np.testing.assert_array_equal(got["matches"], matches.numpy())
    assert (matches >= 0).sum() >= 3 and (matches == -1).any() and (matches == -2).any()

    coder = det_utils.BoxCoder((10.0, 10.0, 5.0, 5.0), bbox_xform_clip=math.log(1000.0 / 16))
    encoded = coder.encode_single(t["gt"][matches.clamp(min=0)], t["props"])
    np.testing.assert_allclose(got["encoded"], encoded.numpy(), rtol=1e-4, atol=1e-4)
    decoded = coder.decode_single(t["deltas"], t["props"])
    np.testing.assert_allclose(got["decoded"], decoded.numpy(), rtol=1e-4, atol=1e-3)

    sl1 = F.smooth_l1_loss(t["deltas"], torch.zeros_like(t["deltas"]), beta=1 / 9, reduction="sum")
    np.testing.assert_allclose(got["smooth_l1"], sl1.numpy(), rtol=1e-5)
