"""Synthetic, learnable training data made with NumPy from a seeded generator.

NumPy only (no framework import), so the TensorFlow workloads and the MXNet ones (in
``.venv-mxnet``, NumPy 1.23) share one definition of every task. Nothing is read or
downloaded. Images are channels-last ``[B, H, W, C]`` float32 in about [-1, 1]; callers
transpose for channels-first frameworks.

Tasks (the same ones the PyTorch workloads use):

* images: one smooth random template per class plus Gaussian noise;
* translation: target = source reversed, each token shifted by one (ids 0 pad, 1 begin,
  2 end, 3.. words);
* speech: each character has a fixed spectral template, held for 4-8 frames, plus noise;
* blobs: one to three Gaussian blobs on a dark background (WGAN's real images).
"""

from __future__ import annotations

import numpy as np

PAD, BOS, EOS = 0, 1, 2
CHARS = 29  # CTC blank (0), space, apostrophe, a-z
HELD_OUT = 64  # held-out samples per evaluation (a fixed set, drawn once)
HELD_OUT_IMAGES_WGAN = 256  # generated vs held-out real images for the WGAN moments


def held_out_rng(seed: int) -> np.random.Generator:
    """The held-out split's generator, seeded apart from the training data's (seed + 1)."""
    return np.random.default_rng(seed + 1_000_003)


def batch_rng(base: int, index: int) -> np.random.Generator:
    """The generator of training batch ``index`` (seed ``base + index``): each batch has its
    own seed, so the data is the same whichever input-pipeline worker builds it."""
    return np.random.default_rng(base + index)


def batch_base(rng: np.random.Generator) -> int:
    """The first training batch's seed, drawn from the run's data generator."""
    return int(rng.integers(0, 2**62))


def _interp_matrix(size: int, coarse: int) -> np.ndarray:
    """``[size, coarse]`` bilinear (align_corners=False) upsampling weights."""
    pos = (np.arange(size) + 0.5) * coarse / size - 0.5
    pos = np.clip(pos, 0, coarse - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, coarse - 1)
    frac = pos - lo
    w = np.zeros((size, coarse))
    w[np.arange(size), lo] += 1 - frac
    w[np.arange(size), hi] += frac
    return w


def class_templates(
    n_classes: int, channels: int, size: int, rng: np.random.Generator
) -> np.ndarray:
    """One smooth image per class, ``[n_classes, size, size, channels]``, in [-1, 1]."""
    coarse = rng.uniform(-1, 1, (n_classes, channels, 4, 4))
    w = _interp_matrix(size, 4)
    up = np.einsum("hi,ncij,wj->nhwc", w, coarse, w)
    return up.astype(np.float32)


def image_batch(
    templates: np.ndarray, batch: int, rng: np.random.Generator, noise: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """(images ``[B, H, W, C]`` float32, labels ``[B]`` int32): template + noise."""
    labels = rng.integers(0, templates.shape[0], batch)
    x = templates[labels] + noise * rng.standard_normal((batch, *templates.shape[1:]))
    return x.astype(np.float32), labels.astype(np.int32)


def translation_batch(
    batch: int, min_len: int, max_len: int, vocab: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(src ``[B, max_len]``, src_len ``[B]``, tgt ``[B, max_len + 2]``, tgt_len ``[B]``).

    All int32. tgt starts with BOS and ends with EOS; both are padded with PAD.
    """
    words = vocab - 3
    lens = rng.integers(min_len, max_len + 1, batch)
    src = np.zeros((batch, max_len), np.int32)
    tgt = np.zeros((batch, max_len + 2), np.int32)
    for i, n in enumerate(lens):
        toks = rng.integers(0, words, n)
        src[i, :n] = toks + 3
        tgt[i, 0] = BOS
        tgt[i, 1 : n + 1] = (toks[::-1] + 1) % words + 3
        tgt[i, n + 1] = EOS
    return src, lens.astype(np.int32), tgt, (lens + 2).astype(np.int32)


def char_templates(freq_bins: int, rng: np.random.Generator) -> np.ndarray:
    """``[CHARS, freq_bins]`` spectral template per character (row 0, blank, unused)."""
    return rng.uniform(0, 1, (CHARS, freq_bins)).astype(np.float32)


def speech_batch(
    templates: np.ndarray, batch: int, min_chars: int, max_chars: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(spectrograms ``[B, T, F]`` float32, frames ``[B]``, labels ``[B, L]``, label_len ``[B]``).

    Labels are characters 1..28 padded with 0; each character is held for 4-8 frames.
    """
    n_chars = rng.integers(min_chars, max_chars + 1, batch)
    labels = np.zeros((batch, max_chars), np.int32)
    holds = []
    for i, n in enumerate(n_chars):
        labels[i, :n] = rng.integers(1, CHARS, n)
        holds.append(rng.integers(4, 9, n))
    frames = np.array([h.sum() for h in holds], np.int32)
    spec = np.zeros((batch, int(frames.max()), templates.shape[1]), np.float32)
    for i, (n, h) in enumerate(zip(n_chars, holds, strict=True)):
        spec[i, : frames[i]] = np.repeat(templates[labels[i, :n]], h, axis=0)
    spec += 0.1 * rng.standard_normal(spec.shape).astype(np.float32)
    return spec, frames, labels, n_chars.astype(np.int32)


def blob_images(batch: int, px: int, channels: int, rng: np.random.Generator) -> np.ndarray:
    """``[B, px, px, channels]`` float32 in [-1, 1]: one to three bright Gaussian blobs."""
    yy, xx = np.mgrid[0:px, 0:px].astype(np.float32) / px
    out = np.zeros((batch, px, px, channels), np.float32)
    for i in range(batch):
        for _ in range(int(rng.integers(1, 4))):
            cy, cx = rng.uniform(0.2, 0.8, 2)
            s = rng.uniform(0.05, 0.15)
            blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
            out[i] += blob[..., None] * rng.uniform(0.5, 1.0, channels).astype(np.float32)
    return (np.clip(out, 0, 1) * 2 - 1).astype(np.float32)
