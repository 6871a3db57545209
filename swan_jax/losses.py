"""Masked losses: padding rows never count. `pred [R, T]`, `target [R, T]`, `mask [R]`."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

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


LOSSES: dict[str, LossFn] = {
    "mse": mse,
    "l1": l1,
    "bce": binary_cross_entropy,
    "ce": cross_entropy,
    "weighted_ce": weighted_cross_entropy,
}


def get_loss(name: str) -> LossFn:
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; valid losses: {', '.join(LOSSES)}")
    return LOSSES[name]
