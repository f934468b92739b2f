"""Atari Breakout for the A3C workloads of TensorFlow and MXNet, in NumPy only.

The same environment as ``workloads/pytorch/a3c.py``: ``gymnasium.make("ALE/Breakout-v5",
obs_type="grayscale")`` (frame skip 4, sticky actions 0.25), frames area-downsampled to
84x84 (the average over each output pixel's input span, as PyTorch's ``interpolate(mode=
"area")``, i.e. adaptive average pooling, computes it), the last 4 stacked, rewards
clipped to their sign for training and the unclipped game score kept per episode for
the quality metric. Observations are ``[workers, 4, 84, 84]`` float32 in [0, 1].
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

ENV_ID = "ALE/Breakout-v5"
FRAME_PX = 84
STACK = 4
REWARD_WINDOW = 10  # episodes averaged by mean_episode_reward


def mean_episode_reward(finished: list[float]) -> float:
    """Mean of the last :data:`REWARD_WINDOW` finished episodes; NaN before the first."""
    last = finished[-REWARD_WINDOW:]
    return sum(last) / len(last) if last else float("nan")


def make_envs(n: int, seed: int) -> list[Any]:
    """``n`` Breakout environments; exits 1 with one line when ALE is unusable."""
    try:
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)
        envs = [gymnasium.make(ENV_ID, obs_type="grayscale") for _ in range(n)]
    except Exception as e:  # missing package or ROM: say which, no traceback
        print(
            f"workloads: cannot create {ENV_ID} ({type(e).__name__}: {e}); install the "
            "pinned ale-py and gymnasium from requirements.lock",
            file=sys.stderr,
        )
        raise SystemExit(1) from None
    for i, env in enumerate(envs):
        env.action_space.seed(seed + i)
    return envs


def _spans(n_in: int, n_out: int) -> list[tuple[int, int]]:
    """Adaptive pooling spans: output i averages inputs [floor(i*in/out), ceil((i+1)*in/out))."""
    return [(i * n_in // n_out, -(-(i + 1) * n_in // n_out)) for i in range(n_out)]


def area_resize(frame: np.ndarray, px: int = FRAME_PX) -> np.ndarray:
    """``frame`` [H, W] (uint8) averaged down to [px, px] float32 in [0, 1]."""
    f = frame.astype(np.float32) / 255.0
    rows = np.stack([f[a:b].mean(axis=0) for a, b in _spans(f.shape[0], px)])
    return np.stack([rows[:, a:b].mean(axis=1) for a, b in _spans(f.shape[1], px)], axis=1)


class Workers:
    """The workers' environments and their stacked 84x84 observations."""

    def __init__(self, envs: list[Any], seed: int) -> None:
        self.envs = envs
        self.stacks = np.zeros((len(envs), STACK, FRAME_PX, FRAME_PX), np.float32)
        self.returns = [0.0] * len(envs)  # unclipped game score of each running episode
        self.episode_rewards: list[float] = []  # scores of the finished episodes, in order
        for i, env in enumerate(envs):
            obs, _ = env.reset(seed=seed + i)
            self.stacks[i] = area_resize(obs)[None]

    def step(self, actions: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Act in every environment; returns (sign-clipped rewards [n], done flags [n])."""
        rewards = np.zeros(len(self.envs), np.float32)
        dones = np.zeros(len(self.envs), np.float32)
        for i, (env, a) in enumerate(zip(self.envs, actions, strict=True)):
            obs, r, term, trunc, _ = env.step(a)
            rewards[i], dones[i] = float(np.sign(r)), float(term or trunc)
            self.returns[i] += float(r)
            if term or trunc:
                self.episode_rewards.append(self.returns[i])
                self.returns[i] = 0.0
                obs, _ = env.reset()
                self.stacks[i] = area_resize(obs)[None]
            else:
                self.stacks[i] = np.concatenate([self.stacks[i, 1:], area_resize(obs)[None]])
        return rewards, dones
