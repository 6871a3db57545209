"""Numbers beside the paper's: formatting, and the verdict of each comparison.

Three comparisons, each a short sentence:

* `against_paper` (GraphProp, LRGB, node classification): within the paper's std when
  |ours - paper| <= paper std, else better or worse by the difference (in the metric's
  unit, and in paper stds; for log10 MSE also the factor in MSE);
* `orders` (graph transfer): how many orders of magnitude our test MSE is from the
  authors' figure value, "within 1 order" when |log10(ours / theirs)| <= 1;
* `against_constant` (label settings the paper never reported): how far below the
  constant predictor's log10 MSE we are.
"""

from __future__ import annotations

import math
from typing import Any

from swan_jax.experiments.report import format_mean_std, format_value

LOWER_IS_BETTER = {"mse", "log10_mse", "graph_mean_log10_mse", "mae", "l1", "loss"}
PERCENT = {"ap", "f1", "roc_auc", "accuracy", "acc", "auc"}


def higher_is_better(metric: str) -> bool:
    return metric.lower() not in LOWER_IS_BETTER


def scale(metric: str) -> float:
    """The paper prints AP, F1, ROC AUC and accuracy in percent."""
    return 100.0 if metric.lower() in PERCENT else 1.0


def finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def number(value: Any, metric: str) -> str:
    """One value the way the paper prints this metric (`report.format_value`)."""
    if not finite(value):
        return "nan"
    return format_value(value, metric, percent=scale(metric) == 100.0)


def mean_std(mean: Any, std: Any, metric: str) -> str:
    """"mean ± std" (std omitted when unknown)."""
    if not finite(mean):
        return "nan (diverged)"
    return format_mean_std(mean, std if finite(std) else None, metric,
                           percent=scale(metric) == 100.0)


def against_paper(ours: float, paper: float, paper_std: float | None, metric: str
                  ) -> tuple[str, str]:
    """(kind, sentence): kind is "within", "better", "worse" or "n/a"."""
    if not (finite(ours) and finite(paper)):
        return "n/a", "no comparison (no finite value)"
    diff = ours - paper
    std = paper_std if finite(paper_std) else 0.0
    size = f"{abs(diff):.4g}" + (f" = {abs(diff) / std:.1f} paper stds" if std > 0 else "")
    if metric.lower().endswith("log10_mse"):
        size += f"; MSE x{10 ** diff:.2g}"
    if abs(diff) <= std:
        return "within", f"within the paper's std (Δ {diff:+.4g})"
    better = diff > 0 if higher_is_better(metric) else diff < 0
    return ("better", f"better by {size}") if better else ("worse", f"worse by {size}")


def orders(ours: float, theirs: float) -> tuple[str, str]:
    """(kind, sentence) for two MSEs: "within" (1 order), "better", "worse" or "n/a"."""
    if not (finite(ours) and finite(theirs)) or ours <= 0 or theirs <= 0:
        return "n/a", "no comparison"
    gap = math.log10(ours / theirs)
    factor = f"x{ours / theirs:.2g}"
    if abs(gap) <= 1:
        return "within", f"within 1 order ({factor}, {gap:+.1f} orders)"
    if gap < 0:
        return "better", f"better by {-gap:.1f} orders ({factor})"
    return "worse", f"worse by {gap:.1f} orders ({factor})"


FLOOR_TOLERANCE = 0.01  # log10 MSE: within 2.3% of the constant predictor's MSE


def at_floor(ours: float, constant: float | None) -> bool:
    """Whether a log10 MSE is no better than the constant predictor's (within 0.01): a
    model there learned nothing a constant does not, whatever the paper's value."""
    return finite(ours) and finite(constant) and ours > constant - FLOOR_TOLERANCE


def against_constant(ours: float, constant: float | None) -> tuple[str, str]:
    """(kind, sentence) for log10 MSEs against the constant predictor's."""
    if not (finite(ours) and finite(constant)):
        return "n/a", "no reference (constant predictor not recorded)"
    diff = ours - constant
    if at_floor(ours, constant):
        return "floor", (f"at the constant predictor's level (Δ {diff:+.4f}): learned "
                         f"nothing a constant does not; no comparison with the paper")
    return "better", f"{-diff:.2f} below the constant predictor (MSE x{10 ** diff:.2g})"
