"""A3C on TensorFlow and MXNet is PyTorch's agent: the same network sizes, the same frames.

Expected sizes are written out from TBD's 4-layer A3C on Breakout's 4 actions (84x84x4
input: conv 8x8/4 -> 20x20x16, conv 4x4/2 -> 9x9x32, FC 2592 -> 256, policy and value
heads), not read from either implementation.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from tests.workloads.runner import REPO, mxnet_python

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

ACTIONS = 4
PARAMS = (
    (8 * 8 * 4 * 16 + 16)
    + (4 * 4 * 16 * 32 + 32)
    + (9 * 9 * 32 * 256 + 256)
    + (256 * ACTIONS + ACTIONS)
    + (256 + 1)
)


def test_tensorflow_and_pytorch_nets_have_tbds_parameter_count() -> None:
    from workloads.pytorch.a3c import ActorCritic
    from workloads.tensorflow.a3c import actor_critic

    assert sum(p.numel() for p in ActorCritic(ACTIONS).parameters()) == PARAMS
    assert actor_critic(ACTIONS).count_params() == PARAMS


def test_mxnet_net_has_tbds_parameter_count() -> None:
    code = (
        "import mxnet as mx\n"
        "from workloads.mxnet.a3c import ActorCritic\n"
        f"net = ActorCritic({ACTIONS}); net.initialize()\n"
        "logits, value = net(mx.nd.zeros((3, 4, 84, 84)))\n"
        "print(sum(p.data().size for p in net.collect_params().values()))\n"
        "print(*logits.shape, *value.shape)\n"
    )
    out = subprocess.run(
        [mxnet_python(), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    count, shapes = out.stdout.splitlines()[-2:]
    assert int(count) == PARAMS
    assert shapes.split() == ["3", str(ACTIONS), "3"]


def test_frames_are_pytorchs_area_downsampling() -> None:
    from workloads.atari import area_resize

    frame = np.random.default_rng(0).integers(0, 256, (210, 160), dtype=np.uint8)
    want = F.interpolate(
        torch.from_numpy(frame).float()[None, None] / 255.0, size=(84, 84), mode="area"
    )[0, 0].numpy()
    np.testing.assert_allclose(area_resize(frame), want, atol=1e-6)
