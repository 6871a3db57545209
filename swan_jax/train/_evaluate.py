"""The metrics of every run on one split, with non-finite predictions reported.

A built-in metric is `(pred [rows, T], target [rows, T']) -> float` on the real rows of a
split, with a direction ("min" or "max") that model selection follows; each name also
resolves to a `Metric` (`get_metric`). A caller's own `Metric` is scored here too: on the
host with NumPy (`score_runs`) or on the device (`device_scores`, jitted and vmapped over
runs). Predictions that are not finite are not scored (scikit-learn would raise deep
inside): the run is reported so the loop can treat it as diverged.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from swan_jax.data.batching import Batch
from swan_jax.settings import unknown_name
from swan_jax.train._metric import Metric, as_scalar
from swan_jax.train._placement import batch_targets
from swan_jax.train._run_mesh import to_host

MetricFn = Callable[[np.ndarray, np.ndarray], float]


def _mse(pred, target):
    return float(np.mean((pred - target) ** 2))


def _official(name: str) -> MetricFn:
    def fn(pred, target):
        from swan_jax import metrics  # sklearn-backed, imported on first use

        if name == "mae":
            return float(metrics.mean_absolute_error(target, pred))
        if name == "ap":
            return float(metrics.average_precision(target, pred))
        if name == "accuracy":  # ogbn-arxiv: argmax of the class logits
            return float(metrics.accuracy(target, pred))
        return float(metrics.macro_f1(target.reshape(-1), pred))

    return fn


def _roc_auc(pred, target):
    """Binary ROC AUC (Tolokers, ...): one logit column, or two (class 1 minus class 0)."""
    from sklearn.metrics import roc_auc_score

    score = pred[:, 1] - pred[:, 0] if pred.shape[1] == 2 else pred[:, 0]
    return float(roc_auc_score(target.reshape(-1).astype(np.int64), score))


METRIC_FNS: dict[str, tuple[MetricFn, str]] = {
    "mse": (_mse, "min"),
    "log10_mse": (lambda p, t: math.log10(max(_mse(p, t), 1e-30)), "min"),
    "mae": (_official("mae"), "min"),
    "ap": (_official("ap"), "max"),
    "f1": (_official("f1"), "max"),
    "roc_auc": (_roc_auc, "max"),
    "accuracy": (_official("accuracy"), "max"),
}
# Metrics over node rows that weigh every graph equally: `fn(pred, target, weight)` with
# `weight = 1 / (the row's graph's node count)`, so that the weighted mean over rows is the
# mean over graphs of each graph's node mean (ADGN's and SWAN's GraphProp score).
def _graph_mean_log10_mse(pred, target, weight) -> float:
    rows = weight.shape[0]
    se = np.mean((pred.reshape(rows, -1) - target.reshape(rows, -1)) ** 2, axis=1)
    return math.log10(max(float(np.sum(weight * se) / max(float(np.sum(weight)), 1e-30)),
                          1e-30))


GRAPH_MEAN_METRICS: dict[str, tuple[Callable, str]] = {
    "graph_mean_log10_mse": (_graph_mean_log10_mse, "min"),
}
METRICS = tuple(METRIC_FNS) + tuple(GRAPH_MEAN_METRICS)


def _masked(name: str, fn: Callable) -> Callable:
    """A built-in score as a `Metric` function: `fn` on the rows `mask` keeps (NumPy)."""
    def score(pred, target, mask, *, n_node=None):
        mask = np.asarray(mask, bool)
        pred, target = np.asarray(pred)[mask], np.asarray(target)[mask]
        if name not in GRAPH_MEAN_METRICS:
            return fn(pred, target)
        if n_node is None:
            raise ValueError(f"metric {name} weighs graphs: pass n_node= (the node count "
                             f"of each graph of the rows, in order)")
        n_node = np.asarray(n_node)
        return fn(pred, target, weight=np.repeat(1.0 / np.maximum(n_node, 1), n_node)[mask])

    score.__name__ = score.__qualname__ = name
    return score


# Every built-in name as the `Metric` a caller could have written (host NumPy functions;
# the pipelines still compute the error metrics as sums on the device, `DEVICE_METRICS`).
BUILTIN_METRICS: dict[str, Metric] = {
    name: Metric(_masked(name, fn), higher_is_better=mode == "max", name=name)
    for name, (fn, mode) in {**METRIC_FNS, **GRAPH_MEAN_METRICS}.items()}


def get_metric(metric: str | Metric) -> Metric:
    """The `Metric` a name (`METRICS`) stands for, or `metric` itself.

    A bare function is refused: it has no direction (`Metric(fn, higher_is_better=...)`).
    """
    if isinstance(metric, Metric):
        return metric
    if callable(metric):
        raise TypeError("metric: a bare function has no direction; pass swan_jax.train."
                        "Metric(fn, higher_is_better=True or False, on_device=...)")
    if metric not in BUILTIN_METRICS:
        raise ValueError(unknown_name("metric", metric, METRICS))
    return BUILTIN_METRICS[metric]


def metric_key(metric: str | Metric) -> str | Metric:
    """The name of a built-in (given by name or as its `Metric`), else the custom `Metric`:
    built-ins keep their own code paths (and numbers)."""
    resolved = get_metric(metric)
    return resolved.name if BUILTIN_METRICS.get(resolved.name) is resolved else resolved


def metric_mode(metric: str | Metric | dict) -> str:
    """"min" or "max": how the metric selects (a name, a `Metric`, or a custom metric's
    `Metric.describe()` as `run.json` keeps it)."""
    if isinstance(metric, dict):
        return "max" if metric["higher_is_better"] else "min"
    return get_metric(metric).mode


def _row_weights(batch: Batch) -> np.ndarray:
    """`1 / n` for every node row of a graph of `n` nodes (rows in graph order; shards,
    if any, flattened in order): `[rows]`."""
    n_node = np.asarray(batch.graph.n_node).reshape(-1)
    return np.repeat(1.0 / np.maximum(n_node, 1), n_node)


def evaluate(predict, params, hp, batches: Sequence[Batch], metric: str | Metric, level: str,
             *, sharded: bool = False, split_mask: bool = False
             ) -> tuple[list[float], np.ndarray]:
    """Per run: the metric over every real row of `batches`, and whether it was finite.

    Returns `(values [runs], finite [runs] bool)`; a run with a non-finite prediction gets
    NaN and `finite` False.
    """
    metric = metric_key(metric)
    if isinstance(metric, Metric) and metric.on_device:
        parts = [(predict(params, hp, b), *batch_targets(b, level, sharded=sharded,
                                                         split_mask=split_mask))
                 for b in batches]
        stacked = [jnp.stack(x) for x in zip(*parts, strict=True)]  # [steps, ...] each
        return finish_scores(*device_scores(metric)(*stacked))
    weighted = metric in GRAPH_MEAN_METRICS
    if weighted and level != "node":
        raise ValueError(f"metric {metric!r} scores node rows; task level is {level!r}")
    parts = []  # per batch: predictions, targets, mask, row weights
    select = _select(hp)  # read from the device once, not per batch
    for batch in batches:
        target, mask = batch_targets(batch, level, sharded=sharded, split_mask=split_mask,
                                     select=select)
        parts.append((to_host(predict(params, hp, batch)), np.asarray(target),
                      np.asarray(mask), _row_weights(batch) if weighted else None))
    preds, targets, masks, weights = zip(*parts, strict=True)
    return score_batches(preds, targets, masks, weights, metric)


def _select(hp):
    """The runs' split column (`_splits.SPLIT_AXIS`) where their splits differ, else None."""
    from swan_jax.train._splits import SPLIT_AXIS

    return None if hp is None or SPLIT_AXIS not in hp else to_host(hp[SPLIT_AXIS])


