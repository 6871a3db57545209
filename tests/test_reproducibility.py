"""The same seeds give the same numbers: two identical training calls agree bit for bit."""

from __future__ import annotations

import jax
import numpy as np

from swan_jax.train import TrainConfig, train
from tests.train_script import GRID, line_swap_dataset, model_fn, splits


def without_timing(history: list[dict]) -> list[dict]:
    return [{k: v for k, v in h.items() if k != "seconds"} for h in history]


def test_two_identical_training_calls_give_bit_identical_results():
    data = splits(line_swap_dataset())
    cfg = TrainConfig(epochs=2, batch_size=4, seeds=(0, 1), progress=False)
    first = train(model_fn, data, cfg, GRID)
    second = train(model_fn, data, cfg, GRID)
    assert len(first.history) == 2
    # Exact equality of Python floats: every loss and metric, every run.
    assert without_timing(first.history) == without_timing(second.history)
    assert first.runs == second.runs
    assert first.num_params == second.num_params
    a, b = jax.tree_util.tree_leaves(first.best_params), jax.tree_util.tree_leaves(
        second.best_params)
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # The seeds matter: the two seeds of a grid point do not train alike.
    assert first.history[-1]["train_loss"][0] != first.history[-1]["train_loss"][1]
