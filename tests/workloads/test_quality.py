"""The quality metrics on cases whose answers are worked out by hand in each test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workloads import quality
from workloads.harness import Target


def test_accuracy_counts_matches() -> None:
    assert quality.accuracy([1, 2, 3, 4], [1, 0, 3, 0]) == 0.5
    with pytest.raises(ValueError):
        quality.accuracy([], [])


def test_bleu_of_a_known_pair() -> None:
    # hyp a b c d e f vs ref a b c d e g: n-gram precisions 5/6, 4/5, 3/4, 2/3, equal
    # lengths (no brevity penalty): BLEU = (5/6 * 4/5 * 3/4 * 2/3) ** (1/4) = (1/3) ** 0.25
    got = quality.bleu([list("abcdef")], [list("abcdeg")])
    assert got == pytest.approx(100 * (1 / 3) ** 0.25)


def test_bleu_brevity_penalty_and_zero_order() -> None:
    # every n-gram of the 5-token hypothesis is in the 7-token reference: BP = e^(1 - 7/5)
    assert quality.bleu([list("abcde")], [list("abcdefg")]) == pytest.approx(
        100 * math.exp(1 - 7 / 5)
    )
    # no matching 4-gram: 0, as unsmoothed corpus BLEU defines it
    the_cat = ["the", "cat", "sat", "on", "the", "mat"]
    assert quality.bleu([the_cat], [["the", "cat", "is", "on", "the", "mat"]]) == 0.0
    assert quality.bleu([the_cat], [the_cat]) == pytest.approx(100.0)


def test_bleu_sums_counts_over_the_corpus() -> None:
    # two pairs: 1-grams 4/4 + 4/4 = 8/8, 2-grams 3/3 + 1/3 = 4/6, 3-grams 2/2 + 0/2 = 2/4,
    # 4-grams 1/1 + 0/1 = 1/2; lengths 8 vs 8
    got = quality.bleu([list("abcd"), list("wxzy")], [list("abcd"), list("wxyz")])
    assert got == pytest.approx(100 * (8 / 8 * 4 / 6 * 2 / 4 * 1 / 2) ** 0.25)


def test_wer_and_cer_of_known_edits() -> None:
    # one substitution (sat -> sit) and one deletion (the) over 6 reference words
    assert quality.wer(["the cat sit on mat"], ["the cat sat on the mat"]) == pytest.approx(2 / 6)
    # kitten -> sitting: 3 edits over the 7 characters of the reference
    assert quality.cer(["kitten"], ["sitting"]) == pytest.approx(3 / 7)
    assert quality.cer(["abc", "x"], ["abc", "y"]) == pytest.approx(1 / 4)


def test_ctc_greedy_collapses_repeats_then_drops_blanks() -> None:
    assert quality.ctc_greedy([0, 3, 3, 0, 3, 5, 5, 0], blank=0) == [3, 3, 5]


def test_iou_of_known_boxes() -> None:
    got = quality.iou(np.array([[0, 0, 2, 2]]), np.array([[1, 1, 3, 3], [0, 0, 2, 2]]))
    np.testing.assert_allclose(got, [[1 / 7, 1.0]])


def test_map50_of_known_boxes() -> None:
    d = quality.Detections
    truth = [d(np.array([[0, 0, 10, 10], [20, 20, 30, 30], [0, 20, 10, 30]]), np.array([1, 1, 2]))]
    pred = [
        d(
            np.array([[0, 0, 10, 10], [50, 50, 60, 60], [20, 20, 30, 31], [0, 0, 10, 10]]),
            np.array([1, 1, 1, 1]),
            np.array([0.9, 0.8, 0.7, 0.6]),
        )
    ]
    # class 1, by score: TP, FP, TP (IoU 100/110), FP (duplicate of the first truth):
    # recall .5 .5 1 1, precision 1 .5 2/3 .5 -> AP = .5 * 1 + .5 * 2/3; class 2 has no
    # detection: AP 0. mAP = (5/6 + 0) / 2.
    assert quality.map50(pred, truth) == pytest.approx((0.5 + 0.5 * 2 / 3) / 2)
    # a box below IoU 0.5 (25/175) is a miss
    miss = [d(np.array([[5, 5, 15, 15]]), np.array([1]), np.array([1.0]))]
    assert quality.map50(miss, [d(np.array([[0, 0, 10, 10]]), np.array([1]))]) == 0.0


def test_moment_distance() -> None:
    real = np.array([[0.0, 1.0], [2.0, 3.0]])  # means 1, 2; stds 1, 1
    assert quality.moment_distance(real, real) == 0.0
    fake = np.array([[1.0, 2.0], [1.0, 2.0]])  # means 1, 2; stds 0, 0
    assert quality.moment_distance(fake, real) == pytest.approx(1.0)
    shifted = real + 0.5  # means off by 0.5, stds equal
    assert quality.moment_distance(shifted, real) == pytest.approx(0.5)


def test_target_direction() -> None:
    assert Target("accuracy", 0.9, True).reached(0.95)
    assert not Target("accuracy", 0.9, True).reached(float("nan"))
    assert Target("cer", 0.2, False).reached(0.1)
    assert not Target("cer", 0.2, False).reached(0.3)


def _one_hot(ids: list[list[int]], classes: int) -> np.ndarray:
    return np.eye(classes)[np.array(ids)]


def test_greedy_ctc_cer_decodes_paths() -> None:
    # row 0: path 3 3 0 4 -> [3, 4] vs reference [3, 4]: 0 edits;
    # row 1 (3 frames counted): path 0 5 5 -> [5] vs [5, 6]: 1 edit. CER = 1 / 4
    logits = _one_hot([[3, 3, 0, 4], [0, 5, 5, 6]], 8)
    labels = np.array([[3, 4], [5, 6]])
    assert quality.greedy_ctc_cer(logits, [4, 3], labels, [2, 2], blank=0) == 0.25
    # MXNet's layout: blank last (7), classes one below the label ids
    mx_logits = _one_hot([[2, 7, 3, 3]], 8)
    assert quality.greedy_ctc_cer(mx_logits, [4], np.array([[3, 4]]), [2], blank=7, shift=1) == 0


def test_greedy_translation_bleu_feeds_back_its_own_tokens() -> None:
    # a "model" that copies the source one position late: after begin it emits src[t],
    # then end (2); the references are the sources, so BLEU is 100
    src = np.array([[5, 6, 7, 8], [9, 10, 11, 12]], np.int32)

    def logits(s: np.ndarray, _sl: np.ndarray, ys: np.ndarray) -> np.ndarray:
        t = ys.shape[1]
        nxt = s[:, t - 1] if t <= s.shape[1] else np.full(len(s), 2)
        out = np.zeros((len(s), t, 16))
        out[np.arange(len(s)), -1, nxt] = 1
        return out

    tgt = np.concatenate([np.ones((2, 1), np.int32), src, np.full((2, 1), 2, np.int32)], axis=1)
    lens = np.array([6, 6])
    assert quality.greedy_translation_bleu(logits, src, np.array([4, 4]), tgt, lens) == 100.0
    # references one word longer than what is decoded: the brevity penalty applies
    tgt2 = np.concatenate([tgt[:, :-1], np.full((2, 1), 13), tgt[:, -1:]], axis=1)
    got = quality.greedy_translation_bleu(logits, src, np.array([4, 4]), tgt2, np.array([7, 7]))
    assert got == pytest.approx(100 * math.exp(1 - 10 / 8))
