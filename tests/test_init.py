"""`init_params` draws as the authors' code: every weight and bias U(+-1/sqrt(fan_in))."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import scipy.stats

import swan_jax as sj

WIDTH, KEYS = 16, 64  # 64 blocks of width 16: 1,024 draws of each bias


def drawn(cfg: sj.SWANConfig, name: str) -> np.ndarray:
    """Every value of parameter `name` over `KEYS` independent inits, flattened."""
    keys = jax.random.split(jax.random.PRNGKey(0), KEYS)
    return np.asarray(jax.vmap(lambda k: sj.init_params(k, WIDTH, cfg)[name])(keys)).ravel()


def assert_uniform(values: np.ndarray, bound: float) -> None:
    """Inside [-bound, bound], not all zero, and U(-bound, bound) by a KS test."""
    assert np.all(np.abs(values) <= bound)
    assert np.abs(values).max() > 0.9 * bound  # 1,024 draws reach the edges
    pvalue = scipy.stats.kstest(values, scipy.stats.uniform(-bound, 2 * bound).cdf).pvalue
    assert pvalue > 1e-3, f"not U(+-{bound:.3f}): KS p = {pvalue:.2e}"


@pytest.mark.parametrize("variant", ["swan", "adgn", "swan-learn"])
@pytest.mark.parametrize("sharing", [True, False])
def test_bias_is_uniform_in_one_over_sqrt_d(variant, sharing):
    """The authors' `reset_parameters`: `uniform_(bias, -1/sqrt(d), 1/sqrt(d))` (SWAN and
    ADGN alike), never zero; without weight sharing every layer its own draw."""
    cfg = sj.SWANConfig(variant=variant, num_layers=3, weight_sharing=sharing)
    assert_uniform(drawn(cfg, "b"), 1 / np.sqrt(WIDTH))
    one = np.asarray(sj.init_params(jax.random.PRNGKey(1), WIDTH, cfg)["b"])
    if not sharing:
        assert not np.array_equal(one[0], one[1])


def test_edge_mlp_biases_are_torch_linear_defaults():
    """`k1`, `k2` are the biases of `Linear(2d, d)` and `Linear(d, d)`: fan_in 2d and d."""
    cfg = sj.SWANConfig(variant="swan-learn")
    assert_uniform(drawn(cfg, "k1"), 1 / np.sqrt(2 * WIDTH))
    assert_uniform(drawn(cfg, "k2"), 1 / np.sqrt(WIDTH))


def test_bias_draw_is_its_own():
    """`b` is not a copy of another parameter's draw, and the weights are uniform too."""
    cfg = sj.SWANConfig(variant="swan-learn")
    p = sj.init_params(jax.random.PRNGKey(2), WIDTH, cfg)
    for name in ("W", "V", "Z", "K2"):
        assert not np.isin(np.asarray(p["b"]), np.asarray(p[name])).any()
    assert_uniform(drawn(cfg, "W"), 1 / np.sqrt(WIDTH))
