"""The runs of a program split over 4 simulated devices (`shard_runs`), in a subprocess,
against the same program on one device; and the one-line refusal of runs that do not
divide over the devices, from `train` and from the command line.

Usage: XLA_FLAGS=--xla_force_host_platform_device_count=4 python -m tests.run_mesh_script OUT
(the device count is fixed before JAX starts).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import numpy as np

import swan_jax as sj
from swan_jax.train import TrainConfig, train
from swan_jax.train._run_mesh import RunMesh, RunsDoNotDivide
from tests.train_script import line_swap_dataset, splits

# 4 grid points x 2 seeds = 8 runs, in (grid point, seed) order: device d holds grid
# point d's two seeds. Every run differs from the others.
GRID = tuple({"epsilon": e, "beta": b} for e in (0.1, 0.5) for b in (1.0, -1.0))


def model_fn(hp):
    """`tests.train_script`'s model with one SWAN layer, not 3: where the runs sit (and
    whether they mix) does not depend on the depth, and the layers are unrolled in the
    step, so each of the programs compiles faster."""
    cfg = sj.SWANConfig(num_layers=1, epsilon=hp["epsilon"], beta=hp["beta"])
    return sj.Model(sj.LinearEncoder(8), sj.SWANBlock(cfg), sj.NodeReadout((1,)))


def summary(result) -> dict:
    leaves = jax.tree_util.tree_leaves(result.best_params)
    return {"history": [{k: v for k, v in h.items() if k != "seconds"}
                        for h in result.history],
            "runs": result.runs,
            "params": [np.asarray(x).tolist() for x in leaves],
            "param_devices": sorted({len(x.sharding.device_set) for x in leaves})}


def sweep_refusal(folder: Path) -> dict:
    """The command line's refusal of a sweep whose runs do not divide over the devices
    (1 run on 4), here rather than in a process of its own: the refusal's text and
    whether anything was written."""
    from swan_jax.experiments import transfer

    out, cache = folder / "out", folder / "cache"
    try:
        transfer.main(["--topology", "line", "--distance", "3", "--model", "swan", "--seeds",
                       "0", "--epsilon", "0.1", "--gamma", "0.1", "--beta", "1",
                       "--adjacency", "sym", "--shard-runs", "--no-progress",
                       "--results-dir", str(out), "--cache-dir", str(cache)])
    except SystemExit as err:
        return {"code": err.code, "wrote": out.exists() or cache.exists()}
    return {"code": 0, "wrote": out.exists() or cache.exists()}


def main(out: str) -> None:
    data = splits(line_swap_dataset(num_graphs=24))
    report = {"devices": jax.device_count()}
    for shard in (False, True):  # the device pipeline
        cfg = TrainConfig(epochs=3, batch_size=8, seeds=(0, 1), quiet=True, shard_runs=shard)
        report["sharded" if shard else "single"] = summary(train(model_fn, data, cfg, GRID))
    # the same sharded program with devices 1-3's runs changed: device 0's must not move
    other = GRID[:1] + tuple({"epsilon": 0.3, "beta": 0.5} for _ in GRID[1:])
    cfg = TrainConfig(epochs=3, batch_size=8, seeds=(0, 1), quiet=True, shard_runs=True)
    report["others_changed"] = summary(train(model_fn, data, cfg, other))
    try:
        train(model_fn, data, TrainConfig(epochs=1, seeds=(0, 1, 2), quiet=True,
                                          shard_runs=True, description="odd"), GRID[:2])
    except RunsDoNotDivide as err:
        report["refused"] = str(err)
    report["sweep_refused"] = sweep_refusal(Path(out).parent / "refused")
    # what the memory check weighs against one device: its share of the runs
    report["share"] = list(RunMesh(8).share(np.zeros((8, 3), np.float32)).shape)
    with open(out, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
