"""A3C (Mnih et al. 2016) actor-critic on Atari Breakout (ale-py's bundled ROM).

Environment: ``gymnasium.make("ALE/Breakout-v5")`` (frame skip 4, sticky actions 0.25),
grayscale frames area-downsampled to 84x84, the last 4 stacked. Network (TBD's 4-layer
A3C): Conv 16x8x8 stride 4 -> Conv 32x4x4 stride 2 -> FC 256 -> policy logits and value.
Loss: policy gradient with n-step advantages + 0.5 value MSE - 0.01 entropy, gamma 0.99;
RMSprop (lr 7e-4, alpha 0.99, eps 0.1), gradient norm clipped at 40.

The workers are stepped in lockstep by one process (the synchronous form of A3C, also
known as A2C), so each update is one marked step. ``--batch-size`` is the number of
workers; a step processes workers x t_max frames, which is what the steps records count
as samples. Sizes: tiny = 2 workers, t_max 5; small = 4 workers, t_max 5; paper = 8
workers (TBD's TensorFlow A3C), t_max 5.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from workloads import harness, quality, specs
from workloads.pytorch import _common

MODEL = "a3c"
ENV_ID = "ALE/Breakout-v5"
FRAME_PX = 84
STACK = 4
GAMMA = 0.99
ENTROPY_BETA = 0.01
VALUE_WEIGHT = 0.5


Config = specs.A3C
CONFIGS = specs.A3C_SPEC.configs
BATCH = specs.A3C_SPEC.batch


class ActorCritic(nn.Module):
    def __init__(self, actions: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(STACK, 16, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(16, 32, 4, stride=2),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(32 * 9 * 9, 256),
            nn.ReLU(),
        )
        self.policy = nn.Linear(256, actions)
        self.value = nn.Linear(256, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(x)
        return self.policy(h), self.value(h).squeeze(-1)


REWARD_WINDOW = 10


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


class Workers:
    """The workers' environments and their stacked 84x84 observations."""

    def __init__(self, envs: list[Any], seed: int) -> None:
        self.envs = envs
        self.stacks = torch.zeros(len(envs), STACK, FRAME_PX, FRAME_PX)
        self.returns = [0.0] * len(envs)  # unclipped game score of each running episode
        self.episode_rewards: list[float] = []  # scores of the finished episodes, in order
        for i, env in enumerate(envs):
            obs, _ = env.reset(seed=seed + i)
            self.stacks[i] = self._frame(obs).expand(STACK, -1, -1)

    @staticmethod
    def _frame(obs: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(obs).float()[None, None] / 255.0
        return F.interpolate(t, size=(FRAME_PX, FRAME_PX), mode="area")[0, 0]

    def step(self, actions: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Act in every environment; returns (rewards [n], done flags [n])."""
        rewards, dones = torch.zeros(len(self.envs)), torch.zeros(len(self.envs))
        for i, (env, a) in enumerate(zip(self.envs, actions, strict=True)):
            obs, r, term, trunc, _ = env.step(a)
            rewards[i], dones[i] = float(np.sign(r)), float(term or trunc)
            self.returns[i] += float(r)
            if term or trunc:
                self.episode_rewards.append(self.returns[i])
                self.returns[i] = 0.0
                obs, _ = env.reset()
                self.stacks[i] = self._frame(obs).expand(STACK, -1, -1)
            else:
                self.stacks[i] = torch.cat([self.stacks[i, 1:], self._frame(obs)[None]])
        return rewards, dones


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, _ = _common.setup(args)
    envs = make_envs(args.batch_size, args.seed)
    workers = Workers(envs, args.seed)
    net = ActorCritic(int(envs[0].action_space.n)).to(device)
    opt = torch.optim.RMSprop(net.parameters(), lr=7e-4, alpha=0.99, eps=0.1)

    def step(_: int) -> float:
        logps, values, entropies, rewards, dones = [], [], [], [], []
        for _ in range(cfg.t_max):
            logits, value = net(workers.stacks.to(device, copy=True))
            dist = torch.distributions.Categorical(logits=logits)
            action = dist.sample()
            r, d = workers.step(action.tolist())
            logps.append(dist.log_prob(action))
            values.append(value)
            entropies.append(dist.entropy())
            rewards.append(r.to(device))
            dones.append(d.to(device))
        with torch.no_grad():
            ret = net(workers.stacks.to(device, copy=True))[1]
        returns = []
        for r, d in zip(reversed(rewards), reversed(dones), strict=True):
            ret = r + GAMMA * ret * (1 - d)
            returns.append(ret)
        returns_t = torch.stack(returns[::-1])
        values_t, logps_t = torch.stack(values), torch.stack(logps)
        advantage = returns_t - values_t
        loss = (
            -(logps_t * advantage.detach()).mean()
            + VALUE_WEIGHT * advantage.pow(2).mean()
            - ENTROPY_BETA * torch.stack(entropies).mean()
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 40.0)
        opt.step()
        return loss.item()

    try:
        _common.run(
            MODEL,
            args,
            device,
            step,
            samples_per_step=args.batch_size * cfg.t_max,
            evaluate=lambda: mean_episode_reward(workers.episode_rewards),
            target=quality.target(MODEL, args.size),
        )
    finally:
        for env in envs:
            env.close()


if __name__ == "__main__":
    main()