def score_batches(preds: Sequence[np.ndarray] | np.ndarray,
                  targets: Sequence[np.ndarray] | np.ndarray,
                  masks: Sequence[np.ndarray] | np.ndarray,
                  weights: Sequence[np.ndarray | None],
                  metric: str | Metric) -> tuple[list[float], np.ndarray]:
    """`score_runs` over batches: `pred [runs, rows, T]`, `target [rows, T']` and the rows
    scored, `mask [rows]` (every run) or `[runs, rows]` (each run its own split's rows);
    `weight [rows]` for the graph-mean metrics, else None."""
    def rows(r=None):
        pick = [np.asarray(m if r is None else m[r], bool).reshape(-1) for m in masks]
        pred = np.concatenate([(p if r is None else p[r:r + 1])[:, k]
                               for p, k in zip(preds, pick, strict=True)], axis=1)
        target = np.concatenate([t[k] for t, k in zip(targets, pick, strict=True)])
        weight = (None if weights[0] is None else
                  np.concatenate([w[k] for w, k in zip(weights, pick, strict=True)]))
        return pred, target, metric, weight

    if np.ndim(masks[0]) < 2:
        return score_runs(*rows())
    scored = [score_runs(*rows(r)) for r in range(len(preds[0]))]
    return [v[0] for v, _ in scored], np.concatenate([f for _, f in scored])


