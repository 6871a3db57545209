"""Is my GPU used? `make gpu-check` (or `python -m swan_jax.experiments.gpu_check`).

Prints jax's version, backend and devices, then trains SWAN for a few short epochs on toy
graphs (random graphs, a smoothing target) and reports the time of one training step and
of one epoch after compilation, and whether the computation ran on a GPU. `--require-gpu`
exits with status 1 when it did not (what `make gpu-check` passes); install the GPU build
with `make install DEVICE=cuda12` or `DEVICE=cuda13` (the CUDA major version of your
driver, `nvidia-smi`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import jax
import numpy as np


def toy_graphs(num_graphs: int, num_nodes: int, *, seed: int = 0):
    """Random graphs (`num_nodes` nodes, ~3 neighbours each, both directions) whose node
    target is the mean of the node's and its neighbours' features."""
    from swan_jax.data import GraphDataset

    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(num_graphs):
        x = rng.normal(size=(num_nodes, 8)).astype(np.float32)
        s = rng.integers(0, num_nodes, 3 * num_nodes // 2)
        r = rng.integers(0, num_nodes, 3 * num_nodes // 2)
        senders, receivers = np.concatenate([s, r]), np.concatenate([r, s])
        total = x.copy()
        np.add.at(total, receivers, x[senders])
        count = 1 + np.bincount(receivers, minlength=num_nodes)[:, None]
        graphs.append({"nodes": x, "senders": senders, "receivers": receivers,
                       "node_targets": (total / count)[:, :1]})
    return GraphDataset.from_graphs(graphs)


def timed_training(num_graphs: int, num_nodes: int, hidden: int, epochs: int):
    """`(seconds per step, seconds per epoch, steps per epoch, device of the parameters)`,
    measured on the last epoch (the first one compiles)."""
    import swan_jax as sj
    from swan_jax.train import TrainConfig, train

    def model_fn(hp):
        block = sj.SWANBlock(sj.SWANConfig(num_layers=5, epsilon=0.1))
        return sj.Model(sj.LinearEncoder(hidden), block, sj.NodeReadout((hidden, 1)))

    cfg = TrainConfig(epochs=epochs, batch_size=32, progress=False, track_test=False,
                      check_memory=False, description="gpu-check")
    result = train(model_fn, toy_graphs(num_graphs, num_nodes).split(seed=0), cfg)
    last, timing = result.history[-1], result.timings[-1]
    leaf = jax.tree_util.tree_leaves(result.best_params)[0]
    device = next(iter(leaf.devices())) if hasattr(leaf, "devices") else jax.devices()[0]
    steps = int(timing["steps"])
    return timing["train_seconds"] / steps, last["seconds"], steps, device


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m swan_jax.experiments.gpu_check",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--require-gpu", action="store_true",
                   help="exit with status 1 when the training did not run on a GPU")
    p.add_argument("--graphs", type=int, default=400, help="toy graphs (default 400)")
    p.add_argument("--nodes", type=int, default=50, help="nodes per graph (default 50)")
    p.add_argument("--hidden", type=int, default=64, help="SWAN width (default 64)")
    p.add_argument("--epochs", type=int, default=3, help="epochs, >= 2 (default 3)")
    args = p.parse_args(argv)
    if args.epochs < 2:
        p.error("--epochs must be >= 2: the first epoch compiles, the last one is timed")
    print(f"jax {jax.__version__}, default backend: {jax.default_backend()}")
    for d in jax.devices():
        print(f"  device {d.id}: {d.platform} {d.device_kind}")
    started = time.perf_counter()
    step, epoch, steps, device = timed_training(args.graphs, args.nodes, args.hidden,
                                                args.epochs)
    print(f"SWAN training step: {step * 1e3:.1f} ms; one epoch ({steps} steps + "
          f"validation): {epoch:.2f} s; whole check {time.perf_counter() - started:.1f} s")
    on_gpu = device.platform == "gpu" or device.platform in ("cuda", "rocm")
    if on_gpu:
        print(f"GPU used: yes ({device.device_kind})")
        return 0
    print(f"GPU used: no (the training ran on {device.platform}). For a GPU, install jax's "
          f"GPU build: make install DEVICE=cuda12 (CUDA 12 driver) or DEVICE=cuda13")
    return 1 if args.require_gpu else 0


if __name__ == "__main__":
    sys.exit(main())
