"""Quality metrics of the TBD tasks, written once for every framework (NumPy and stdlib).

Each workload evaluates its model on a held-out split of its synthetic task (data drawn
from a generator seeded apart from the training one) and reports one of these figures
through :func:`workloads.harness.train`:

* :func:`accuracy` (image classification): fraction of correct top-1 predictions;
* :func:`bleu` (translation): corpus BLEU-4 of Papineni et al. (2002), clipped n-gram
  precisions up to 4-grams, their geometric mean times the brevity penalty, as a
  percentage 0..100 (sacreBLEU's scale), no smoothing;
* :func:`wer` / :func:`cer` (speech): word / character error rate, total Levenshtein
  edits over total reference words / characters (can exceed 1);
* :func:`map50` (detection): mean over classes of the PASCAL VOC all-point interpolated
  average precision at IoU >= 0.5;
* :func:`moment_distance` (WGAN): how far generated samples' per-feature mean and standard
  deviation are from held-out real samples' (0 = the first two moments match);
* episode reward (A3C) is the environment's own return, averaged by the workload.

This module imports NumPy only, so it runs in ``.venv`` and ``.venv-mxnet`` alike.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from workloads.harness import Target

# Each model's held-out quality goal per size, shared by its frameworks (docs/WORKLOADS.md
# states them and which were measured). A size missing here uses the model's "paper" goal.
TARGETS: dict[str, dict[str, Target]] = {
    # 10 / 100 / 1000 classes (chance 0.1 / 0.01 / 0.001)
    "resnet50": {"tiny": Target("accuracy", 0.8, True), "paper": Target("accuracy", 0.9, True)},
    "inception_v3": {
        "tiny": Target("accuracy", 0.8, True),
        "paper": Target("accuracy", 0.9, True),
    },
    "seq2seq": {"tiny": Target("bleu", 50.0, True), "paper": Target("bleu", 90.0, True)},
    "transformer": {"tiny": Target("bleu", 30.0, True), "paper": Target("bleu", 90.0, True)},
    "deepspeech2": {"tiny": Target("cer", 0.5, False), "paper": Target("cer", 0.2, False)},
    "faster_rcnn": {"paper": Target("map50", 0.5, True)},
    # pixels in [-1, 1]; an untrained generator is about 1.0 away at tiny
    "wgan": {"paper": Target("moment_distance", 0.3, False)},
    # mean score of the last 10 finished episodes; a random Breakout policy scores 1-2
    "a3c": {"paper": Target("episode_reward", 10.0, True)},
}


def target(model: str, size: str) -> Target:
    """The quality goal of ``model`` at ``size`` (:data:`TARGETS`)."""
    goals = TARGETS[model]
    return goals.get(size, goals["paper"])


def accuracy(predicted: Sequence[int] | np.ndarray, labels: Sequence[int] | np.ndarray) -> float:
    """Fraction of ``predicted[i] == labels[i]``; both of one length, at least one."""
    p, y = np.asarray(predicted), np.asarray(labels)
    if p.shape != y.shape or p.size == 0:
        raise ValueError(f"accuracy needs equal, non-empty shapes, got {p.shape} and {y.shape}")
    return float(np.mean(p == y))


def _ngrams(tokens: Sequence[object], n: int) -> Counter[tuple[object, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def bleu(
    hypotheses: Sequence[Sequence[object]],
    references: Sequence[Sequence[object]],
    max_n: int = 4,
) -> float:
    """Corpus BLEU (one reference per hypothesis) as a percentage 0..100.

    Counts are summed over the corpus before the precisions are taken, as in the original
    definition and sacreBLEU; a zero precision at any order gives 0.
    """
    if len(hypotheses) != len(references):
        raise ValueError("bleu needs one reference per hypothesis")
    matches, totals = [0] * max_n, [0] * max_n
    hyp_len = ref_len = 0
    for hyp, ref in zip(hypotheses, references, strict=True):
        hyp_len += len(hyp)
        ref_len += len(ref)
        for n in range(1, max_n + 1):
            h, r = _ngrams(hyp, n), _ngrams(ref, n)
            matches[n - 1] += sum(min(c, r[g]) for g, c in h.items())
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    if hyp_len == 0 or any(m == 0 for m in matches):
        return 0.0
    log_p = sum(math.log(m / t) for m, t in zip(matches, totals, strict=True)) / max_n
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return 100.0 * bp * math.exp(log_p)


def greedy_translation_bleu(
    logits: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    src: np.ndarray,
    src_len: np.ndarray,
    tgt: np.ndarray,
    tgt_len: np.ndarray,
    begin: int = 1,
    end: int = 2,
) -> float:
    """Corpus BLEU of greedy decoding, for any framework.

    ``logits(src, src_len, ys) -> [B, T, vocab]`` runs the teacher-forced model on the
    target prefix ``ys`` (int32 ``[B, T]``). Decoding starts at ``begin`` and stops when
    every row has produced ``end`` or after ``src.shape[1] + 1`` tokens; references are
    ``tgt`` rows without begin and end (``tgt_len`` counts both).
    """
    b = src.shape[0]
    ys = np.full((b, 1), begin, np.int32)
    for _ in range(src.shape[1] + 1):
        nxt = np.asarray(logits(src, src_len, ys))[:, -1].argmax(-1).astype(np.int32)
        ys = np.concatenate([ys, nxt[:, None]], axis=1)
        if bool((ys == end).any(axis=1).all()):
            break
    hyps = []
    for row in ys[:, 1:].tolist():
        hyps.append(row[: row.index(end)] if end in row else row)
    refs = [tgt[i, 1 : int(n) - 1].tolist() for i, n in enumerate(tgt_len)]
    return bleu(hyps, refs)


def edit_distance(a: Sequence[object], b: Sequence[object]) -> int:
    """Levenshtein distance (insertions, deletions, substitutions cost 1)."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def wer(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Word error rate: edits between whitespace-split words / reference words."""
    edits = sum(
        edit_distance(h.split(), r.split()) for h, r in zip(hypotheses, references, strict=True)
    )
    words = sum(len(r.split()) for r in references)
    if words == 0:
        raise ValueError("wer needs at least one reference word")
    return edits / words