def score_runs(pred: np.ndarray, target: np.ndarray, metric: str | Metric,
               weight: np.ndarray | None = None) -> tuple[list[float], np.ndarray]:
    """Per run: the metric of `pred [runs, rows, T]` against `target [rows, T']` (the
    real rows only; `weight [rows]` for the graph-mean metrics), and whether it was finite.
    A custom host `Metric` is called with a mask of all True and must return a scalar."""
    metric = metric_key(metric)
    fn: Callable[[np.ndarray, np.ndarray], float]
    if isinstance(metric, Metric):
        everyone = np.ones(len(target), bool)
        fn = functools.partial(_host_score, metric, mask=everyone)
    elif metric in GRAPH_MEAN_METRICS:
        fn = functools.partial(GRAPH_MEAN_METRICS[metric][0], weight=weight)
    else:
        fn = METRIC_FNS[metric][0]
    finite = np.asarray([np.all(np.isfinite(p)) for p in pred])
    return [fn(pred[r], target) if finite[r] else math.nan for r in range(len(pred))], finite


def _host_score(metric: Metric, pred: np.ndarray, target: np.ndarray, mask: np.ndarray
                ) -> float:
    return as_scalar(metric, metric.fn(pred, target, mask))


@functools.lru_cache(maxsize=16)
def device_scores(metric: Metric):
    """Jitted `(pred [steps, runs, rows, T], target [steps, rows, T'], mask [steps, rows])
    -> (values [runs], finite [runs])`: a device `Metric` of each run over every row of the
    stacked batches (padding rows zeroed, `mask` False), only on real rows' finiteness."""
    return jax.jit(functools.partial(reduce_scores, metric))


def reduce_scores(metric: Metric, pred, target, mask):
    """`device_scores`, traceable (the device pipeline calls it inside its evaluation)."""
    runs = pred.shape[1]
    pred = jnp.moveaxis(pred, 1, 0).reshape(runs, -1, pred.shape[-1])
    target, mask = target.reshape(-1, target.shape[-1]), mask.reshape(-1).astype(bool)
    finite = jnp.all(jnp.isfinite(pred) | ~mask[None, :, None], axis=(1, 2))
    pred = jnp.where(mask[None, :, None], pred, jnp.zeros((), pred.dtype))
    values = jax.vmap(metric.fn, in_axes=(0, None, None))(pred, target, mask)
    return jnp.reshape(values, (runs,)), finite


def finish_scores(values, finite) -> tuple[list[float], np.ndarray]:
    """Per run: `device_scores`' values as floats, NaN where predictions were not finite."""
    finite = to_host(finite)
    return [float(v) if ok else math.nan for v, ok in zip(to_host(values).astype(np.float64),
                                                          finite, strict=True)], finite


# Metrics the device pipeline reduces on the device (sums of errors, never the predictions
# copied); the others (average precision, F1, ROC AUC, accuracy) score on the host.
DEVICE_METRICS = ("mse", "log10_mse", "mae", "graph_mean_log10_mse")


def metric_sums(pred, target, mask, n_node, metric: str):
    """`(numerator [runs], denominator [])` of a `DEVICE_METRICS` metric on one batch
    (traceable). `pred [runs, rows, T]`, `target [rows, T]`, `mask [rows]`, `n_node [graphs]`
    (the batch's, padding graph included: the graph-mean weights)."""
    import jax.numpy as jnp

    diff = pred - target[None]
    err = jnp.abs(diff) if metric == "mae" else diff * diff
    if metric in GRAPH_MEAN_METRICS:
        rows = mask.shape[0]
        graph = jnp.searchsorted(jnp.cumsum(n_node), jnp.arange(rows), side="right",
                                 method="scan_unrolled")  # no loop (`data.device._locate`)
        weight = jnp.where(mask, 1.0 / jnp.maximum(n_node[jnp.minimum(graph, len(n_node) - 1)],
                                                   1), 0.0)
        return jnp.sum(weight * jnp.mean(err, axis=2), axis=1), jnp.sum(weight)
    return (jnp.sum(jnp.where(mask[None, :, None], err, 0.0), axis=(1, 2)),
            jnp.sum(mask) * err.shape[2])


def finish_sums(numerator: np.ndarray, denominator: np.ndarray, finite: np.ndarray,
                metric: str) -> tuple[list[float], np.ndarray]:
    """Per run: the metric from `metric_sums` added over batches (float64 on the host)."""
    mean = np.asarray(numerator, np.float64) / max(float(denominator), 1e-30)
    values = [math.log10(max(m, 1e-30)) if "log10" in metric else float(m) for m in mean]
    return [v if ok else math.nan for v, ok in zip(values, finite, strict=True)], finite
