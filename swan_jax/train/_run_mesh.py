"""The runs of a program spread over devices: a `runs` mesh axis (`shard_runs=True`).

A program's state leads with `[R]` runs (grid points x seeds) and its step is `jax.vmap`
over them (`_step`), so run `r` never reads run `s`. Placing every run-leading array
with `NamedSharding(mesh, P("runs"))` over `D` devices gives each device `R / D` whole
runs; the data and batches are replicated, and XLA partitions the vmapped step along the
runs axis with no communication in it. No run reads another's numbers: a device's runs
are the same bits whatever the other devices train.

They are not one device's bits: they agree to float32 rounding. On XLA:CPU a run's
numbers follow the width of the vmapped program it sits in (`R` runs on one device,
`R / D` on each of `D`: `benchmarks/run_width_bits.py`), and the partitioned program may
simplify Adam's bias correction otherwise (docs/benchmarks-log.md, "the runs axis on
XLA:CPU"). What sharding must not do, mix runs, it does not: a device's runs are the same
bits whatever the other devices train (`tests/test_run_mesh.py`, 4 simulated CPU devices).

Across processes (after `jax.distributed.initialize()`), `jax.devices()` lists every
host's devices: the same program then holds on each process its own devices' runs. What
the host reads (losses, scores, a checkpoint's state) is gathered with
`multihost_utils.process_allgather` (`to_host`), so every process keeps the same
bookkeeping and makes the same decisions; files are written by process 0 only
(`writes_files`).

Runs that do not divide over the devices are refused in one line (no dummy runs: they
would change what a checkpoint holds with the device count). Choose a grid x seeds that
divides, or turn `shard_runs` off.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from swan_jax.settings import HINT, Hint, HintedError

AXIS = "runs"


class RunsDoNotDivide(HintedError, ValueError):
    """The runs of a program are not a multiple of the device count; its hint names
    `shard_runs`."""


def writes_files() -> bool:
    """Whether this process writes results and program files (process 0 only)."""
    return jax.process_index() == 0


def to_host(x: Any) -> np.ndarray:
    """A device array as NumPy on this process: gathered from every process when its
    shards live on several (`process_allgather` along the runs axis)."""
    if not isinstance(x, jax.Array) or x.is_fully_addressable or x.is_fully_replicated:
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def host_tree(tree: Any) -> Any:
    """`to_host` on every leaf (a checkpoint's state on a multi-process mesh)."""
    return jax.tree_util.tree_map(to_host, tree)


def check_divides(runs: int, what: str) -> None:
    """Refuse (one line) `runs` that do not divide over every device."""
    devices = jax.device_count()
    if runs % devices:
        raise RunsDoNotDivide(
            f"{what} has {runs} runs (grid points x seeds), which do not divide over "
            f"{devices} devices: choose grid points x seeds that are a multiple of "
            f"{devices}, or {HINT}", Hint("shard_runs", False,
                                          "train on one device ({switch})"))


class RunMesh:
    """Every device (of every process) on one `runs` axis; `runs` must divide evenly."""

    def __init__(self, runs: int, *, what: str = "the program"):
        devices = jax.devices()
        check_divides(runs, what)
        self.devices = len(devices)
        self.mesh = Mesh(np.asarray(devices), (AXIS,))
        self.split = NamedSharding(self.mesh, PartitionSpec(AXIS))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())

    def per_device(self, fn: Callable, runs: Sequence[bool]) -> Callable:
        """`fn` (vmapped over runs) on each device's own runs: `shard_map` with the
        arguments flagged in `runs` split along the runs axis, the others replicated, and
        every output run-leading. Each device runs `fn` on `R / D` runs, and nothing in
        it communicates."""
        specs = tuple(PartitionSpec(AXIS) if r else PartitionSpec() for r in runs)
        return jax.shard_map(fn, mesh=self.mesh, in_specs=specs,
                             out_specs=PartitionSpec(AXIS), check_vma=False)

    def share(self, tree: Any) -> Any:
        """The shapes of one device's share of run-leading arrays `[R / D, ...]` (what
        the memory check weighs against one device's free memory)."""
        return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(
            (a.shape[0] // self.devices,) + tuple(a.shape[1:]), a.dtype), tree)

    def place(self, tree: Any) -> Any:
        """Run-leading arrays `[R, ...]` split over the devices, `R / D` runs each. Each
        process materialises only its own devices' runs (from its host copy)."""
        return jax.tree_util.tree_map(lambda a: self._put(a, self.split), tree)

    def replicate(self, tree: Any) -> Any:
        """Arrays every run reads (the splits, a batch) on every device."""
        return jax.tree_util.tree_map(lambda a: self._put(a, self.replicated), tree)

    def _put(self, a, sharding: NamedSharding):
        if isinstance(a, jax.Array) and a.sharding == sharding:
            return a
        host = to_host(a)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