def cer(hypotheses: Sequence[Sequence[object]], references: Sequence[Sequence[object]]) -> float:
    """Character error rate: edits between the strings (or character-id lists) /
    reference characters."""
    edits = sum(edit_distance(h, r) for h, r in zip(hypotheses, references, strict=True))
    chars = sum(len(r) for r in references)
    if chars == 0:
        raise ValueError("cer needs at least one reference character")
    return edits / chars


def ctc_greedy(best_path: Sequence[int], blank: int) -> list[int]:
    """Collapse repeats then drop blanks (greedy CTC decoding of per-frame argmaxes)."""
    out: list[int] = []
    prev = None
    for k in best_path:
        if k != prev and k != blank:
            out.append(int(k))
        prev = k
    return out


def greedy_ctc_cer(
    logits: np.ndarray,
    out_len: Sequence[int] | np.ndarray,
    labels: np.ndarray,
    label_len: Sequence[int] | np.ndarray,
    blank: int,
    shift: int = 0,
) -> float:
    """CER of greedy CTC decoding of ``logits [B, T, classes]`` (first ``out_len[i]``
    frames) against ``labels[i, :label_len[i]]``; ``shift`` is added to decoded classes
    to give label ids (MXNet's CTC puts the blank last and characters one lower)."""
    best = np.asarray(logits).argmax(-1)
    hyps = [
        [c + shift for c in ctc_greedy(best[i, : int(n)].tolist(), blank)]
        for i, n in enumerate(out_len)
    ]
    refs = [np.asarray(labels)[i, : int(n)].tolist() for i, n in enumerate(label_len)]
    return cer(hyps, refs)


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of boxes ``a [N, 4]`` with ``b [M, 4]`` (x0, y0, x1, y1), ``[N, M]``."""
    a, b = np.asarray(a, float).reshape(-1, 4), np.asarray(b, float).reshape(-1, 4)
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


@dataclass(frozen=True)
class Detections:
    """One image's boxes (x0, y0, x1, y1), labels and, for predictions, scores."""

    boxes: np.ndarray  # [N, 4]
    labels: np.ndarray  # [N] int
    scores: np.ndarray | None = None  # [N], predictions only


