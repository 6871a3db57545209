"""LRGB metrics against hand-computed values and sklearn."""

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, f1_score, roc_auc_score
from sklearn.metrics import mean_absolute_error as sk_mae

from swan_jax.metrics import accuracy, average_precision, macro_f1, mean_absolute_error, roc_auc


def ogb_eval_ap(y_true, y_pred):
    """OGB's / LRGB's `eval_ap`, restated."""
    ap_list = []
    for i in range(y_true.shape[1]):
        if np.sum(y_true[:, i] == 1) > 0 and np.sum(y_true[:, i] == 0) > 0:
            is_labeled = y_true[:, i] == y_true[:, i]
            ap_list.append(average_precision_score(y_true[is_labeled, i],
                                                   y_pred[is_labeled, i]))
    return sum(ap_list) / len(ap_list)


def test_average_precision_by_hand():
    # scores 0.9 (pos), 0.8 (neg), 0.1 (pos): AP = 0.5 * 1 + 0.5 * 2/3
    y = np.array([[1.0], [0.0], [1.0]])
    s = np.array([[0.9], [0.8], [0.1]])
    assert average_precision(y, s) == pytest.approx(5 / 6)


def test_average_precision_matches_official_with_nans_and_empty_classes():
    rng = np.random.default_rng(0)
    y = (rng.random((200, 10)) < 0.3).astype(np.float64)
    y[:, 3] = 0.0  # no positives: left out of the mean
    y[:, 7] = 1.0  # no negatives: left out
    y[rng.random((200, 10)) < 0.1] = np.nan  # missing labels
    s = rng.normal(size=(200, 10))
    got = average_precision(y, s)
    assert got == pytest.approx(ogb_eval_ap(y, s), abs=1e-12)
    kept = [c for c in range(10) if c not in (3, 7)]
    manual = np.mean([average_precision_score(y[~np.isnan(y[:, c]), c],
                                              s[~np.isnan(y[:, c]), c]) for c in kept])
    assert got == pytest.approx(manual, abs=1e-12)
    # a wrong result (averaging over all 10 classes) would differ
    assert got != pytest.approx(manual * 8 / 10)


def test_average_precision_mask_and_undefined():
    rng = np.random.default_rng(1)
    y = (rng.random((50, 4)) < 0.5).astype(float)
    s = rng.normal(size=(50, 4))
    mask = np.arange(50) < 40
    y_pad, s_pad = y.copy(), s.copy()
    y_pad[40:], s_pad[40:] = 1.0, -100.0  # padding that would wreck AP if counted
    assert average_precision(y_pad, s_pad, mask) == pytest.approx(average_precision(y[:40],
                                                                                    s[:40]))
    assert average_precision(y_pad, s_pad) != pytest.approx(average_precision(y_pad, s_pad, mask))
    with pytest.raises(ValueError, match="no class has both"):
        average_precision(np.zeros((5, 3)), s[:5, :3])
    with pytest.raises(ValueError, match="mask"):
        average_precision(y, s, np.ones(49, bool))


def test_mean_absolute_error():
    y = np.array([[1.0, 2.0], [3.0, 4.0]])
    p = np.array([[1.5, 2.0], [2.0, 6.0]])
    assert mean_absolute_error(y, p) == pytest.approx((0.5 + 0 + 1 + 2) / 4)
    rng = np.random.default_rng(2)
    y, p = rng.normal(size=(30, 11)), rng.normal(size=(30, 11))
    assert mean_absolute_error(y, p) == pytest.approx(sk_mae(y, p))
    mask = np.arange(30) % 3 != 0
    assert mean_absolute_error(y, p, mask) == pytest.approx(sk_mae(y[mask], p[mask]))
    assert mean_absolute_error(y, p, mask) != pytest.approx(sk_mae(y, p))


