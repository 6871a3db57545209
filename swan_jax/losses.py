"""Masked losses: padding rows never count. `pred [R, T]`, `target [R, T]`, `mask [R]`."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

from swan_jax.settings import did_you_mean

Array = jax.Array
LossFn = Callable[[Array, Array, Array], Array]


def _masked_mean(values: Array, mask: Array) -> Array:
    values = values.reshape(values.shape[0], -1)
    weights = jnp.broadcast_to(mask[:, None], values.shape).astype(values.dtype)
    return jnp.sum(values * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def mse(pred: Array, target: Array, mask: Array) -> Array:
    return _masked_mean((pred - target) ** 2, mask)


def l1(pred: Array, target: Array, mask: Array) -> Array:
    return _masked_mean(jnp.abs(pred - target), mask)


def binary_cross_entropy(logits: Array, target: Array, mask: Array) -> Array:
    """Multi-label BCE with logits; NaN targets (missing labels) are ignored."""
    known = ~jnp.isnan(target)
    losses = optax.sigmoid_binary_cross_entropy(logits, jnp.where(known, target, 0.0))
    weights = (known & mask[:, None]).astype(logits.dtype)
    return jnp.sum(losses * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def cross_entropy(logits: Array, target: Array, mask: Array) -> Array:
    """Softmax cross-entropy with integer class targets `[R]` or `[R, 1]`."""
    labels = target.reshape(-1).astype(jnp.int32)
    return _masked_mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels), mask)


# LRGB's PascalVOC-SP declares label 255 "ignore" (VOCSuperpixels.ignore_label).
IGNORE_LABEL = 255


def weighted_cross_entropy(logits: Array, target: Array, mask: Array, *,
                           ignore_label: int | None = IGNORE_LABEL) -> Array:
    """LRGB's class-weighted cross-entropy (PascalVOC-SP), without ignored nodes.

    `logits [R, K]`, `target [R]` or `[R, 1]` integer classes, `mask [R]` (False: padding).
    Rows whose label is `ignore_label` (255, LRGB's "ignore") count like padding: in
    neither the class counts nor the mean. Over the V remaining rows, weights come from the
    batch's own label counts, `w_c = (V - n_c) / V` for classes present, 0 otherwise; the
    loss is the weighted mean of the per-row negative log-likelihoods,
    `sum_i w_{y_i} nll_i / sum_i w_{y_i}` (LRGB's `weighted_cross_entropy`: `F.nll_loss`
    with `weight=`).
    """
    labels = target.reshape(-1).astype(jnp.int32)
    num_classes = logits.shape[-1]
    keep = mask.astype(bool)
    if ignore_label is not None:
        keep = keep & (labels != ignore_label)
    labels = jnp.where(keep, labels, 0)  # an ignored label must not index a class
    real = keep.astype(logits.dtype)
    counts = jax.ops.segment_sum(real, labels, num_segments=num_classes)
    total = jnp.sum(real)
    class_weight = jnp.where(counts > 0, (total - counts) / jnp.maximum(total, 1.0), 0.0)
    row_weight = class_weight[labels] * real
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    return jnp.sum(row_weight * nll) / jnp.maximum(jnp.sum(row_weight), 1e-12)



def graph_mean_mse(pred: Array, target: Array, mask: Array, n_node: Array) -> Array:
    """MSE averaged per graph first: the mean over graphs of each graph's node-mean error.

    The GraphProp loss of the ADGN and SWAN reference code (per-graph sum of the node
    squared errors divided by the graph's node count, then the mean over the batch's
    graphs); it weights every graph equally, where `mse` weights every node equally.

    Args:
      pred, target: `[R, T]` node rows (several columns are averaged within a row).
      mask: `[R]`, True on real rows; padding rows count nowhere.
      n_node: `[G]` rows per graph, consecutive, `sum(n_node) == R` (a padded batch's
        `graph.n_node`; for data-parallel shards, the shards' `n_node` flattened in shard
        order). Graphs without a real row (the padding graph, empty slots) are left out.

    Returns:
      A scalar; 0 when no graph has a real row.
    """
    rows = pred.shape[0]
    se = ((pred - target) ** 2).reshape(rows, -1).mean(axis=1)
    real = mask.astype(se.dtype)
    num_graphs = n_node.shape[0]
    graph_of_row = jnp.repeat(jnp.arange(num_graphs), n_node, total_repeat_length=rows)
    sums = jax.ops.segment_sum(se * real, graph_of_row, num_segments=num_graphs)
    counts = jax.ops.segment_sum(real, graph_of_row, num_segments=num_graphs)
    present = counts > 0
    per_graph = jnp.where(present, sums / jnp.maximum(counts, 1.0), 0.0)
    return jnp.sum(per_graph) / jnp.maximum(jnp.sum(present.astype(se.dtype)), 1.0)


LOSSES: dict[str, LossFn] = {
    "mse": mse,
    "l1": l1,
    "bce": binary_cross_entropy,
    "ce": cross_entropy,
    "weighted_ce": weighted_cross_entropy,
}


# Losses that also need the batch's graph sizes: `fn(pred, target, mask, n_node)`.
PER_GRAPH_LOSSES: dict[str, Callable[[Array, Array, Array, Array], Array]] = {
    "graph_mean_mse": graph_mean_mse,
}


def get_loss(name: str) -> LossFn:
    """The loss `name` as `fn(pred, target, mask)`; per-graph losses: use `get_batch_loss`."""
    if name not in LOSSES:
        valid = (*LOSSES, *PER_GRAPH_LOSSES)
        raise ValueError(f"unknown loss {name!r}; valid losses: {', '.join(valid)}"
                         f"{did_you_mean(name, valid)}")
    return LOSSES[name]


def get_batch_loss(loss: str | LossFn) -> Callable[[Array, Array, Array, Array], Array]:
    """Any loss as `fn(pred, target, mask, n_node)`; `n_node` (the batch's graph sizes,
    flattened in shard order) is used by the per-graph losses only.

    `loss`: a name of `LOSSES` / `PER_GRAPH_LOSSES`, or your own `fn(pred [R, T], target
    [R, T'], mask [R]) -> scalar` (traced inside the jitted, vmapped step; let padding
    rows, `mask` False, count nowhere, as `_masked_mean` does).
    """
    if callable(loss):
        return lambda pred, target, mask, n_node: loss(pred, target, mask)
    if loss in PER_GRAPH_LOSSES:
        return PER_GRAPH_LOSSES[loss]
    named = get_loss(loss)
    return lambda pred, target, mask, n_node: named(pred, target, mask)
