"""Single-device against data-parallel training on simulated CPU devices (a subprocess).

Usage: XLA_FLAGS=--xla_force_host_platform_device_count=4 python -m tests.data_parallel_script OUT
The device count must be fixed before JAX starts, hence a separate process.
"""

from __future__ import annotations

import json
import sys

import jax
import numpy as np

from swan_jax.train import TrainConfig, train
from tests.train_script import GRID, line_swap_dataset, model_fn, splits


def main(out: str) -> None:
    # 36 training graphs: steps of 8, 8, 8, 8 and 4, so the last step leaves two devices
    # empty and a per-device mean of the loss would differ from the single-device loss.
    data = splits(line_swap_dataset(num_graphs=44))
    report = {"devices": jax.device_count()}
    for parallel in (False, True):
        cfg = TrainConfig(epochs=3, batch_size=8, seeds=(0, 1), progress=False,
                          data_parallel=parallel)
        result = train(model_fn, data, cfg, GRID)
        leaves = jax.tree_util.tree_leaves(result.best_params)
        report["parallel" if parallel else "single"] = {
            "train_loss": [h["train_loss"] for h in result.history],
            "val": [h["val"] for h in result.history],
            "test": [r["test"] for r in result.runs],
            "params": [np.asarray(x).ravel().tolist() for x in leaves],
            "param_devices": sorted({len(x.sharding.device_set) for x in leaves}),
        }
    with open(out, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