def test_macro_f1():
    y = np.array([0, 0, 1, 1, 2])
    pred = np.array([0, 1, 1, 1, 0])
    # class 0: P=1/2 R=1/2 F=1/2; class 1: P=2/3 R=1 F=0.8; class 2: F=0
    assert macro_f1(y, pred) == pytest.approx((0.5 + 0.8 + 0.0) / 3)
    assert macro_f1(y[:, None], pred) == pytest.approx((0.5 + 0.8 + 0.0) / 3)
    rng = np.random.default_rng(3)
    y = rng.integers(0, 21, size=500)
    logits = rng.normal(size=(500, 21))
    logits[np.arange(500), y] += rng.random(500) * 3  # better than chance
    assert macro_f1(y, logits) == pytest.approx(
        f1_score(y, logits.argmax(1), average="macro", zero_division=0))
    mask = np.arange(500) < 400
    assert macro_f1(y, logits, mask) == pytest.approx(
        f1_score(y[:400], logits[:400].argmax(1), average="macro", zero_division=0))
    assert macro_f1(y, logits, mask) != pytest.approx(macro_f1(y, logits))


def test_macro_f1_leaves_out_lrgb_ignore_label():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 21, size=300)
    logits = rng.normal(size=(300, 21))
    logits[np.arange(300), y] += 2.0
    y_ign = y.copy()
    ignored = rng.random(300) < 0.2
    y_ign[ignored] = 255
    want = f1_score(y[~ignored], logits[~ignored].argmax(1), average="macro", zero_division=0)
    assert macro_f1(y_ign, logits) == pytest.approx(want)
    assert macro_f1(y_ign[:, None], logits) == pytest.approx(want)
    # counting 255 as a class (which no prediction hits) would lower the score
    assert macro_f1(y_ign, logits, ignore_label=None) < want - 0.01
    mask = np.arange(300) < 250
    keep = mask & ~ignored
    assert macro_f1(y_ign, logits, mask) == pytest.approx(
        f1_score(y[keep], logits[keep].argmax(1), average="macro", zero_division=0))
    with pytest.raises(ValueError, match="no rows .*without label 255"):
        macro_f1(np.full(4, 255), logits[:4])


def test_roc_auc_by_hand_and_as_the_heterophily_benchmark():
    # pairs (pos, neg): (0.35 > 0.1), (0.35 < 0.4), (0.8 > 0.1), (0.8 > 0.4): 3 of 4
    assert roc_auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8])) == 0.75
    rng = np.random.default_rng(5)
    y = (rng.random(400) < 0.25).astype(np.int64)
    logits = rng.normal(size=(400, 1)) + y[:, None]
    assert roc_auc(y, logits) == pytest.approx(roc_auc_score(y, logits[:, 0]))
    split = rng.random(400) < 0.5
    assert roc_auc(y[:, None].astype(np.float32), logits, split) == pytest.approx(
        roc_auc_score(y[split], logits[split, 0]))
    assert roc_auc(y, logits, split) != pytest.approx(roc_auc(y, logits))
    y_nan = y.astype(np.float64)
    y_nan[~split] = np.nan  # unlabelled rows (outside a split) are left out
    assert roc_auc(y_nan, logits) == pytest.approx(roc_auc(y, logits, split))


def test_roc_auc_refuses_what_it_cannot_score():
    with pytest.raises(ValueError, match="undefined: 3 labelled row.*3 positive"):
        roc_auc(np.ones(3), np.arange(3.0))
    with pytest.raises(ValueError, match="1 non-finite prediction.*row 2"):
        roc_auc(np.array([0, 1, 0, 1]), np.array([0.1, 0.2, np.inf, 0.3]))
    with pytest.raises(ValueError, match="labels must be 0/1"):
        roc_auc(np.array([0, 1, 2]), np.arange(3.0))
    with pytest.raises(ValueError, match="binary"):
        roc_auc(np.array([0, 1, 0]), np.ones((3, 2)))


def test_accuracy():
    y = np.array([0, 2, 1, 1])
    logits = np.array([[3.0, 0, 0], [0, 0, 1], [0, 0, 1], [0, 5, 0]])
    assert accuracy(y, logits) == 0.75
    assert accuracy(y[:, None], logits.argmax(1)) == 0.75
    assert accuracy(y, logits, np.array([True, True, False, True])) == 1.0
    with pytest.raises(ValueError, match="non-finite"):
        accuracy(y, np.full((4, 3), np.nan))
