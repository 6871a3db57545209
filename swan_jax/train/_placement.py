"""Where arrays live (one device, a `batch` mesh over every device, or a `runs` mesh:
`_run_mesh`), how the vmapped runs are computed (the device's layout: `_run_blocks`),
and which rows of a batch are scored (targets and their mask)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np

from swan_jax.data.batching import Batch, iterate_batches, iterate_sharded_batches
from swan_jax.data.dataset import GraphDataset
from swan_jax.train._run_blocks import Stoppable, by_device
from swan_jax.train._run_mesh import RunMesh
from swan_jax.train._splits import split_rows


def flatten_shards(x):
    """`[D, R, ...] -> [D * R, ...]`: the rows of every device's sub-batch, in order."""
    return x.reshape((-1,) + x.shape[2:])


def batch_targets(batch: Batch, level: str, *, sharded: bool = False,
                  split_mask: bool = False, select=None):
    """`(target [R, T], mask [R])` of the rows a loss or metric scores.

    With `split_mask` (node splits on shared graphs, see `_splits`), the targets' last
    column is the split's node mask: it is cut off and joins the padding mask. `select`:
    the runs' `"split"` hyper-parameter where the column holds several splits (a scalar
    inside a run's vmapped code; `[runs]` outside it, and then `mask [runs, R]`).
    """
    target, mask = ((batch.node_targets, batch.node_mask) if level == "node"
                    else (batch.graph_targets, batch.graph_mask))
    if target is None:
        raise ValueError(f"the batch has no {level}-level targets")
    if sharded:
        target, mask = flatten_shards(target), flatten_shards(mask)
    if split_mask:
        mask = mask & split_rows(target[..., -1], select)
        target = target[..., :-1]
    return target, mask


class Placement:
    """One device, or `data_parallel`: one padded sub-batch per device, parameters
    replicated (works across hosts after `jax.distributed.initialize()`), or `runs`: the
    runs split over every device, data and batches replicated (`_run_mesh`)."""

    def __init__(self, data_parallel: bool, *, runs: RunMesh | None = None):
        self.runs = runs
        self.sharded = data_parallel
        self.num_shards = jax.device_count() if data_parallel else 1
        if data_parallel:
            mesh = jax.sharding.Mesh(np.asarray(jax.devices()), ("batch",))
            self.replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
            self.split = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))

    def over_runs(self, fn: Callable, runs: tuple[bool, ...], *,
                  stoppable: Stoppable | None = None) -> Callable:
        """`fn`, vmapped over the runs of the arguments flagged in `runs`, in the
        device's layout (`_run_blocks.by_device`; `stoppable`: runs that may stop), and
        with a runs mesh on each device's own runs."""
        fn = by_device(fn, runs, stoppable=stoppable)
        return fn if self.runs is None else self.runs.per_device(fn, runs)

    def batches(self, data: GraphDataset, batch_size: int, budget, rng=None):
        if not self.sharded:
            return iterate_batches(data, batch_size, budget, rng)
        return iterate_sharded_batches(data, batch_size, budget, self.num_shards, rng)

    def batch(self, batch: Batch) -> Batch:
        if self.runs is not None:
            return self.runs.replicate(batch)
        if not self.sharded:
            return jax.tree_util.tree_map(jnp.asarray, batch)
        # Each process materialises only its own devices' sub-batches (multi-host safe).
        return jax.tree_util.tree_map(
            lambda a: jax.make_array_from_callback(a.shape, self.split, lambda i: a[i]), batch)

    def state(self, tree):
        """Run-leading arrays `[runs, ...]`: split over the runs mesh, replicated over a
        data-parallel one, else as they are."""
        if self.runs is not None:
            return self.runs.place(tree)
        return tree if not self.sharded else jax.device_put(tree, self.replicated)

    def data(self, tree):
        """Arrays every run reads (a placed split): on every device of a runs mesh."""
        return jax.device_put(tree) if self.runs is None else self.runs.replicate(tree)

    def model_apply(self, model_fn: Callable[[Any], nn.Module]) -> Callable:
        """`jit((params, hp, graph) -> predictions [rows, T])` of one run, one function
        object per `model_fn` and placement (a training call's): the memory check, the
        training step and the evaluation then trace the model once per batch shape and
        reuse its jaxpr (JAX caches a jit's trace and its derivatives), instead of
        tracing the model's Python (Flax, the solve) in each of them. XLA inlines the
        inner call, so the compiled programs compute the same."""
        cache = self.__dict__.setdefault("_model_apply", {})
        if id(model_fn) not in cache:  # by identity: a callable need not be hashable
            cache[id(model_fn)] = (model_fn, jax.jit(
                lambda p, h, g: self.apply(model_fn(h), p, g)))
        return cache[id(model_fn)][1]

    def apply(self, module: nn.Module, params, graph: jraph.GraphsTuple):
        """Predictions `[rows, T]`; sharded: every sub-batch's rows, device by device."""
        if not self.sharded:
            return module.apply(params, graph)
        return flatten_shards(jax.vmap(module.apply, in_axes=(None, 0))(params, graph))
