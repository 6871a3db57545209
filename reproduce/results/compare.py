"""Numbers beside the paper's: formatting, and each comparison's verdict as (kind, sentence):
`against_paper` (within the paper's std, else better / worse by the difference), `orders`
(graph transfer: orders of magnitude), `against_constant` (the constant predictor's)."""

from __future__ import annotations

import math
from typing import Any

from swan_jax.experiments.report import format_mean_std

LOWER_IS_BETTER = {"mse", "log10_mse", "graph_mean_log10_mse", "mae", "l1", "loss"}
PERCENT = {"ap", "f1", "roc_auc", "accuracy", "acc", "auc"}


def higher_is_better(metric: str) -> bool:
    return metric.lower() not in LOWER_IS_BETTER


def scale(metric: str) -> float:
    return 100.0 if metric.lower() in PERCENT else 1.0


def finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def mean_std(mean: Any, std: Any, metric: str) -> str:
    if not finite(mean):
        return "nan (diverged)"
    return format_mean_std(mean, std if finite(std) else None, metric,
                           percent=scale(metric) == 100.0)


def against_paper(ours: float, paper: float, paper_std: float | None, metric: str
                  ) -> tuple[str, str]:
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
    """No better than the constant predictor (within 0.01): it learned nothing."""
    return finite(ours) and finite(constant) and ours > constant - FLOOR_TOLERANCE


def against_constant(ours: float, constant: float | None) -> tuple[str, str]:
    if not (finite(ours) and finite(constant)):
        return "n/a", "no reference (constant predictor not recorded)"
    diff = ours - constant
    if at_floor(ours, constant):
        return "floor", (f"at the constant predictor's level (Δ {diff:+.4f}): learned "
                         f"nothing a constant does not; no comparison with the paper")
    return "better", f"{-diff:.2f} below the constant predictor (MSE x{10 ** diff:.2g})"