def average_precision(recall: np.ndarray, precision: np.ndarray) -> float:
    """VOC all-point interpolated AP: area under the monotone precision envelope."""
    r = np.concatenate([[0.0], recall, [1.0]])
    p = np.concatenate([[0.0], precision, [0.0]])
    for i in range(p.size - 2, -1, -1):
        p[i] = max(p[i], p[i + 1])
    idx = np.nonzero(r[1:] != r[:-1])[0]
    return float(np.sum((r[idx + 1] - r[idx]) * p[idx + 1]))


def map50(predictions: Sequence[Detections], truths: Sequence[Detections]) -> float:
    """Mean AP at IoU 0.5 over the classes that have ground truth (VOC matching: each
    truth box matches at most one prediction, highest score first; later ones are false
    positives). 0 when no class has ground truth."""
    classes = sorted({int(c) for t in truths for c in np.asarray(t.labels).tolist()})
    aps = []
    for c in classes:
        n_truth = 0
        hits: list[tuple[float, bool]] = []
        for pred, truth in zip(predictions, truths, strict=True):
            tb = np.asarray(truth.boxes, float).reshape(-1, 4)[np.asarray(truth.labels) == c]
            n_truth += len(tb)
            pl = np.asarray(pred.labels)
            pb = np.asarray(pred.boxes, float).reshape(-1, 4)[pl == c]
            ps = np.asarray(pred.scores if pred.scores is not None else np.ones(len(pl)))[pl == c]
            used = np.zeros(len(tb), bool)
            overlaps = iou(pb, tb) if len(tb) else np.zeros((len(pb), 0))
            for k in np.argsort(-ps, kind="stable"):
                j = int(np.argmax(overlaps[k])) if len(tb) else -1
                ok = j >= 0 and overlaps[k, j] >= 0.5 and not used[j]
                if ok:
                    used[j] = True
                hits.append((float(ps[k]), bool(ok)))
        hits.sort(key=lambda h: -h[0])
        tp = np.cumsum([h[1] for h in hits], dtype=float)
        fp = np.cumsum([not h[1] for h in hits], dtype=float)
        if not hits:
            aps.append(0.0)
            continue
        aps.append(average_precision(tp / n_truth, tp / np.maximum(tp + fp, 1e-12)))
    return float(np.mean(aps)) if aps else 0.0


def moment_distance(fake: np.ndarray, real: np.ndarray) -> float:
    """RMS over features of (mean difference) plus RMS of (std difference).

    ``fake`` and ``real`` are ``[N, ...]`` samples; features are the flattened trailing
    dimensions (pixels x channels). 0 when both sets have the same per-feature mean and
    standard deviation; in the data's units (pixels in [-1, 1] for the WGAN task).
    """
    f = np.asarray(fake, float).reshape(len(fake), -1)
    r = np.asarray(real, float).reshape(len(real), -1)
    if f.shape[1] != r.shape[1]:
        raise ValueError(f"moment_distance: {f.shape[1]} features vs {r.shape[1]}")
    dm = np.sqrt(np.mean((f.mean(0) - r.mean(0)) ** 2))
    ds = np.sqrt(np.mean((f.std(0) - r.std(0)) ** 2))
    return float(dm + ds)
