"""Losses: LRGB's weighted cross-entropy leaves out the "ignore" label 255."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from swan_jax.losses import IGNORE_LABEL, get_loss, weighted_cross_entropy


def lrgb_weighted_ce(logits, labels):
    """LRGB's `weighted_cross_entropy` restated in NumPy (no ignored labels)."""
    v = len(labels)
    counts = np.bincount(labels, minlength=logits.shape[1])
    weight = (v - counts) / v * (counts > 0)
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    nll = -logp[np.arange(v), labels]
    return np.sum(weight[labels] * nll) / np.sum(weight[labels])


def test_ignored_rows_count_like_padding():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(40, 21)).astype(np.float32)
    labels = rng.integers(0, 21, size=40)
    mask = np.arange(40) < 36
    labels[[1, 5, 9]] = IGNORE_LABEL
    kept = mask & (labels != IGNORE_LABEL)
    want = lrgb_weighted_ce(logits[kept].astype(np.float64), labels[kept])
    got = weighted_cross_entropy(jnp.asarray(logits), jnp.asarray(labels[:, None]),
                                 jnp.asarray(mask))
    assert float(got) == pytest.approx(want, rel=1e-5)
    assert get_loss("weighted_ce") is weighted_cross_entropy

    # The ignored rows' logits neither change the loss nor get a gradient.
    grad = jax.grad(lambda z: weighted_cross_entropy(z, jnp.asarray(labels),
                                                     jnp.asarray(mask)))(jnp.asarray(logits))
    assert np.all(np.asarray(grad)[[1, 5, 9]] == 0)
    assert np.any(np.asarray(grad)[0] != 0)
    shifted = logits.copy()
    shifted[[1, 5, 9]] += 100.0
    again = weighted_cross_entropy(jnp.asarray(shifted), jnp.asarray(labels), jnp.asarray(mask))
    assert float(again) == pytest.approx(float(got), rel=1e-6)

    # Without the mask of 255 the label would be clamped into class 20: a different loss.
    unmasked = weighted_cross_entropy(jnp.asarray(logits), jnp.asarray(labels),
                                      jnp.asarray(mask), ignore_label=None)
    assert float(unmasked) != pytest.approx(float(got), rel=1e-3)


def test_all_rows_ignored_gives_zero_not_nan():
    logits = jnp.zeros((3, 21))
    loss = weighted_cross_entropy(logits, jnp.full((3,), IGNORE_LABEL), jnp.ones(3, bool))
    assert float(loss) == 0.0
