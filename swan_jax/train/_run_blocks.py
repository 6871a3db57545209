"""The layout of a program's vmapped runs on this device: all at once, or one at a time.

A program's step and prediction are `jax.vmap` over its `[R]` runs, which share their
batch. `in_blocks(fn, runs, B)` computes the vmapped `fn` as `jax.lax.map` over
`[R / B, B, ...]` blocks of the run-leading arguments, one block of `B` vmapped runs
after another; without `B`, the layout is chosen per device (`by_device`): on a CPU, a
program whose runs share a batch of at least `CPU_ONE_AT_A_TIME_BYTES` computes its runs
one at a time (`B` = 1), elsewhere all at once. On the 2-core CPU a GraphProp program of
8 vmapped runs cost 1.16-1.18x a lone run per run in CPU time, in blocks of 2 0.99x, one
at a time 0.90x (docs/benchmarks-log.md, "A grid on a CPU"): the 8 runs' activations
(`[8, N, d]` per array, 9.5 MB at GraphProp's batch) leave the caches a lone run's fit.
Each run is then the lone run's width-1 program: its numbers are the lone run's
(GraphProp's 8 runs, 2 epochs: bit for bit; the tests' toy model: 1 ulp in one Adam
entry, as XLA simplifies a division inside the loop otherwise), where all vmapped they
differ from it by the width's rounding (XLA folds the product of the shared operand with
every run's weights into one matrix product whose blocking follows its size:
`benchmarks/run_width_bits.py`).

The training loop uses the device's layout alone (`Placement.over_runs`; with
`shard_runs` inside each device's share); an explicit `B` is for callers that compare
layouts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

# On a CPU, runs sharing a batch of at least this many bytes are computed one at a time
# (`by_device`). GraphProp's batch of 512 graphs is about 3 MB; the test suite's batches
# and transfer's tiny graphs stay below and keep one vmapped program.
CPU_ONE_AT_A_TIME_BYTES = 1 << 20


def in_blocks(fn: Callable, runs: Sequence[bool], block: int | None = None) -> Callable:
    """`fn` (vmapped over runs: the arguments flagged in `runs` lead with `[R]`, every
    output does) computed `block` runs at a time: `jax.lax.map` over the run-leading
    arguments reshaped to `[R / block, block, ...]`, the others shared by every block;
    the outputs reshaped back to `[R, ...]`. `block` None: as the device suits
    (`by_device`)."""
    if block is None:
        return by_device(fn, runs)
    return _blocked(fn, runs, block)


def by_device(fn: Callable, runs: Sequence[bool]) -> Callable:
    """`fn` in the layout this device computes fastest, chosen when traced: one run at a
    time on a CPU where the runs share at least `CPU_ONE_AT_A_TIME_BYTES` (see the module
    docstring), else `fn` itself (all runs vmapped at once; a lone run always)."""
    def chosen(*args: Any) -> Any:
        shared = sum(int(math.prod(leaf.shape)) * jnp.dtype(leaf.dtype).itemsize
                     for a, r in zip(args, runs, strict=True) if not r
                     for leaf in jax.tree_util.tree_leaves(a))
        if (_runs_of(args, runs) > 1 and jax.default_backend() == "cpu"
                and shared >= CPU_ONE_AT_A_TIME_BYTES):
            return _blocked(fn, runs, 1)(*args)
        return fn(*args)

    return chosen


def _blocked(fn: Callable, runs: Sequence[bool], block: int) -> Callable:
    """`in_blocks` with a block size."""

    def blocked(*args: Any) -> Any:
        count = _runs_of(args, runs)
        if count % block:
            raise ValueError(f"{count} runs do not split into blocks of {block}")

        def split(a):
            return a.reshape((count // block, block) + a.shape[1:])

        stacked = tuple(jax.tree_util.tree_map(split, a) for a, r in zip(args, runs,
                                                                         strict=True) if r)

        def one(parts):
            it = iter(parts)
            return fn(*(next(it) if r else a for a, r in zip(args, runs, strict=True)))

        out = jax.lax.map(one, stacked)
        return jax.tree_util.tree_map(lambda a: a.reshape((count,) + a.shape[2:]), out)

    return blocked


def _runs_of(args: Sequence[Any], runs: Sequence[bool]) -> int:
    """The leading `[R]` of the run-leading arguments."""
    leaves = [leaf for a, r in zip(args, runs, strict=True) if r
              for leaf in jax.tree_util.tree_leaves(a)]
    if not leaves:
        raise ValueError("in_blocks needs at least one run-leading argument")
    return int(leaves[0].shape[0])
