"""A3C (Mnih et al. 2016) actor-critic on Atari Breakout, MXNet Gluon.

The same agent as ``workloads/pytorch/a3c.py`` (TBD's 4-layer A3C, channels-first as
there): Conv 16x8x8 stride 4 -> Conv 32x4x4 stride 2 -> FC 256 -> policy logits and
value, on the last 4 grayscale 84x84 frames of ``ALE/Breakout-v5``
(:mod:`workloads.atari`). Loss: policy gradient with n-step advantages + 0.5 value MSE -
0.01 entropy, gamma 0.99; RMSProp (lr 7e-4, decay 0.99, epsilon 0.1), gradients clipped
to global norm 40.

The workers are stepped in lockstep by one process (synchronous A3C, A2C), so each
update is one marked step: ``t_max`` forward passes that choose the actions, then one
forward and backward pass over the whole rollout under ``autograd.record`` (the weights
do not change during a rollout, so these are the values the actions were chosen with).
``--batch-size`` is the number of workers; a step processes workers x t_max frames.
Sizes: tiny = 2 workers, small = 4, paper = 8, t_max 5.
"""

from __future__ import annotations

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from workloads import atari, harness, quality
from workloads.mxnet import _common

MODEL = "a3c"
GAMMA = 0.99
ENTROPY_BETA = 0.01
VALUE_WEIGHT = 0.5
T_MAX = {"tiny": 5, "small": 5, "paper": 5}
BATCH = {"tiny": 2, "small": 4, "paper": 8}


class ActorCritic(gluon.HybridBlock):
    """Frames [B, 4, 84, 84] -> (policy logits [B, actions], value [B])."""

    def __init__(self, actions: int) -> None:
        super().__init__()
        with self.name_scope():
            self.body = gluon.nn.HybridSequential()
            self.body.add(
                gluon.nn.Conv2D(16, 8, strides=4, in_channels=atari.STACK, activation="relu"),
                gluon.nn.Conv2D(32, 4, strides=2, in_channels=16, activation="relu"),
                gluon.nn.Flatten(),
                gluon.nn.Dense(256, in_units=32 * 9 * 9, activation="relu"),
            )
            self.policy = gluon.nn.Dense(actions, in_units=256)
            self.value = gluon.nn.Dense(1, in_units=256)

    def hybrid_forward(self, F, x):  # type: ignore[no-untyped-def]  # noqa: N803 - Gluon's name
        h = self.body(x)
        return self.policy(h), self.value(h).reshape((-1,))


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    t_max = T_MAX[args.size]
    ctx, _ = _common.setup(args)
    envs = atari.make_envs(args.batch_size, args.seed)
    workers = atari.Workers(envs, args.seed)
    net = ActorCritic(int(envs[0].action_space.n))
    net.initialize(mx.init.Xavier(), ctx=ctx)
    trainer = gluon.Trainer(
        net.collect_params(),
        "rmsprop",
        {"learning_rate": 7e-4, "gamma1": 0.99, "epsilon": 0.1, "centered": False},
    )

    def act(obs: mx.nd.NDArray) -> tuple[list[int], np.ndarray]:
        logits, value = net(obs)
        actions = mx.nd.random.multinomial(mx.nd.softmax(logits))
        return actions.asnumpy().astype(int).tolist(), value.asnumpy()

    def step(_: int) -> float:
        obs, acts, rewards, dones = [], [], [], []
        for _ in range(t_max):
            x = mx.nd.array(workers.stacks, ctx=ctx)
            a = act(x)[0]
            r, d = workers.step(a)
            obs.append(x)
            acts.append(a)
            rewards.append(r)
            dones.append(d)
        ret = act(mx.nd.array(workers.stacks, ctx=ctx))[1]
        returns = []
        for r, d in zip(reversed(rewards), reversed(dones), strict=True):
            ret = r + GAMMA * ret * (1 - d)
            returns.append(ret)
        x_all = mx.nd.concat(*obs, dim=0)
        a_all = mx.nd.array(np.concatenate(acts), ctx=ctx)
        ret_all = mx.nd.array(np.concatenate(returns[::-1]), ctx=ctx)
        with autograd.record():
            logits, values = net(x_all)
            logp_all = mx.nd.log_softmax(logits)
            logp = mx.nd.pick(logp_all, a_all, axis=1)
            entropy = -(mx.nd.exp(logp_all) * logp_all).sum(axis=1)
            advantage = ret_all - values
            loss = (
                -(logp * advantage.detach()).mean()
                + VALUE_WEIGHT * (advantage**2).mean()
                - ENTROPY_BETA * entropy.mean()
            )
        loss.backward()
        grads = [p.grad(ctx) for p in net.collect_params().values() if p.grad_req != "null"]
        gluon.utils.clip_global_norm(grads, 40.0)
        trainer.step(1)  # the loss is a mean already
        return float(loss.asscalar())

    try:
        _common.run(
            MODEL,
            args,
            step,
            samples_per_step=args.batch_size * t_max,
            nets=[net],
            trainers=[trainer],
            evaluate=lambda: atari.mean_episode_reward(workers.episode_rewards),
            target=quality.target(MODEL, args.size),
        )
    finally:
        for env in envs:
            env.close()


if __name__ == "__main__":
    main()
