"""A3C (Mnih et al. 2016) actor-critic on Atari Breakout, TensorFlow/Keras.

The same agent as ``workloads/pytorch/a3c.py`` (TBD's 4-layer A3C), in channels-last
Keras: Conv 16x8x8 stride 4 -> Conv 32x4x4 stride 2 -> FC 256 -> policy logits and
value, on the last 4 grayscale 84x84 frames of ``ALE/Breakout-v5``
(:mod:`workloads.atari`). Loss: policy gradient with n-step advantages + 0.5 value MSE -
0.01 entropy, gamma 0.99; RMSprop (lr 7e-4, rho 0.99, epsilon 0.1), gradients clipped to
global norm 40.

The workers are stepped in lockstep by one process (synchronous A3C, A2C), so each
update is one marked step: ``t_max`` forward passes that choose the actions, then one
``tf.function`` that recomputes the rollout's logits and values under the tape (the
weights do not change during a rollout, so these are the values the actions were chosen
with) and applies the update. ``--batch-size`` is the number of workers; a step
processes workers x t_max frames. Sizes: tiny = 2 workers, small = 4, paper = 8, t_max 5.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from workloads import atari, harness, quality
from workloads.tensorflow import _common

MODEL = "a3c"
GAMMA = 0.99
ENTROPY_BETA = 0.01
VALUE_WEIGHT = 0.5
T_MAX = {"tiny": 5, "small": 5, "paper": 5}
BATCH = {"tiny": 2, "small": 4, "paper": 8}


def actor_critic(actions: int) -> keras.Model:
    """Frames [B, 84, 84, 4] -> (policy logits [B, actions], value [B])."""
    x_in = keras.Input((atari.FRAME_PX, atari.FRAME_PX, atari.STACK))
    x = layers.Conv2D(16, 8, strides=4, activation="relu")(x_in)
    x = layers.Conv2D(32, 4, strides=2, activation="relu")(x)
    h = layers.Dense(256, activation="relu")(layers.Flatten()(x))
    value = layers.Reshape(())(layers.Dense(1)(h))
    return keras.Model(x_in, [layers.Dense(actions)(h), value], name="a3c")


def channels_last(stacks: np.ndarray) -> tf.Tensor:
    """Workers' [N, 4, 84, 84] stacks as the network's [N, 84, 84, 4] input."""
    return tf.constant(np.transpose(stacks, (0, 2, 3, 1)))


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    t_max = T_MAX[args.size]
    device, _ = _common.setup(args)
    envs = atari.make_envs(args.batch_size, args.seed)
    workers = atari.Workers(envs, args.seed)
    n_actions = int(envs[0].action_space.n)
    with tf.device(device):
        net = actor_critic(n_actions)
        opt = keras.optimizers.RMSprop(learning_rate=7e-4, rho=0.99, epsilon=0.1)
        _common.build_optimizer(opt, net.trainable_variables)

        @tf.function
        def act(obs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            logits, value = net(obs, training=False)
            return tf.random.categorical(logits, 1)[:, 0], value

        @tf.function
        def update(obs: tf.Tensor, actions: tf.Tensor, returns: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits, values = net(obs, training=True)
                logp_all = tf.nn.log_softmax(logits)
                logp = tf.gather(logp_all, actions, batch_dims=1)
                entropy = -tf.reduce_sum(tf.exp(logp_all) * logp_all, axis=-1)
                advantage = returns - values
                loss = (
                    -tf.reduce_mean(logp * tf.stop_gradient(advantage))
                    + VALUE_WEIGHT * tf.reduce_mean(tf.square(advantage))
                    - ENTROPY_BETA * tf.reduce_mean(entropy)
                )
            grads, _ = tf.clip_by_global_norm(tape.gradient(loss, net.trainable_variables), 40.0)
            opt.apply_gradients(zip(grads, net.trainable_variables, strict=True))
            return loss

        def step(_: int) -> tf.Tensor:
            obs, acts, rewards, dones = [], [], [], []
            for _ in range(t_max):
                x = channels_last(workers.stacks)
                a, _ = act(x)
                r, d = workers.step(a.numpy().tolist())
                obs.append(x)
                acts.append(a)
                rewards.append(r)
                dones.append(d)
            ret = act(channels_last(workers.stacks))[1].numpy()
            returns = []
            for r, d in zip(reversed(rewards), reversed(dones), strict=True):
                ret = r + GAMMA * ret * (1 - d)
                returns.append(ret)
            return update(
                tf.concat(obs, 0),
                tf.concat(acts, 0),
                tf.constant(np.concatenate(returns[::-1]).astype(np.float32)),
            )

        try:
            _common.run(
                MODEL,
                args,
                step,
                samples_per_step=args.batch_size * t_max,
                evaluate=lambda: atari.mean_episode_reward(workers.episode_rewards),
                target=quality.target(MODEL, args.size),
            )
        finally:
            for env in envs:
                env.close()


if __name__ == "__main__":
    main()
