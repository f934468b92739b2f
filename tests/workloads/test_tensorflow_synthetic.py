"""The NumPy tasks the TensorFlow and MXNet workloads train on are well formed and learnable.

Each property is checked against its definition (written out here), not the generator's
own helpers.
"""

from __future__ import annotations

import numpy as np

from workloads.tensorflow import synthetic


def test_translation_target_is_the_reversed_source_shifted_by_one() -> None:
    rng = np.random.default_rng(3)
    vocab, words = 32, 29
    src, src_len, tgt, tgt_len = synthetic.translation_batch(16, 4, 8, vocab, rng)
    assert src.shape == (16, 8) and tgt.shape == (16, 10)
    assert (tgt_len == src_len + 2).all()
    for s, n, t in zip(src, src_len, tgt, strict=True):
        toks = [int(x) - 3 for x in s[:n]]
        assert 4 <= n <= 8 and all(0 <= x < words for x in toks)
        assert (s[n:] == 0).all()
        assert t[0] == 1 and t[n + 1] == 2 and (t[n + 2 :] == 0).all()
        assert [int(x) for x in t[1 : n + 1]] == [(x + 1) % words + 3 for x in reversed(toks)]


def test_images_carry_their_class_template() -> None:
    rng = np.random.default_rng(0)
    templates = synthetic.class_templates(5, 3, 16, rng)
    assert templates.shape == (5, 16, 16, 3) and templates.dtype == np.float32
    assert templates.min() >= -1 and templates.max() <= 1
    x, y = synthetic.image_batch(templates, 64, rng, noise=0.5)
    assert x.shape == (64, 16, 16, 3) and y.dtype == np.int32
    # Nearest template (squared distance) recovers the label: the task is learnable.
    dist = ((x[:, None] - templates[None]) ** 2).sum(axis=(2, 3, 4))
    assert (dist.argmin(axis=1) == y).mean() > 0.9


def test_speech_frames_hold_each_character_4_to_8_frames() -> None:
    rng = np.random.default_rng(1)
    templates = synthetic.char_templates(32, rng)
    spec, frames, labels, label_len = synthetic.speech_batch(templates, 8, 3, 5, rng)
    assert spec.shape == (8, int(frames.max()), 32)
    for i in range(8):
        n = int(label_len[i])
        assert 3 <= n <= 5 and (labels[i, n:] == 0).all()
        assert ((labels[i, :n] >= 1) & (labels[i, :n] < synthetic.CHARS)).all()
        assert 4 * n <= frames[i] <= 8 * n
        # Every frame is closest to the template of a character of this utterance.
        f = spec[i, : frames[i]]
        nearest = ((f[:, None] - templates[None]) ** 2).sum(-1).argmin(axis=1)
        assert set(nearest.tolist()) <= set(labels[i, :n].tolist())


def test_blobs_are_bright_on_dark() -> None:
    img = synthetic.blob_images(4, 16, 3, np.random.default_rng(2))
    assert img.shape == (4, 16, 16, 3) and img.min() >= -1 and img.max() <= 1
    for im in img:
        assert im.max() > 0  # at least one blob (peak 0.5..1 -> >= 0 after scaling)
        assert np.median(im) < -0.5  # mostly background


def test_same_seed_same_data() -> None:
    a = synthetic.translation_batch(4, 4, 8, 32, np.random.default_rng(7))
    b = synthetic.translation_batch(4, 4, 8, 32, np.random.default_rng(7))
    assert all((x == y).all() for x, y in zip(a, b, strict=True))
