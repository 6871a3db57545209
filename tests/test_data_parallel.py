"""Data-parallel training (`TrainConfig(data_parallel=True)`) on 4 simulated CPU devices."""

from __future__ import annotations

import numpy as np

from swan_jax.data.batching import budget_for, iterate_batches, iterate_sharded_batches
from tests.devices import report_on_devices
from tests.train_script import line_swap_dataset


def test_sharded_steps_hold_the_same_graphs_as_single_device_steps():
    data = line_swap_dataset(num_graphs=22)
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    single = list(iterate_batches(data, 8, budget_for(data, 8), rng_a))
    sharded = list(iterate_sharded_batches(data, 8, budget_for(data, 2), 4, rng_b))
    assert len(single) == len(sharded) == 3
    for one, many in zip(single, sharded, strict=True):
        assert many.node_mask.shape[0] == 4  # [devices, nodes per device]
        np.testing.assert_array_equal(one.node_targets[one.node_mask],
                                      many.node_targets[many.node_mask])
    # 22 graphs = 8 + 8 + 6: the last step's fourth device holds only padding.
    assert not sharded[-1].graph_mask[3].any() and sharded[-1].graph_mask[2].any()


def test_four_devices_train_like_one(tmp_path):
    report = report_on_devices("tests.data_parallel_script", tmp_path / "report.json")
    assert report["devices"] == 4
    single, parallel = report["single"], report["parallel"]
    assert parallel["param_devices"] == [4] and single["param_devices"] == [1]
    np.testing.assert_allclose(parallel["train_loss"], single["train_loss"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(parallel["val"], single["val"], rtol=1e-5, atol=1e-7)
    for a, b in zip(parallel["params"], single["params"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # The runs differ from each other, so agreement is not a constant.
    assert len({round(t, 6) for t in single["test"]}) > 1
