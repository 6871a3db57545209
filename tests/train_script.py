"""A small training run used by the tests as a subprocess (resume after SIGKILL).

Usage: python -m tests.train_script CHECKPOINT_DIR OUT_JSON EPOCHS [--resume]
"""

from __future__ import annotations

import json
import sys

import jax
import numpy as np

import swan_jax as sj
from swan_jax.data import GraphDataset
from swan_jax.train import TrainConfig, train


def line_swap_dataset(num_graphs: int = 24, num_nodes: int = 6, seed: int = 0) -> GraphDataset:
    """Paths whose label swaps the values of nodes 0 and 1: a tiny transfer task."""
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(num_graphs):
        x = rng.uniform(0, 0.5, (num_nodes, 1)).astype(np.float32)
        y = x.copy()
        y[[0, 1]] = y[[1, 0]]
        s = np.arange(num_nodes - 1)
        graphs.append(dict(nodes=x, senders=np.concatenate([s, s + 1]),
                           receivers=np.concatenate([s + 1, s]), node_targets=y))
    return GraphDataset.from_graphs(graphs)


def splits(dataset: GraphDataset) -> dict[str, GraphDataset]:
    n = len(dataset)
    return {"train": dataset.subset(range(n - 8)), "val": dataset.subset(range(n - 8, n - 4)),
            "test": dataset.subset(range(n - 4, n))}


def model_fn(hp):
    cfg = sj.SWANConfig(num_layers=3, epsilon=hp["epsilon"], beta=hp["beta"])
    return sj.Model(sj.LinearEncoder(8), sj.SWANBlock(cfg), sj.NodeReadout((1,)))


GRID = ({"epsilon": 0.1, "beta": 1.0}, {"epsilon": 0.5, "beta": -1.0})


def main(argv: list[str]) -> None:
    checkpoint_dir, out, epochs = argv[0], argv[1], int(argv[2])
    cfg = TrainConfig(epochs=epochs, batch_size=4, seeds=(0, 1), checkpoint_dir=checkpoint_dir,
                      resume="--resume" in argv, progress=False,
                      checkpoint_seconds=0)  # every epoch: the test kills it mid-run
    result = train(model_fn, splits(line_swap_dataset()), cfg, GRID)
    leaves = [np.asarray(x).tolist() for x in jax.tree_util.tree_leaves(result.best_params)]
    with open(out, "w") as f:
        json.dump({"runs": result.runs, "history": [
            {k: v for k, v in h.items() if k != "seconds"} for h in result.history],
            "params": leaves}, f)


if __name__ == "__main__":
    main(sys.argv[1:])
