"""The official LRGB evaluation metrics, on NumPy arrays (host side, after an epoch).

* `average_precision` (Peptides-func): OGB's / LRGB's `eval_ap` -- per class with at
  least one positive and one negative label (NaN = missing, ignored), sklearn's
  `average_precision_score`, then the unweighted mean over those classes.
* `mean_absolute_error` (Peptides-struct): mean |y - y_hat| over all targets of all
  graphs (sklearn's `mean_absolute_error` with uniform averaging over targets).
* `macro_f1` (PascalVOC-SP): sklearn `f1_score(average="macro", zero_division=0)` of
  argmax predictions, as LRGB's `classification_multi` logger, over the nodes whose label
  is not LRGB's "ignore" label 255 (see `macro_f1`).
* `roc_auc` (Tolokers, Questions): the heterophily benchmark's (Platonov et al., 2023)
  `roc_auc_score(y_true=labels[idx], y_score=logits[idx])` of the single logit.
* `accuracy` (ogbn-arxiv; the heterophily benchmark's multi-class sets): mean of
  `argmax(logits) == label`, as OGB's `Evaluator` and that benchmark.

Every metric takes an optional boolean `mask` over rows (graphs or nodes) to drop
padding rows of a fixed-size batch, or to pick a split's nodes.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import average_precision_score, f1_score, roc_auc_score

IGNORE_LABEL = 255  # LRGB's PascalVOC-SP "ignore" label


def _rows(mask, *arrays):
    arrays = [np.asarray(a) for a in arrays]
    n = arrays[0].shape[0]
    for a in arrays[1:]:
        if a.shape[0] != n:
            raise ValueError(f"row counts differ: {[x.shape for x in arrays]}")
    if mask is None:
        return arrays
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != (n,):
        raise ValueError(f"mask must be boolean of shape ({n},), got {mask.dtype} {mask.shape}")
    return [a[mask] for a in arrays]


def average_precision(y_true, y_score, mask=None) -> float:
    """Mean over classes of average precision, as LRGB's (OGB's) `eval_ap`.

    Args:
      y_true: `[G, C]` labels 0/1, NaN where missing.
      y_score: `[G, C]` scores (logits or probabilities: AP only uses their order).
      mask: optional `[G]` bool, False for padding rows.

    Classes without both a positive and a negative (non-NaN) label are left out of the
    mean. Raises ValueError when no class qualifies (the official code raises too).
    """
    y_true, y_score = _rows(mask, y_true, y_score)
    y_true = y_true.astype(np.float64)
    if y_true.ndim == 1:
        y_true, y_score = y_true[:, None], y_score[:, None]
    if y_true.shape != y_score.shape:
        raise ValueError(f"y_true {y_true.shape} and y_score {y_score.shape} differ in shape")
    ap = []
    for c in range(y_true.shape[1]):
        labelled = ~np.isnan(y_true[:, c])
        t = y_true[labelled, c]
        if np.any(t == 1) and np.any(t == 0):
            ap.append(average_precision_score(t, y_score[labelled, c]))
    if not ap:
        raise ValueError("average precision is undefined: no class has both a positive and "
                         "a negative label")
    return float(np.mean(ap))


def mean_absolute_error(y_true, y_pred, mask=None) -> float:
    """Mean absolute error over every target of every (unmasked) row."""
    y_true, y_pred = _rows(mask, y_true, y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true {y_true.shape} and y_pred {y_pred.shape} differ in shape")
    if y_true.size == 0:
        raise ValueError("mean absolute error of no rows")
    return float(np.mean(np.abs(y_true.astype(np.float64) - y_pred.astype(np.float64))))


def macro_f1(y_true, logits_or_pred, mask=None, *,
             ignore_label: int | None = IGNORE_LABEL) -> float:
    """Macro-averaged F1 over classes (sklearn, `zero_division=0`), as LRGB for VOC.

    Args:
      y_true: `[N]` (or `[N, 1]`) integer class labels.
      logits_or_pred: `[N, K]` scores (argmax is taken) or `[N]` predicted labels.
      mask: optional `[N]` bool, False for padding nodes.
      ignore_label: nodes with this label are left out (LRGB's VOCSuperpixels declares
        255 "ignore"; LRGB's own logger has no such filter, and the released labels are
        all in 0..20, where both agree). None keeps every node.

    The average runs over the classes present in `y_true` or in the predictions.
    """
    y_true, pred = _rows(mask, y_true, logits_or_pred)
    if y_true.ndim == 2 and y_true.shape[1] == 1:
        y_true = y_true[:, 0]
    if pred.ndim == 2:
        pred = pred.argmax(axis=1)
    if pred.ndim != 1 or y_true.ndim != 1:
        raise ValueError(f"expected y_true [N] and logits [N, K] or labels [N], got "
                         f"{y_true.shape} and {pred.shape}")
    if ignore_label is not None:
        kept = y_true != ignore_label
        y_true, pred = y_true[kept], pred[kept]
    if y_true.size == 0:
        raise ValueError("macro F1 of no rows" + (f" (without label {ignore_label})"
                                                  if ignore_label is not None else ""))
    return float(f1_score(y_true.astype(np.int64), pred.astype(np.int64), average="macro",
                          zero_division=0))


def _finite_scores(y_score: np.ndarray, name: str) -> np.ndarray:
    y_score = np.asarray(y_score, np.float64)
    bad = ~np.isfinite(y_score)
    if np.any(bad):
        raise ValueError(f"{name}: {int(bad.sum())} non-finite prediction(s) (first at row "
                         f"{int(np.flatnonzero(bad.reshape(len(bad), -1).any(1))[0])})")
    return y_score


def roc_auc(y_true, y_score, mask=None) -> float:
    """Binary ROC AUC of one score per row, as the heterophily benchmark (Tolokers).

    Args:
      y_true: `[N]` or `[N, 1]` labels 0/1; NaN marks an unlabelled row, left out.
      y_score: `[N]` or `[N, 1]` scores (logits or probabilities: only their order counts).
      mask: optional `[N]` bool, e.g. a split's nodes.

    Raises ValueError for labels other than 0/1, non-finite scores, or a set holding one
    class only (ROC AUC is undefined there).
    """
    y_true, y_score = _rows(mask, y_true, y_score)
    y_true = y_true.astype(np.float64).reshape(len(y_true), -1)
    y_score = np.asarray(y_score).reshape(len(y_score), -1)
    if y_true.shape[1] != 1 or y_score.shape[1] != 1:
        raise ValueError(f"roc_auc is binary: expected y_true and y_score of shape [N] or "
                         f"[N, 1], got {y_true.shape} and {y_score.shape}")
    labelled = ~np.isnan(y_true[:, 0])
    t, s = y_true[labelled, 0], _finite_scores(y_score[labelled, 0], "roc_auc")
    if not np.all((t == 0) | (t == 1)):
        raise ValueError(f"roc_auc: labels must be 0/1, got {np.unique(t)[:5]}")
    if t.size == 0 or t.min() == t.max():
        raise ValueError(f"ROC AUC is undefined: {t.size} labelled row(s), "
                         f"{int(t.sum())} positive")
    return float(roc_auc_score(t, s))


def accuracy(y_true, logits_or_pred, mask=None) -> float:
    """Fraction of rows whose argmax prediction equals the label (OGB's `Evaluator`).

    Args:
      y_true: `[N]` or `[N, 1]` integer labels.
      logits_or_pred: `[N, K]` scores (argmax is taken) or `[N]` predicted labels.
      mask: optional `[N]` bool, e.g. a split's nodes.
    """
    y_true, pred = _rows(mask, y_true, logits_or_pred)
    y_true = y_true.reshape(len(y_true), -1)
    if y_true.shape[1] != 1:
        raise ValueError(f"accuracy: expected y_true [N] or [N, 1], got {y_true.shape}")
    if pred.ndim == 2:
        pred = _finite_scores(pred, "accuracy").argmax(axis=1)
    if pred.shape != (len(y_true),):
        raise ValueError(f"accuracy: expected logits [N, K] or labels [N], got {pred.shape}")
    if len(y_true) == 0:
        raise ValueError("accuracy of no rows")
    return float(np.mean(pred == y_true[:, 0]))
